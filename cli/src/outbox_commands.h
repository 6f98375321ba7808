#pragma once

// `txmq outbox init` and `txmq outbox status` (cli/README.md): they talk to the application's
// PostgreSQL database, not to the broker. Private to txmq_cli.

#include <string>

#include "session.h"

namespace txmq::cli::detail {

// Installs (or migrates) the txmq schema with `shards` (0: the default, 16); prints version and
// shard count.
int outbox_init(session& s, const std::string& conninfo, int shards);
// Rows waiting per shard, the oldest one's age, and the relay holding each shard (from the
// advisory locks in pg_locks, named by txmq_relay); then one line per relay.
int outbox_status(session& s, const std::string& conninfo);

}  // namespace txmq::cli::detail
