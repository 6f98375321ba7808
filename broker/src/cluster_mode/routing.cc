#include "cluster_mode/routing.h"

#include <algorithm>
#include <optional>

#include "txmq/protocol/partitioner.h"

namespace txmq::broker::cluster_mode {

namespace {

const cluster::topic_config* find_topic(const cluster::cluster_state& state, const std::string& name) {
  for (const auto& t : state.topics) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const cluster::partition_state* find_partition(const cluster::cluster_state& state, const std::string& topic,
                                               std::int32_t p) {
  auto it = state.partitions.find({topic, p});
  return it == state.partitions.end() ? nullptr : &it->second.state;
}

not_leader refusal(const cluster::cluster_state& state, const std::string& topic, std::int32_t p, node_id self) {
  not_leader out;
  out.topic = topic;
  out.partition = p;
  const auto* ps = find_partition(state, topic, p);
  if (ps != nullptr) out.leader = ps->leader;
  if (out.leader != cluster::k_no_leader) out.leader_address = address_of(state, out.leader);
  const std::string where = "partition " + std::to_string(p) + " of topic '" + topic + "'";
  if (ps == nullptr) {
    out.text = where + " has no leader yet (the controller assigns one in a moment); retry";
  } else if (out.leader == cluster::k_no_leader) {
    out.text = where + " has no leader: every node of its ISR is down (no unclean election); retry when one returns";
  } else if (out.leader_address.empty()) {
    out.text = where + " is led by node " + std::to_string(out.leader) + ", which is not registered right now; retry";
  } else {
    out.text = where + " is led by node " + std::to_string(out.leader) + " at " + out.leader_address + ", not node " +
               std::to_string(self) + ": refresh metadata and send it there";
  }
  return out;
}

}  // namespace

std::optional<not_leader> partition_refusal(const cluster::cluster_state& state, node_id self, const std::string& topic,
                                            std::int32_t partition) {
  const auto* ps = find_partition(state, topic, partition);
  if (ps != nullptr && ps->leader == self) return std::nullopt;
  return refusal(state, topic, partition, self);
}

std::string address_of(const cluster::cluster_state& state, node_id id) {
  for (const auto& n : state.nodes) {
    if (n.id == id) return n.advertise;
  }
  return {};
}

produce_route route_produce(const cluster::cluster_state& state, node_id self, const std::string& topic,
                            const std::vector<const std::string*>& keys, std::uint32_t& round_robin) {
  produce_route out;
  const auto* t = find_topic(state, topic);
  if (t == nullptr || t->partitions <= 0) {
    out.unknown_topic = true;
    return out;
  }
  out.partition_count = static_cast<std::uint32_t>(t->partitions);
  std::vector<std::uint32_t> led;
  for (std::int32_t p = 0; p < t->partitions; ++p) {
    const auto* ps = find_partition(state, topic, p);
    if (ps != nullptr && ps->leader == self) led.push_back(static_cast<std::uint32_t>(p));
  }
  out.partitions.reserve(keys.size());
  // The keyless messages of one request all go to one partition, the next led here for each
  // request (round-robin per request, not per message): a replicated partition costs a
  // replication cycle per append — both followers fetch, append and fsync it — so a request
  // spread over the 2 partitions a broker leads cost twice the cycles of one (docs/BENCHMARKS.md
  // "Cluster"). Keyless messages promise no order and no placement.
  std::optional<std::uint32_t> keyless;
  for (const auto* key : keys) {
    if (key != nullptr) {
      const auto p = protocol::partition_for_key(*key, out.partition_count);
      if (std::find(led.begin(), led.end(), p) == led.end()) {
        out.refused = refusal(state, topic, static_cast<std::int32_t>(p), self);
        out.partitions.clear();
        return out;
      }
      out.partitions.push_back(p);
      continue;
    }
    if (led.empty()) {
      // Point the client at a node that leads some partition of the topic, if one does.
      for (std::int32_t p = 0; p < t->partitions; ++p) {
        auto r = refusal(state, topic, p, self);
        if (!r.leader_address.empty() || p + 1 == t->partitions) {
          r.partition = -1;
          r.text = "node " + std::to_string(self) + " leads no partition of topic '" + topic +
                   "'; a keyless message can go to any leader" +
                   (r.leader_address.empty() ? std::string(", and none is known now; retry")
                                             : ", e.g. node " + std::to_string(r.leader) + " at " + r.leader_address);
          out.refused = std::move(r);
          out.partitions.clear();
          return out;
        }
      }
    }
    if (!keyless) keyless = led[round_robin++ % led.size()];
    out.partitions.push_back(*keyless);
  }
  return out;
}

void fill_metadata(const cluster::cluster_state& state, node_id self, const std::string& cluster_name,
                   const google::protobuf::RepeatedPtrField<std::string>& topics, v1::MetadataResponse& out) {
  out.set_cluster(true);
  out.set_cluster_name(cluster_name);
  out.set_node_id(self);
  out.set_controller(state.controller ? state.controller->id : cluster::k_no_leader);
  for (const auto& n : state.nodes) {
    auto* node = out.add_nodes();
    node->set_id(n.id);
    node->set_address(n.advertise);
  }
  for (const auto& t : state.topics) {
    if (!topics.empty() && std::find(topics.begin(), topics.end(), t.name) == topics.end()) continue;
    auto* tm = out.add_topics();
    tm->set_name(t.name);
    tm->set_partitions(static_cast<std::uint32_t>(t.partitions));
    tm->set_replicas(static_cast<std::uint32_t>(t.replicas));
    tm->set_min_insync_replicas(static_cast<std::uint32_t>(cluster::min_insync_replicas(t)));
    tm->set_retention_ms(t.retention_ms);
    tm->set_retention_bytes(t.retention_bytes);
    for (std::int32_t p = 0; p < t.partitions; ++p) {
      auto* pm = tm->add_partition_info();
      pm->set_partition(static_cast<std::uint32_t>(p));
      const auto* ps = find_partition(state, t.name, p);
      if (ps == nullptr) {
        pm->set_leader(cluster::k_no_leader);
        continue;
      }
      pm->set_leader(ps->leader);
      if (ps->leader != cluster::k_no_leader) pm->set_leader_address(address_of(state, ps->leader));
      pm->set_leader_epoch(ps->leader_epoch);
      for (auto r : ps->replicas) pm->add_replicas(r);
      for (auto r : ps->isr) pm->add_isr(r);
    }
  }
}

void fill_not_leader(const not_leader& why, v1::Error& out) {
  out.set_code(v1::NOT_LEADER);
  out.set_message(why.text);
  out.set_topic(why.topic);
  out.set_partition(why.partition);
  out.set_leader_node_id(why.leader);
  out.set_leader_address(why.leader_address);
}

}  // namespace txmq::broker::cluster_mode
