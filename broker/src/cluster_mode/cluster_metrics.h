#pragma once

// The metrics of DESIGN.md §8 that this node can know from the cluster state it reads from etcd
// (docs/cluster.md "Metrics"). Each node reports what it is responsible for, so a sum over the
// nodes is the cluster's figure:
//   txmq_under_replicated_partitions  gauge: partitions led here whose ISR is smaller than their
//                                     replica set
//   txmq_isr_shrinks_total            ISR changes that removed members, of partitions led here
//   txmq_isr_expands_total            ISR changes that added members, of partitions led here
//   txmq_leader_elections_total       leader changes this node wrote as controller (to a new
//                                     leader or to none)
//   txmq_replica_lag_messages         gauge {topic,partition,node}: per follower of a partition
//                                     led here, the leader's log end minus what the follower last
//                                     reported fsynced (replication.h, every 500 ms)
// The ISR counters compare successive states this node read (sampled by cluster_node every
// 100 ms: a shrink and expand of one partition within one sample count nothing).
//
// Thread-safety: observe() from one thread at a time; the metrics are read at scrape time on
// the HTTP server's thread (atomics and snapshot reads).

#include <cstdint>
#include <memory>

#include "txmq/cluster/control_plane.h"
#include "txmq/common/metrics.h"

namespace txmq::broker::cluster_mode {

class cluster_node;

struct isr_changes {
  std::uint64_t shrinks = 0;
  std::uint64_t expands = 0;
};

// ISR changes between two states of the partitions `self` leads in `after` (one shrink when
// members left, one expand when members joined; a partition absent from `before` counts none).
[[nodiscard]] isr_changes compare_isr(const cluster::cluster_state& before, const cluster::cluster_state& after,
                                      cluster::node_id self);
// Partitions led by `self` whose ISR has fewer members than their replicas.
[[nodiscard]] std::size_t under_replicated_led_by(const cluster::cluster_state& state, cluster::node_id self);

class cluster_metrics {
 public:
  // Registers the five families; `node` must outlive the registry's scrapes of them.
  cluster_metrics(common::metrics_registry& registry, const cluster_node& node);
  // Counts the ISR changes since the state seen last time.
  void observe();

 private:
  const cluster_node& node_;
  common::counter& shrinks_;
  common::counter& expands_;
  std::shared_ptr<const cluster::cluster_state> last_;
};

}  // namespace txmq::broker::cluster_mode
