#include "txmq/cluster/control_plane.h"

#include <algorithm>
#include <charconv>
#include <functional>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "etcd_json.h"
#include "txmq/cluster/auth_records.h"
#include "txmq/cluster/errc.h"

namespace txmq::cluster {
namespace asio = boost::asio;
namespace json = boost::json;
using detail::bad_value;

namespace {

result<json::object> parse(std::string_view what, std::string_view text) {
  std::error_code ec;
  auto v = json::parse(text, ec);
  if (ec || !v.is_object()) return bad_value(what, "not a JSON object");
  return std::move(v.get_object());
}

json::array ids(const std::vector<node_id>& v) {
  json::array a;
  for (auto id : v) a.push_back(id);
  return a;
}

result<std::vector<node_id>> get_ids(const json::object& o, std::string_view field, std::string_view what) {
  std::vector<node_id> out;
  const auto* v = o.if_contains(field);
  if (v == nullptr) return out;
  if (!v->is_array()) return bad_value(what, std::string(field) + " is not a list");
  for (const auto& item : v->get_array()) {
    if (!item.is_int64()) return bad_value(what, std::string(field) + " holds a non-number");
    out.push_back(item.get_int64());
  }
  return out;
}

txn_request state_read(const key_layout& keys) {
  txn_request req;
  for (const auto& prefix : {keys.nodes_prefix(), keys.topics_prefix(), keys.partitions_prefix()})
    req.success.push_back(op_range{prefix, prefix_end(prefix)});
  req.success.push_back(op_range{keys.controller(), {}});
  for (const auto& prefix : {keys.principals_prefix(), keys.acls_prefix(), keys.webhooks_prefix()})
    req.success.push_back(op_range{prefix, prefix_end(prefix)});
  return req;
}

bool contains(const std::vector<node_id>& v, node_id id) { return std::find(v.begin(), v.end(), id) != v.end(); }

}  // namespace

key_layout::key_layout(std::string cluster_name) : root_("/" + std::move(cluster_name) + "/") {}

std::string encode(const node_info& n) {
  return json::serialize(json::object{{"id", n.id}, {"advertise", n.advertise}});
}

std::string encode(const topic_config& t) {
  json::object o{{"partitions", t.partitions}, {"replicas", t.replicas}};
  // Only when set: a topic record without them reads as before (the defaults).
  if (t.min_insync > 0) o["min_insync_replicas"] = t.min_insync;
  if (t.retention_ms > 0) o["retention_ms"] = t.retention_ms;
  if (t.retention_bytes > 0) o["retention_bytes"] = t.retention_bytes;
  return json::serialize(o);
}

std::string encode(const partition_state& s) {
  return json::serialize(json::object{
      {"leader", s.leader}, {"leader_epoch", s.leader_epoch}, {"replicas", ids(s.replicas)}, {"isr", ids(s.isr)}});
}

result<node_info> decode_node(std::string_view text) {
  TXMQ_TRY(auto o, parse("a node entry", text));
  node_info n;
  TXMQ_TRY(n.id, detail::get_int64(o, "id"));
  if (const auto* a = o.if_contains("advertise"); a != nullptr && a->is_string()) n.advertise = std::string(a->get_string());
  return n;
}

result<topic_config> decode_topic(std::string_view name, std::string_view text) {
  TXMQ_TRY(auto o, parse("a topic entry", text));
  topic_config t;
  t.name = std::string(name);
  TXMQ_TRY(const auto partitions, detail::get_int64(o, "partitions"));
  TXMQ_TRY(const auto replicas, detail::get_int64(o, "replicas"));
  if (partitions < 1 || partitions > 1 << 16 || replicas < 1 || replicas > 16)
    return bad_value("topic '" + std::string(name) + "'", "partitions or replicas out of range");
  t.partitions = static_cast<std::int32_t>(partitions);
  t.replicas = static_cast<std::int32_t>(replicas);
  if (o.contains("min_insync_replicas")) {
    TXMQ_TRY(const auto m, detail::get_int64(o, "min_insync_replicas"));
    if (m < 0 || m > replicas) return bad_value("topic '" + std::string(name) + "'", "min_insync_replicas out of range");
    t.min_insync = static_cast<std::int32_t>(m);
  }
  if (o.contains("retention_ms")) {
    TXMQ_TRY(t.retention_ms, detail::get_int64(o, "retention_ms"));
  }
  if (o.contains("retention_bytes")) {
    TXMQ_TRY(const auto b, detail::get_int64(o, "retention_bytes"));
    if (b < 0) return bad_value("topic '" + std::string(name) + "'", "retention_bytes out of range");
    t.retention_bytes = static_cast<std::uint64_t>(b);
  }
  return t;
}

result<partition_state> decode_partition(std::string_view text) {
  TXMQ_TRY(auto o, parse("a partition state", text));
  partition_state s;
  TXMQ_TRY(s.leader, detail::get_int64(o, "leader"));
  TXMQ_TRY(s.leader_epoch, detail::get_int64(o, "leader_epoch"));
  TXMQ_TRY(s.replicas, get_ids(o, "replicas", "a partition state"));
  TXMQ_TRY(s.isr, get_ids(o, "isr", "a partition state"));
  return s;
}

std::vector<node_id> assign_replicas(std::string_view topic, std::int32_t partition, std::int32_t replicas,
                                     std::vector<node_id> live) {
  std::sort(live.begin(), live.end());
  live.erase(std::unique(live.begin(), live.end()), live.end());
  std::vector<node_id> out;
  if (live.empty()) return out;
  // The topic's hash shifts where partition 0 starts, so that many single-partition topics do
  // not all land on the smallest node id.
  const std::size_t start = (std::hash<std::string_view>{}(topic) + static_cast<std::size_t>(partition)) % live.size();
  const auto n = std::min<std::size_t>(static_cast<std::size_t>(std::max(replicas, 1)), live.size());
  for (std::size_t i = 0; i < n; ++i) out.push_back(live[(start + i) % live.size()]);
  return out;
}

partition_state initial_state(std::vector<node_id> replicas) {
  partition_state s;
  s.replicas = std::move(replicas);
  s.isr = s.replicas;
  s.leader = s.replicas.empty() ? k_no_leader : s.replicas.front();
  s.leader_epoch = 1;
  return s;
}

std::optional<partition_state> after_membership_change(const partition_state& s, const std::set<node_id>& live) {
  std::vector<node_id> live_isr;
  for (auto id : s.isr)
    if (live.contains(id)) live_isr.push_back(id);
  partition_state next = s;
  if (s.leader != k_no_leader && live.contains(s.leader)) {
    // The leader stays; followers that are gone cannot be in sync (the controller's part of ISR
    // shrinking; the leader shrinks it for slow followers once replication exists).
    next.isr = live_isr;
    if (!contains(next.isr, s.leader)) next.isr.insert(next.isr.begin(), s.leader);
  } else if (!live_isr.empty()) {
    next.leader = live_isr.front();
    next.isr = live_isr;
    next.leader_epoch = s.leader_epoch + 1;
  } else if (s.leader != k_no_leader) {
    // Every ISR member is down: only one of them holds every acknowledged write, so nobody else
    // may lead. Leaderless until one returns; the ISR is kept to say who may.
    next.leader = k_no_leader;
    next.leader_epoch = s.leader_epoch + 1;
  }
  if (next == s) return std::nullopt;
  return next;
}

std::vector<std::pair<std::string, std::int32_t>> cluster_state::leaderless() const {
  std::vector<std::pair<std::string, std::int32_t>> out;
  for (const auto& [key, entry] : partitions)
    if (entry.state.leader == k_no_leader) out.push_back(key);
  return out;
}

namespace {

result<cluster_state> decode_state(const key_layout& keys, const txn_result& r) {
  if (r.ranges.size() != 4 && r.ranges.size() != 7)
    return error(errc::bad_response, "the state read answered " + std::to_string(r.ranges.size()) + " ranges, not 7");
  cluster_state st;
  st.revision = r.revision;
  for (const auto& kv : r.ranges[0].kvs) {
    TXMQ_TRY(auto n, decode_node(kv.value));
    st.nodes.push_back(std::move(n));
  }
  const auto topics_prefix = keys.topics_prefix();
  for (const auto& kv : r.ranges[1].kvs) {
    TXMQ_TRY(auto t, decode_topic(std::string_view(kv.key).substr(topics_prefix.size()), kv.value));
    st.topics.push_back(std::move(t));
  }
  const auto parts_prefix = keys.partitions_prefix();
  for (const auto& kv : r.ranges[2].kvs) {
    const std::string_view rest = std::string_view(kv.key).substr(parts_prefix.size());
    const auto slash = rest.rfind('/');
    std::int32_t p = -1;
    if (slash != std::string_view::npos) std::from_chars(rest.data() + slash + 1, rest.data() + rest.size(), p);
    if (p < 0) return error(errc::bad_response, "etcd holds a partition key txmq did not write: " + kv.key);
    TXMQ_TRY(auto s, decode_partition(kv.value));
    st.partitions[{std::string(rest.substr(0, slash)), p}] = partition_entry{std::move(s), kv.mod_revision};
  }
  if (!r.ranges[3].kvs.empty()) {
    const auto& kv = r.ranges[3].kvs.front();
    TXMQ_TRY(auto n, decode_node(kv.value));
    st.controller = controller_info{n.id, kv.create_revision, kv.lease};
  }
  if (r.ranges.size() == 7) {
    for (const auto& kv : r.ranges[6].kvs)
      st.webhooks.emplace_back(kv.key.substr(keys.webhooks_prefix().size()), kv.value);
    for (const auto& kv : r.ranges[4].kvs) {
      TXMQ_TRY(auto p, decode_principal(std::string_view(kv.key).substr(keys.principals_prefix().size()), kv.value));
      st.principals.push_back(std::move(p));
    }
    for (const auto& kv : r.ranges[5].kvs) {
      TXMQ_TRY(auto a, decode_acl(kv.value));
      st.acls.push_back(std::move(a));
    }
  }
  return st;
}

}  // namespace

asio::awaitable<result<cluster_state>> read_cluster_state(etcd_client& etcd, const key_layout& keys) {
  const txn_request read = state_read(keys);  // named: see member.cc on temporaries in co_await
  auto answer = co_await etcd.txn(read);
  if (!answer) co_return answer.error();
  co_return decode_state(keys, answer.value());
}

asio::awaitable<result<void>> create_topic(etcd_client& etcd, const key_layout& keys, const topic_config& topic) {
  if (topic.name.empty() || topic.name.find('/') != std::string::npos)
    co_return error(errc::invalid_argument, "topic name '" + topic.name + "' must be non-empty and hold no '/'");
  if (topic.partitions < 1 || topic.replicas < 1)
    co_return error(errc::invalid_argument, "a topic needs at least one partition and one replica");
  txn_request req;
  req.compares.push_back({keys.topic(topic.name), compare_target::create_revision, compare_result::equal, 0, {}});
  req.success.push_back(op_put{keys.topic(topic.name), encode(topic), 0});
  auto answer = co_await etcd.txn(req);
  if (!answer) co_return answer.error();
  if (!answer.value().succeeded) co_return error(errc::compare_failed, "topic '" + topic.name + "' exists");
  co_return outcome::success();
}

asio::awaitable<result<topic_config>> alter_topic(etcd_client& etcd, const key_layout& keys, std::string name,
                                                  std::function<result<void>(topic_config&)> change, int attempts) {
  const auto key = keys.topic(name);
  for (int i = 0; i < attempts; ++i) {
    auto read = co_await etcd.range(key);
    if (!read) co_return read.error();
    if (read.value().kvs.empty()) co_return error(errc::not_found, "no topic '" + name + "' in the cluster");
    const auto& kv = read.value().kvs.front();
    auto t = decode_topic(name, kv.value);
    if (!t) co_return t.error();
    if (auto r = change(t.value()); !r) co_return r.error();
    txn_request req;
    req.compares.push_back({key, compare_target::mod_revision, compare_result::equal, kv.mod_revision, {}});
    req.success.push_back(op_put{key, encode(t.value()), 0});
    auto answer = co_await etcd.txn(req);
    if (!answer) co_return answer.error();
    if (answer.value().succeeded) co_return std::move(t).value();
    // Someone else changed the topic since the read: apply the change to what they wrote.
  }
  co_return error(errc::compare_failed, "topic '" + name + "' kept changing under " + std::to_string(attempts) +
                                            " attempts to alter it; try again");
}

asio::awaitable<result<std::optional<controller_info>>> campaign(etcd_client& etcd, const key_layout& keys,
                                                                 node_id self, std::int64_t lease) {
  txn_request req;
  req.compares.push_back({keys.controller(), compare_target::create_revision, compare_result::equal, 0, {}});
  req.success.push_back(op_put{keys.controller(), encode(node_info{self, {}}), lease});
  req.success.push_back(op_range{keys.controller(), {}});
  req.failure.push_back(op_range{keys.controller(), {}});
  auto answer = co_await etcd.txn(req);
  if (!answer) co_return answer.error();
  const auto& r = answer.value();
  if (r.ranges.empty() || r.ranges.front().kvs.empty()) co_return std::optional<controller_info>();
  const auto& kv = r.ranges.front().kvs.front();
  auto holder = decode_node(kv.value);
  if (!holder) co_return holder.error();
  // Also ours when a previous campaign on this lease won and its answer was lost.
  if (holder.value().id != self || kv.lease != lease) co_return std::optional<controller_info>();
  co_return std::optional<controller_info>(controller_info{self, kv.create_revision, kv.lease});
}

asio::awaitable<result<std::int64_t>> write_partition_state(etcd_client& etcd, const key_layout& keys,
                                                            std::string_view topic, std::int32_t partition,
                                                            const partition_state& state,
                                                            std::int64_t expected_mod_revision,
                                                            std::int64_t controller_create_revision) {
  const auto key = keys.partition(topic, partition);
  txn_request req;
  req.compares.push_back({keys.controller(), compare_target::create_revision, compare_result::equal,
                          controller_create_revision, {}});
  if (expected_mod_revision == 0)
    req.compares.push_back({key, compare_target::create_revision, compare_result::equal, 0, {}});
  else
    req.compares.push_back({key, compare_target::mod_revision, compare_result::equal, expected_mod_revision, {}});
  req.success.push_back(op_put{key, encode(state), 0});
  req.failure.push_back(op_range{keys.controller(), {}});
  auto answer = co_await etcd.txn(req);
  if (!answer) co_return answer.error();
  const auto& r = answer.value();
  if (r.succeeded) co_return r.revision;
  const bool still_controller = !r.ranges.empty() && !r.ranges.front().kvs.empty() &&
                                r.ranges.front().kvs.front().create_revision == controller_create_revision;
  if (!still_controller)
    co_return error(errc::not_controller, "partition " + std::string(topic) + "/" + std::to_string(partition) +
                                              ": not written, this node is no longer the controller (term " +
                                              std::to_string(controller_create_revision) + " is over)");
  co_return error(errc::compare_failed, "partition " + std::string(topic) + "/" + std::to_string(partition) +
                                            " changed since it was read (expected revision " +
                                            std::to_string(expected_mod_revision) + ")");
}

}  // namespace txmq::cluster
