#pragma once

// `txmq cluster status`: the cluster as the broker's Metadata answer shows it (docs/cluster.md):
// nodes, the controller, and per partition its leader, epoch, replicas and ISR, partitions
// without a full ISR (or without a leader) first. Private to txmq_cli.

#include "session.h"

namespace txmq::cli::detail {

int cluster_status(session& s);

}  // namespace txmq::cli::detail
