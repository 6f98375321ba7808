#include "auth/request_access.h"

#include <algorithm>
#include <set>

namespace txmq::broker::auth {

namespace {

using lk = request_lookups;

std::vector<need> admin(const v1::Frame&, const lk&) { return {{permission::admin, std::string(k_cluster)}}; }

// Metadata (who leads what, node addresses) is what every client needs to reach the right
// broker, as Kafka's Metadata: an authenticated connection is enough; it names no data.
std::vector<need> any_principal(const v1::Frame&, const lk&) { return {}; }

// A follower's fetch: the cluster's inter-broker principal only (access_control::allows).
std::vector<need> replicate(const v1::Frame&, const lk&) { return {{permission::replicate, std::string(k_cluster)}}; }

std::vector<need> produce(const v1::Frame& f, const lk&) {
  return {{permission::produce, topic_resource(f.produce().topic())}};
}

// consume on the group and on each topic it reads or settles (both are needed).
std::vector<need> consume(const std::string& group, const std::set<std::string>& topics) {
  std::vector<need> out{{permission::consume, group_resource(group)}};
  for (auto& t : topics) out.push_back({permission::consume, topic_resource(t)});
  return out;
}

template <class Refs>
std::set<std::string> ref_topics(const Refs& refs) {
  std::set<std::string> out;
  for (auto& r : refs) out.insert(r.topic());
  return out;
}

std::vector<need> fetch(const v1::Frame& f, const lk& l) {
  std::set<std::string> topics(f.fetch().topics().begin(), f.fetch().topics().end());
  // A fetch naming no topic reads the group's own.
  if (topics.empty() && l.group_topics) {
    for (auto& t : l.group_topics(f.fetch().group())) topics.insert(t);
  }
  return consume(f.fetch().group(), topics);
}
// A settle carrying `tx` is a transaction's home leader settling deliveries for it
// (read-process-write in a cluster): brokers of the cluster only, as ReplicaFetch.
std::vector<need> ack(const v1::Frame& f, const lk& l) {
  if (!f.ack().tx().empty()) return replicate(f, l);
  return consume(f.ack().group(), ref_topics(f.ack().refs()));
}
std::vector<need> nack(const v1::Frame& f, const lk& l) {
  if (!f.nack().tx().empty()) return replicate(f, l);
  return consume(f.nack().group(), ref_topics(f.nack().refs()));
}
std::vector<need> extend(const v1::Frame& f, const lk& l) {
  if (!f.extend().tx().empty()) return replicate(f, l);
  return consume(f.extend().group(), ref_topics(f.extend().refs()));
}

std::vector<need> prepare(const v1::Frame& f, const lk&) {
  const auto& p = f.prepare();
  std::vector<need> out{{permission::transact, producer_group_resource(p.producer_group())}};
  std::set<std::string> topics;
  for (auto& m : p.messages()) topics.insert(m.topic());
  for (auto& t : topics) out.push_back({permission::produce, topic_resource(t)});
  // Read-process-write: committing acknowledges deliveries of ack_group, as an Ack would.
  if (!p.acks().empty()) {
    for (auto& n : consume(p.ack_group(), ref_topics(p.acks()))) out.push_back(std::move(n));
  }
  return out;
}

std::vector<need> end_tx(const v1::Frame& f, const lk& l) {
  auto group = l.tx_producer_group ? l.tx_producer_group(f.end_tx().txid()) : std::nullopt;
  // An unknown txid: the handler answers UNKNOWN_TX (or INVALID_ARGUMENT) and changes nothing;
  // there is no group to protect, and a random 16-byte txid tells nobody anything.
  if (!group) return {};
  return {{permission::transact, producer_group_resource(*group)}};
}

constexpr auto R = frame_role::request;
constexpr auto S = frame_role::response;

// Sorted by field number; frame.proto is the reference.
constexpr request_rule k_rules[] = {
    {2, "error", frame_role::answer},
    {3, "hello", frame_role::hello},
    {4, "hello_ok", S},
    {10, "produce", R, produce},
    {11, "produce_response", S},
    {12, "fetch", R, fetch},
    {13, "fetch_response", S},
    {14, "ack", R, ack},
    {15, "nack", R, nack},
    {16, "extend", R, extend},
    {17, "delivery_results", S},
    {30, "create_topic", R, admin},
    {31, "topic_info", S},
    {32, "list_topics", R, admin},
    {33, "list_topics_response", S},
    {34, "describe_topic", R, admin},
    {35, "create_group", R, admin},
    {36, "group_info", S},
    {37, "list_groups", R, admin},
    {38, "list_groups_response", S},
    {39, "describe_group", R, admin},
    {40, "dlq_list", R, admin},
    {41, "dlq_list_response", S},
    {42, "dlq_redrive", R, admin},
    {43, "dlq_redrive_response", S},
    {45, "alter_topic", R, admin},
    {50, "prepare", R, prepare},
    {51, "prepare_response", S},
    {52, "end_tx", R, end_tx},
    {53, "end_tx_response", S},
    {54, "check_tx", S},
    {55, "check_tx_result", frame_role::answer},
    {56, "tx_list", R, admin},
    {57, "tx_list_response", S},
    {58, "tx_show", R, admin},
    {59, "tx_info", S},
    {60, "tx_resolve", R, admin},
    {70, "webhook_create", R, admin},
    {71, "webhook", S},
    {72, "webhook_list", R, admin},
    {73, "webhook_list_response", S},
    {74, "webhook_delete", R, admin},
    {75, "webhook_delete_response", S},
    {76, "webhook_attempts", R, admin},
    {77, "webhook_attempts_response", S},
    {78, "webhook_replay", R, admin},
    {79, "webhook_replay_response", S},
    {80, "webhook_rotate_secret", R, admin},
    {90, "principal_create", R, admin},
    {91, "principal_create_response", S},
    {92, "principal_list", R, admin},
    {93, "principal_list_response", S},
    {94, "principal_delete", R, admin},
    {95, "principal_delete_response", S},
    {96, "acl_grant", R, admin},
    {97, "acl_revoke", R, admin},
    {98, "acl_change_response", S},
    {99, "acl_list", R, admin},
    {100, "acl_list_response", S},
    {120, "connection_list", R, admin},
    {121, "connection_list_response", S},
    {130, "metadata", R, any_principal},
    {131, "metadata_response", S},
    {132, "replica_fetch", R, replicate},  // brokers of the cluster only (docs/cluster.md)
    {133, "replica_fetch_response", S},
};

}  // namespace

std::span<const request_rule> request_rules() noexcept { return k_rules; }

const request_rule* rule_for(int field) noexcept {
  auto it = std::lower_bound(std::begin(k_rules), std::end(k_rules), field,
                             [](const request_rule& r, int f) { return r.field < f; });
  return it != std::end(k_rules) && it->field == field ? &*it : nullptr;
}

}  // namespace txmq::broker::auth
