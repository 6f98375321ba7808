#pragma once

// Cluster mode's request routing, kept pure so it is unit-tested without etcd: which partition
// each message of a Produce goes to on this node, and what Metadata answers, from one snapshot
// of the cluster's state (txmq::cluster::cluster_state, read from etcd by cluster::member).
//
// Partition choice (docs/cluster.md "Routing"): a keyed message goes to
// protocol::partition_for_key(key, partitions), the same partition single-node mode picks, and
// is refused with NOT_LEADER when this node does not lead it; a keyless message goes round-robin
// among the partitions this node leads (none led: NOT_LEADER naming a node that leads one).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "txmq/cluster/control_plane.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::broker::cluster_mode {

using cluster::node_id;

// Why this node cannot append a Produce, for the NOT_LEADER answer.
struct not_leader {
  std::string topic;
  std::int32_t partition = -1;               // -1: no partition of the topic is led here
  node_id leader = cluster::k_no_leader;     // k_no_leader: no node leads it (yet)
  std::string leader_address;                // advertised HOST:PORT, empty when unknown
  std::string text;                          // for a person
};

struct produce_route {
  // The topic is not in the cluster's state (create it, or UNKNOWN_TOPIC).
  bool unknown_topic = false;
  std::uint32_t partition_count = 0;
  // One per message when this node may append them all.
  std::vector<std::uint32_t> partitions;
  std::optional<not_leader> refused;
};

// `keys[i]` is the key of message i, nullptr for a keyless one. `round_robin` is this node's
// counter for keyless messages of the topic (advanced here).
[[nodiscard]] produce_route route_produce(const cluster::cluster_state& state, node_id self, const std::string& topic,
                                          const std::vector<const std::string*>& keys, std::uint32_t& round_robin);

// nullopt when `self` leads the partition in `state`; otherwise why not (NOT_LEADER, with the
// leader's address when known).
[[nodiscard]] std::optional<not_leader> partition_refusal(const cluster::cluster_state& state, node_id self,
                                                          const std::string& topic, std::int32_t partition);

// The advertised address of `id` among the live nodes, or "" when it is not live.
[[nodiscard]] std::string address_of(const cluster::cluster_state& state, node_id id);

// The Metadata answer from the cluster's state: live nodes, the controller, and per requested
// topic (all when `topics` is empty) every partition's leader, address, epoch, replicas, ISR.
void fill_metadata(const cluster::cluster_state& state, node_id self, const std::string& cluster_name,
                   const google::protobuf::RepeatedPtrField<std::string>& topics, v1::MetadataResponse& out);

// The Error frame body of a NOT_LEADER answer.
void fill_not_leader(const not_leader& why, v1::Error& out);

}  // namespace txmq::broker::cluster_mode
