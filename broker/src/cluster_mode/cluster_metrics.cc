#include "cluster_mode/cluster_metrics.h"

#include <algorithm>

#include "cluster_mode/cluster_node.h"

namespace txmq::broker::cluster_mode {
namespace {

bool contains(const std::vector<cluster::node_id>& list, cluster::node_id id) {
  return std::find(list.begin(), list.end(), id) != list.end();
}

}  // namespace

isr_changes compare_isr(const cluster::cluster_state& before, const cluster::cluster_state& after, cluster::node_id self) {
  isr_changes out;
  for (const auto& [key, entry] : after.partitions) {
    if (entry.state.leader != self) continue;
    const auto it = before.partitions.find(key);
    if (it == before.partitions.end()) continue;
    const auto& was = it->second.state.isr;
    const auto& now = entry.state.isr;
    if (std::any_of(was.begin(), was.end(), [&](auto id) { return !contains(now, id); })) ++out.shrinks;
    if (std::any_of(now.begin(), now.end(), [&](auto id) { return !contains(was, id); })) ++out.expands;
  }
  return out;
}

std::size_t under_replicated_led_by(const cluster::cluster_state& state, cluster::node_id self) {
  return static_cast<std::size_t>(std::count_if(state.partitions.begin(), state.partitions.end(), [&](const auto& e) {
    return e.second.state.leader == self && e.second.state.isr.size() < e.second.state.replicas.size();
  }));
}

cluster_metrics::cluster_metrics(common::metrics_registry& registry, const cluster_node& node)
    : node_(node),
      shrinks_(registry.add_counter("txmq_isr_shrinks_total",
                                    "ISR changes that removed members, of partitions led by this node (from etcd)")),
      expands_(registry.add_counter("txmq_isr_expands_total",
                                    "ISR changes that added members, of partitions led by this node (from etcd)")) {
  registry.add_gauge_callback("txmq_under_replicated_partitions",
                              "Partitions led by this node whose ISR is smaller than their replica set", {}, [this] {
                                const auto s = node_.snapshot();
                                return s ? static_cast<double>(under_replicated_led_by(*s, node_.id())) : 0.0;
                              });
  registry.add_counter_callback("txmq_leader_elections_total",
                                "Partition leader changes this node wrote as controller (to a new leader or to none)",
                                {}, [this] { return static_cast<double>(node_.leader_elections()); });
  registry.add_gauge_collector(
      "txmq_replica_lag_messages",
      "Messages a follower has not yet reported fsynced, per partition led by this node and follower node",
      [this] {
        common::metrics_registry::collected_series out;
        for (const auto& l : node_.replica_lag()) {
          out.push_back({{{"topic", l.topic}, {"partition", std::to_string(l.partition)}, {"node", std::to_string(l.node)}},
                         static_cast<double>(l.messages)});
        }
        return out;
      });
}

void cluster_metrics::observe() {
  auto now = node_.snapshot();
  if (!now || now == last_) return;
  if (last_) {
    const auto changes = compare_isr(*last_, *now, node_.id());
    if (changes.shrinks) shrinks_.inc(changes.shrinks);
    if (changes.expands) expands_.inc(changes.expands);
  }
  last_ = std::move(now);
}

}  // namespace txmq::broker::cluster_mode
