#pragma once

// What the cluster keeps in etcd (DESIGN.md §8) and the writes that change it, all under the
// prefix "/<cluster_name>/":
//
//   nodes/<id>                 {"id":N,"advertise":"HOST:PORT"}  on the node's lease
//   controller                 {"id":N}                          on the controller's lease
//   topics/<name>              {"partitions":P,"replicas":R}
//   partitions/<topic>/<p>     {"leader":N,"leader_epoch":E,"replicas":[..],"isr":[..]}
//   principals/<name>          {"token_sha256":"<hex>","created_ms":T}   (auth_records.h)
//   acls/<principal>/<perm>/<resource>  {"principal":..,"permission":..,"resource":..}
//   webhooks/<id>              the subscription record (protobuf bytes, the broker's)
//
// Fencing: a partition's state is only ever written by a transaction that compares the key's
// mod_revision with the one its writer read (create_revision 0 for a new key) AND the controller
// key's create_revision with the writer's own controllership. A controller that lost its lease
// (and so the key), or that decided on a state someone changed since, writes nothing.
//
// The pure decisions (replica assignment, leader election from the ISR) are free functions,
// unit-tested without etcd. Thread-safety: the coroutines run on the etcd client's thread.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "txmq/cluster/etcd_client.h"
#include "txmq/protocol/result.h"

namespace txmq::cluster {

using node_id = std::int64_t;
inline constexpr node_id k_no_leader = -1;

// Key names under "/<cluster_name>/".
class key_layout {
 public:
  explicit key_layout(std::string cluster_name);
  [[nodiscard]] const std::string& root() const noexcept { return root_; }  // "/txmq/"
  [[nodiscard]] std::string nodes_prefix() const { return root_ + "nodes/"; }
  [[nodiscard]] std::string node(node_id id) const { return nodes_prefix() + std::to_string(id); }
  [[nodiscard]] std::string controller() const { return root_ + "controller"; }
  [[nodiscard]] std::string topics_prefix() const { return root_ + "topics/"; }
  [[nodiscard]] std::string topic(std::string_view name) const { return topics_prefix() + std::string(name); }
  [[nodiscard]] std::string partitions_prefix() const { return root_ + "partitions/"; }
  [[nodiscard]] std::string principals_prefix() const { return root_ + "principals/"; }
  [[nodiscard]] std::string principal(std::string_view name) const { return principals_prefix() + std::string(name); }
  [[nodiscard]] std::string acls_prefix() const { return root_ + "acls/"; }
  [[nodiscard]] std::string webhooks_prefix() const { return root_ + "webhooks/"; }
  [[nodiscard]] std::string webhook(std::string_view id) const { return webhooks_prefix() + std::string(id); }
  // Every grant of one principal: acls/<principal>/ (principal names hold no '/').
  [[nodiscard]] std::string acls_of(std::string_view principal) const {
    return acls_prefix() + std::string(principal) + "/";
  }
  [[nodiscard]] std::string partition(std::string_view topic, std::int32_t p) const {
    return partitions_prefix() + std::string(topic) + "/" + std::to_string(p);
  }

 private:
  std::string root_;
};

struct node_info {
  node_id id = 0;
  std::string advertise;  // HOST:PORT clients connect to
  bool operator==(const node_info&) const = default;
};

struct topic_config {
  std::string name;
  std::int32_t partitions = 4;
  std::int32_t replicas = 1;
  // Kept with the topic in etcd, applied by every node (0: the default / the broker's own).
  std::int32_t min_insync = 0;        // min_insync_replicas; 0 = 2 with >= 3 replicas, else 1
  std::int64_t retention_ms = 0;      // 0 = the broker's retention
  std::uint64_t retention_bytes = 0;  // 0 = the broker's retention_bytes
  bool operator==(const topic_config&) const = default;
};

// The topic's min_insync_replicas in effect: its own when set, else DESIGN §8's default (2 with
// 3 or more replicas, else 1).
[[nodiscard]] inline std::size_t min_insync_replicas(const topic_config& t) {
  if (t.min_insync > 0) return static_cast<std::size_t>(t.min_insync);
  return t.replicas >= 3 ? 2 : 1;
}

struct partition_state {
  node_id leader = k_no_leader;
  std::int64_t leader_epoch = 0;  // +1 on every change of leader (including to none)
  std::vector<node_id> replicas;  // assigned replicas, preferred leader first
  std::vector<node_id> isr;       // in-sync replicas; a leader is only ever taken from here
  bool operator==(const partition_state&) const = default;
};

[[nodiscard]] std::string encode(const node_info& n);
[[nodiscard]] std::string encode(const topic_config& t);  // without the name (it is the key)
[[nodiscard]] std::string encode(const partition_state& s);
// Errors: errc::bad_response naming what is wrong (a key that someone else wrote).
[[nodiscard]] result<node_info> decode_node(std::string_view json);
[[nodiscard]] result<topic_config> decode_topic(std::string_view name, std::string_view json);
[[nodiscard]] result<partition_state> decode_partition(std::string_view json);

// The replicas of a new partition: `replicas` distinct live nodes (fewer when fewer are live),
// rotated by the partition number and the topic's name so leaderships spread over the nodes.
// The first is the preferred leader. `live` must be non-empty.
[[nodiscard]] std::vector<node_id> assign_replicas(std::string_view topic, std::int32_t partition,
                                                   std::int32_t replicas, std::vector<node_id> live);
[[nodiscard]] partition_state initial_state(std::vector<node_id> replicas);

// The state a partition must move to when the live nodes are `live`; nullopt when it stays.
//  - leader alive: dead followers leave the ISR; epoch unchanged.
//  - leader dead or none: the first live ISR member leads, the ISR shrinks to the live members,
//    epoch + 1. No live ISR member: no leader (epoch + 1 when there was one), the ISR kept as it
//    was, so that only one of its members can lead again (no unclean election).
[[nodiscard]] std::optional<partition_state> after_membership_change(const partition_state& s,
                                                                     const std::set<node_id>& live);

// A principal and a grant as the cluster keeps them (docs/cluster.md "Principals and ACLs"):
// never a token, only its SHA-256 (raw 32 bytes here, hex in etcd).
struct principal_record {
  std::string name;
  std::string token_sha256;
  std::int64_t created_ms = 0;
  bool operator==(const principal_record&) const = default;
};
struct acl_record {
  std::string principal;
  std::string permission;
  std::string resource;
  bool operator==(const acl_record&) const = default;
};

struct controller_info {
  node_id id = 0;
  std::int64_t create_revision = 0;  // identifies one term of controllership
  std::int64_t lease = 0;
};

struct partition_entry {
  partition_state state;
  std::int64_t mod_revision = 0;
};

// Everything under the prefix, read in one transaction (one revision, a consistent snapshot).
struct cluster_state {
  std::int64_t revision = 0;
  std::vector<node_info> nodes;  // live: their lease holds
  std::optional<controller_info> controller;
  std::vector<topic_config> topics;
  std::map<std::pair<std::string, std::int32_t>, partition_entry> partitions;
  std::vector<principal_record> principals;  // by name
  std::vector<acl_record> acls;              // by key
  // Webhook subscriptions: id → the broker's serialized record (opaque here; auth_records.h).
  std::vector<std::pair<std::string, std::string>> webhooks;
  // Partitions without a leader (their ISR is down), for reports.
  [[nodiscard]] std::vector<std::pair<std::string, std::int32_t>> leaderless() const;
};

// Errors: etcd's (errc.h); bad_response for a key whose value is not ours.
boost::asio::awaitable<result<cluster_state>> read_cluster_state(etcd_client& etcd, const key_layout& keys);

// Writes the topic's config if no topic of that name exists. Errors: compare_failed ("topic
// exists"), invalid_argument for a bad name or count, etcd's.
boost::asio::awaitable<result<void>> create_topic(etcd_client& etcd, const key_layout& keys, const topic_config& topic);

// Changes an existing topic's settings (docs/cluster.md "Topic settings"): reads topics/<name>,
// lets `change` edit the config (its error is returned as is: a setting out of range), and
// writes it back only if the key is still at the mod_revision read. A concurrent change makes
// the compare fail: the key is read again and `change` applied to the new value, up to
// `attempts` times. Returns the config written. Errors: not_found (no such topic),
// compare_failed (still changing after `attempts` reads), `change`'s, etcd's.
boost::asio::awaitable<result<topic_config>> alter_topic(etcd_client& etcd, const key_layout& keys,
                                                         std::string name,
                                                         std::function<result<void>(topic_config&)> change,
                                                         int attempts = 5);

// Tries to become the controller: writes the controller key on `lease` if it is absent.
// Returns the key's create_revision when this node holds it now (also when it already did),
// nullopt when another node does.
boost::asio::awaitable<result<std::optional<controller_info>>> campaign(etcd_client& etcd, const key_layout& keys,
                                                                        node_id self, std::int64_t lease);

// Writes a partition's state as the controller of term `controller_create_revision`, if the
// partition key is still at `expected_mod_revision` (0: it must not exist yet). Returns the
// revision written. Errors: not_controller when the controller key is gone or belongs to
// another term (a stale controller), compare_failed when the partition changed meanwhile.
boost::asio::awaitable<result<std::int64_t>> write_partition_state(etcd_client& etcd, const key_layout& keys,
                                                                   std::string_view topic, std::int32_t partition,
                                                                   const partition_state& state,
                                                                   std::int64_t expected_mod_revision,
                                                                   std::int64_t controller_create_revision);

// A partition leader's own write of its partition's state (isr_write.cc): `state` is the state
// as read at `expected_mod_revision` with the ISR changed, or, when the leader drains before
// it stops, with the leadership handed to another ISR member (epoch + 1, itself out of the ISR). Errors: compare_failed when the
// partition key changed since (a new leader or epoch: the writer is stale), etcd's.
boost::asio::awaitable<result<std::int64_t>> write_isr(etcd_client& etcd, const key_layout& keys,
                                                       std::string_view topic, std::int32_t partition,
                                                       const partition_state& state,
                                                       std::int64_t expected_mod_revision);

}  // namespace txmq::cluster
