#include "http/cluster_views.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/json.hpp>

#include "cluster_mode/peer_pool.h"
#include "http/caller_peers.h"
#include "http/json_mapping.h"
#include "service/service.h"
#include "txmq/protocol/message_id.h"
#include "txmq/protocol/served.h"

// GCC 12: see cluster_mode/replication_follower.cc (Asio's awaitable frames use a matched
// operator new/delete; inlining one coroutine into another makes GCC 12 warn of a mismatch).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace txmq::broker::http_api::cluster_views {

namespace asio = boost::asio;
namespace json = boost::json;
using response = common::http_response;
using protocol::partition_key;

namespace {

// One deadline for the whole fan-out of a read, connections included: the nodes are asked at
// once, and a paused node delays the answer by at most this (it is then named as not answering)
// rather than holding the caller as long as a proxy would wait.
constexpr std::chrono::milliseconds k_read_deadline{5'000};
// A state change (a redrive, a transaction's commit or rollback) is answered by a leader once its
// ISR holds it, NOT_ENOUGH_REPLICAS after replication_timeout (10 s by default): waited for
// beyond that, so that the caller gets the leader's own answer.
constexpr std::chrono::milliseconds k_change_deadline{12'000};
constexpr std::uint32_t k_default_limit = 100;
constexpr std::uint32_t k_max_limit = 1000;

struct node_report {
  std::int64_t node = -1;
  std::string address;
  bool answered = false;
  std::string error;
};

// One HTTP request's view of the cluster: the Metadata this node holds, who leads what, and
// what each node asked said.
struct fan {
  route_context* ctx = nullptr;
  v1::MetadataResponse meta;
  protocol::leader_plan plan;
  std::string self;                          // this node's advertised address
  std::optional<std::string> token;          // the caller's bearer token; nullopt: none to forward
  std::map<std::string, node_report> nodes;  // by address
};

std::int64_t node_of(const fan& f, const std::string& address) {
  for (const auto& n : f.meta.nodes()) {
    if (n.address() == address) return n.id();
  }
  return -1;
}

// The token a forwarded request carries: the caller's own (auth off: none needed).
std::optional<std::string> caller_token(route_context& ctx) {
  if (!ctx.gw.svc().access().enabled()) return std::string();
  auto it = ctx.req.headers.find(boost::beast::http::field::authorization);
  if (it == ctx.req.headers.end()) return std::nullopt;
  const std::string_view value(it->value());
  if (!value.starts_with("Bearer ")) return std::nullopt;
  return std::string(value.substr(7));
}

std::optional<response> error_of(const v1::Frame& f, v1::Frame::BodyCase expected) {
  if (f.has_error()) return error_answer(f.error());
  if (f.body_case() != expected) return error_answer(v1::INTERNAL, "unexpected answer from the broker");
  return std::nullopt;
}

// Reads the Metadata through the gateway (the caller's rights, as any request of theirs).
asio::awaitable<std::variant<fan, response>> begin(route_context& ctx) {
  fan f;
  f.ctx = &ctx;
  v1::Frame m;
  m.mutable_metadata();
  auto a = co_await ctx.gw.call(std::move(m), ctx.req.principal);
  if (auto e = error_of(a, v1::Frame::kMetadataResponse)) co_return std::move(*e);
  f.meta = std::move(*a.mutable_metadata_response());
  f.plan = protocol::plan_of(f.meta);
  for (const auto& n : f.meta.nodes()) {
    if (n.id() == f.meta.node_id()) f.self = n.address();
  }
  f.token = caller_token(ctx);
  co_return f;
}

// Records what the node at `address` answered (or why it did not) in the fan's report.
void record(fan& f, const std::string& address, const result<v1::Frame>& out) {
  auto& report = f.nodes[address];
  report.address = address;
  report.node = node_of(f, address);
  if (!out) {
    report.answered = false;
    report.error = out.error().message.empty() ? out.error().code.message() : out.error().message;
  } else if (out.value().has_error() && out.value().error().code() != v1::UNKNOWN_GROUP &&
             out.value().error().code() != v1::UNKNOWN_TX) {
    // An error answer is a node that did not give its part (NOT_AUTHORIZED, SHUTTING_DOWN, ...);
    // "nothing of that here" is an answer.
    report.answered = false;
    report.error = v1::ErrorCode_Name(out.value().error().code()) + ": " + out.value().error().message();
  } else {
    report.answered = true;
    report.error.clear();
  }
}

asio::awaitable<v1::Frame> call_here(gateway& gw, v1::Frame request, std::string principal) {
  co_return co_await gw.call(std::move(request), principal);
}

// Asks every node of `addresses` at once — this node through the gateway, the others over the
// caller's kept connections (caller_peers.h: their Hellos carry the caller's own token) — and
// waits until each has answered or `deadline` has passed: a node paused or unreachable delays
// the answer by at most `deadline` in all, not per node, and is reported as not answering (so
// its partitions go to `cluster.missing`). Answers in the order of `addresses`, each recorded
// in the fan's report. A late answer is dropped.
asio::awaitable<std::vector<result<v1::Frame>>> gather(fan& f, const std::vector<std::string>& addresses,
                                                       const v1::Frame& request, std::chrono::milliseconds deadline) {
  struct gathering {
    explicit gathering(asio::io_context& io, std::size_t n) : timer(io), got(n), left(n) {}
    asio::steady_timer timer;
    std::vector<std::optional<result<v1::Frame>>> got;
    std::size_t left;
    void take(std::size_t i, result<v1::Frame> r) {
      if (got[i]) return;
      got[i] = std::move(r);
      if (--left == 0) timer.cancel();
    }
  };
  auto& io = f.ctx->gw.svc().io();
  auto g = std::make_shared<gathering>(io, addresses.size());
  g->timer.expires_after(deadline);
  const auto* peer = f.ctx->gw.svc().peer_identity();
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    const auto& address = addresses[i];
    if (address == f.self || address.empty()) {
      asio::co_spawn(io, call_here(f.ctx->gw, request, std::string(f.ctx->req.principal)),
                     [g, i](std::exception_ptr e, v1::Frame answer) {
        if (e) return g->take(i, error(protocol::errc::internal, "this node's own part failed"));
        g->take(i, std::move(answer));
      });
    } else if (!f.token) {
      g->take(i, error(protocol::errc::not_authenticated,
                       "not asked: the request was authenticated without a bearer token (a client certificate), and "
                       "this node forwards only the caller's own token; send Authorization: Bearer TOKEN, or ask that "
                       "node's admin API"));
    } else if (peer == nullptr) {
      g->take(i, error(protocol::errc::internal, "not asked: this node does not replicate (no peer identity)"));
    } else {
      f.ctx->gw.peers().pool_for(*peer, *f.token).request(address, request, deadline,
                                                           [g, i](result<v1::Frame> r) { g->take(i, std::move(r)); });
    }
  }
  if (g->left > 0) (void)co_await g->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  std::vector<result<v1::Frame>> out;
  out.reserve(addresses.size());
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    auto r = g->got[i] ? std::move(*g->got[i])
                       : result<v1::Frame>(error(protocol::errc::internal,
                                                 "no answer within " + std::to_string(deadline.count()) + " ms"));
    record(f, addresses[i], r);
    out.push_back(std::move(r));
  }
  co_return out;
}

// One node's answer of a fan-out that is the body a view merges.
struct part {
  std::string address;
  v1::Frame frame;
};

// The answers of a fan-out, sorted: the bodies of `expected` (a node's part), and whether some
// node said the group is unknown there (UNKNOWN_GROUP: nothing of it there, so that node's
// partitions count as covered in `covered` when given). The other answers (errors, no answer)
// are in the fan's report already.
struct parts {
  std::vector<part> bodies;
  std::optional<v1::Error> unknown;
};

parts sort_answers(fan& f, const std::vector<std::string>& addresses, std::vector<result<v1::Frame>> answers,
                   v1::Frame::BodyCase expected, std::set<partition_key>* covered) {
  parts out;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    auto& a = answers[i];
    if (!a) continue;
    if (a.value().has_error() && a.value().error().code() == v1::UNKNOWN_GROUP) {
      if (covered != nullptr) protocol::cover_all_of(f.plan, addresses[i], *covered);
      out.unknown = a.value().error();
      continue;
    }
    if (a.value().body_case() != expected) continue;
    out.bodies.push_back({addresses[i], std::move(a).value()});
  }
  return out;
}

// One node asked alone (TxShow and TxResolve follow the home leader hop by hop).
asio::awaitable<result<v1::Frame>> ask(fan& f, const std::string& address, const v1::Frame& request,
                                       std::chrono::milliseconds deadline) {
  const std::vector<std::string> one{address};
  auto all = co_await gather(f, one, request, deadline);
  co_return std::move(all.front());
}

// The `cluster` member of an answer: whether it is whole, each node asked, each partition
// not covered by its leader and why. `by_partition` false: the view is per node (the webhook
// attempt log), complete when every live node answered.
json::object coverage(const fan& f, const std::set<partition_key>& covered, bool by_partition) {
  json::array nodes;
  bool all_answered = true;
  for (const auto& [address, r] : f.nodes) {
    json::object o{{"node", r.node}, {"address", address}, {"answered", r.answered}};
    if (!r.answered) {
      o["error"] = r.error;
      all_answered = false;
    }
    nodes.push_back(std::move(o));
  }
  json::array missing;
  if (by_partition) {
    for (const auto& [t, p] : f.plan.unavailable) {
      missing.push_back(json::object{{"topic", t}, {"partition", p},
                                     {"reason", "no leader now (every in-sync replica is down); its data is left out"}});
    }
    for (const auto& k : protocol::uncovered(f.plan, covered)) {
      const auto& l = f.plan.partitions.at(k);
      auto it = f.nodes.find(l.address);
      std::string reason;
      if (it != f.nodes.end() && !it->second.answered) {
        reason = "its leader, node " + std::to_string(l.node) + " (" + l.address + "), did not answer: " + it->second.error;
      } else {
        reason = "not answered for by its leader node " + std::to_string(l.node) + " at epoch " + std::to_string(l.epoch) +
                 " (leadership moved meanwhile, or the leader is not ready yet); ask again";
      }
      missing.push_back(json::object{{"topic", k.first}, {"partition", k.second}, {"reason", std::move(reason)}});
    }
  }
  const bool complete = missing.empty() && all_answered;
  return json::object{{"complete", complete},
                      {"node", f.meta.node_id()},
                      {"nodes", std::move(nodes)},
                      {"missing", std::move(missing)}};
}

response with_coverage(const google::protobuf::Message& body, json::object cov) {
  auto v = to_json(body);
  v.as_object()["cluster"] = std::move(cov);
  return json_answer(200, v);
}

bool led_by(const fan& f, const std::string& address, const std::string& topic, std::uint32_t partition) {
  auto it = f.plan.partitions.find({topic, partition});
  return it != f.plan.partitions.end() && it->second.address == address;
}

std::uint32_t clamp_limit(std::uint32_t asked) {
  return asked == 0 ? k_default_limit : std::min(asked, k_max_limit);
}

// The leaders' addresses, this node's first (it answers without a connection).
std::vector<std::string> leaders(const fan& f) {
  std::vector<std::string> out;
  if (f.plan.addresses.contains(f.self)) out.push_back(f.self);
  for (const auto& a : f.plan.addresses) {
    if (a != f.self) out.push_back(a);
  }
  return out;
}

}  // namespace

bool enabled(gateway& gw) noexcept { return gw.svc().peer_identity() != nullptr; }

asio::awaitable<response> metadata(route_context& ctx) {
  v1::Frame m;
  m.mutable_metadata();
  auto a = co_await ctx.gw.call(std::move(m), ctx.req.principal);
  if (auto e = error_of(a, v1::Frame::kMetadataResponse)) co_return std::move(*e);
  co_return json_answer(200, to_json(a.metadata_response()));
}

asio::awaitable<response> list_topics(route_context& ctx, v1::Frame request) {
  auto begun = co_await begin(ctx);
  if (auto* r = std::get_if<response>(&begun)) co_return std::move(*r);
  auto& f = std::get<fan>(begun);
  // This node lists every topic of the cluster (etcd) even when it leads none of them: asked
  // with the leaders, its part merged first.
  auto addresses = leaders(f);
  if (addresses.empty() || addresses.front() != f.self) addresses.insert(addresses.begin(), f.self);
  auto answers = co_await gather(f, addresses, request, k_read_deadline);
  if (!answers.front()) co_return error_answer(v1::INTERNAL, answers.front().error().message);
  if (auto e = error_of(answers.front().value(), v1::Frame::kListTopicsResponse)) co_return std::move(*e);
  const auto got = sort_answers(f, addresses, std::move(answers), v1::Frame::kListTopicsResponse, nullptr);
  v1::ListTopicsResponse merged;
  std::set<partition_key> covered;
  for (const auto& [address, frame] : got.bodies) {
    (void)protocol::take_served(f.plan, address, frame.list_topics_response().served(), covered);
    protocol::merge_topics(f.plan, address, frame.list_topics_response(), merged);
  }
  co_return with_coverage(merged, coverage(f, covered, true));
}

// ListGroups and DescribeGroup: each partition's row from its leader (protocol::merge_group).
asio::awaitable<response> list_groups(route_context& ctx, v1::Frame request) {
  auto begun = co_await begin(ctx);
  if (auto* r = std::get_if<response>(&begun)) co_return std::move(*r);
  auto& f = std::get<fan>(begun);
  const auto addresses = leaders(f);
  const auto got = sort_answers(f, addresses, co_await gather(f, addresses, request, k_read_deadline),
                                v1::Frame::kListGroupsResponse, nullptr);
  std::map<std::string, v1::GroupInfo> by_name;
  std::set<partition_key> covered;
  for (const auto& [address, frame] : got.bodies) {
    const auto& groups = frame.list_groups_response().groups();
    // A node with no group names nothing served: nothing of any group is there.
    if (groups.empty()) protocol::cover_all_of(f.plan, address, covered);
    for (const auto& g : groups) {
      (void)protocol::take_served(f.plan, address, g.served(), covered);
      protocol::merge_group(f.plan, address, g, by_name[g.name()]);
    }
  }
  v1::ListGroupsResponse out;
  for (auto& [name, g] : by_name) {
    protocol::sort_group_rows(g);
    *out.add_groups() = std::move(g);
  }
  co_return with_coverage(out, coverage(f, covered, true));
}

// The group is unknown on every node that answered, and every node answered: it does not exist.
static std::optional<response> unknown_everywhere(const parts& got, const json::object& cov) {
  if (got.bodies.empty() && got.unknown && cov.at("complete").as_bool()) return error_answer(*got.unknown);
  return std::nullopt;
}

asio::awaitable<response> describe_group(route_context& ctx, v1::Frame request) {
  auto begun = co_await begin(ctx);
  if (auto* r = std::get_if<response>(&begun)) co_return std::move(*r);
  auto& f = std::get<fan>(begun);
  const auto addresses = leaders(f);
  std::set<partition_key> covered;
  const auto got = sort_answers(f, addresses, co_await gather(f, addresses, request, k_read_deadline),
                                v1::Frame::kGroupInfo, &covered);
  std::optional<v1::GroupInfo> merged;
  for (const auto& [address, frame] : got.bodies) {
    (void)protocol::take_served(f.plan, address, frame.group_info().served(), covered);
    if (!merged) merged.emplace();
    protocol::merge_group(f.plan, address, frame.group_info(), *merged);
  }
  auto cov = coverage(f, covered, true);
  if (auto e = unknown_everywhere(got, cov)) co_return std::move(*e);
  if (!merged) merged.emplace().set_name(request.describe_group().group());
  protocol::sort_group_rows(*merged);
  co_return with_coverage(*merged, std::move(cov));
}

asio::awaitable<response> dlq_list(route_context& ctx, v1::Frame request) {
  auto begun = co_await begin(ctx);
  if (auto* r = std::get_if<response>(&begun)) co_return std::move(*r);
  auto& f = std::get<fan>(begun);
  const std::uint32_t limit = clamp_limit(request.dlq_list().limit());
  request.mutable_dlq_list()->set_limit(limit);
  const auto addresses = leaders(f);
  std::set<partition_key> covered;
  const auto got = sort_answers(f, addresses, co_await gather(f, addresses, request, k_read_deadline),
                                v1::Frame::kDlqListResponse, &covered);
  v1::DlqListResponse out;
  std::vector<v1::DeadLetter> all;
  for (const auto& [address, frame] : got.bodies) {
    const auto& page = frame.dlq_list_response();
    (void)protocol::take_served(f.plan, address, page.served(), covered);
    for (const auto& s : page.served()) *out.add_served() = s;
    if (page.more()) out.set_more(true);
    // Only the letters of partitions the Metadata gives this node: no partition twice.
    for (const auto& dl : page.dead_letters()) {
      if (led_by(f, address, dl.message().topic(), dl.message().partition())) all.push_back(dl);
    }
  }
  auto cov = coverage(f, covered, true);
  if (auto e = unknown_everywhere(got, cov)) co_return std::move(*e);
  std::sort(all.begin(), all.end(), protocol::dead_letter_less);
  if (all.size() > limit) {
    all.resize(limit);
    out.set_more(true);
  }
  for (auto& dl : all) *out.add_dead_letters() = std::move(dl);
  co_return with_coverage(out, std::move(cov));
}

asio::awaitable<response> dlq_redrive(route_context& ctx, v1::Frame request) {
  auto begun = co_await begin(ctx);
  if (auto* r = std::get_if<response>(&begun)) co_return std::move(*r);
  auto& f = std::get<fan>(begun);
  // Every leader redrives the partitions it leads, answered once their ISR holds it; a second
  // redrive (the caller asking again for what `cluster.missing` names) redrives only what is
  // still dead.
  const auto addresses = leaders(f);
  std::set<partition_key> covered;
  const auto got = sort_answers(f, addresses, co_await gather(f, addresses, request, k_change_deadline),
                                v1::Frame::kDlqRedriveResponse, &covered);
  v1::DlqRedriveResponse out;
  for (const auto& [address, frame] : got.bodies) {
    const auto& r = frame.dlq_redrive_response();
    (void)protocol::take_served(f.plan, address, r.served(), covered);
    out.set_redriven(out.redriven() + r.redriven());
    for (const auto& s : r.served()) *out.add_served() = s;
  }
  auto cov = coverage(f, covered, true);
  if (auto e = unknown_everywhere(got, cov)) co_return std::move(*e);
  co_return with_coverage(out, std::move(cov));
}

asio::awaitable<response> tx_list(route_context& ctx, v1::Frame request) {
  auto begun = co_await begin(ctx);
  if (auto* r = std::get_if<response>(&begun)) co_return std::move(*r);
  auto& f = std::get<fan>(begun);
  const std::uint32_t limit = clamp_limit(request.tx_list().limit());
  request.mutable_tx_list()->set_limit(limit);
  const auto addresses = leaders(f);
  const auto got = sort_answers(f, addresses, co_await gather(f, addresses, request, k_read_deadline),
                                v1::Frame::kTxListResponse, nullptr);
  std::map<std::string, v1::TxInfo> by_id;  // raw txid: the store's order, and de-duplicated
  std::optional<std::string> bound;          // the smallest cursor of a node that stopped early
  std::set<partition_key> covered;
  v1::TxListResponse out;
  for (const auto& [address, frame] : got.bodies) {
    const auto& page = frame.tx_list_response();
    (void)protocol::take_served(f.plan, address, page.served(), covered);
    for (const auto& s : page.served()) *out.add_served() = s;
    for (const auto& t : page.txs()) by_id.emplace(t.txid(), t);
    if (!page.next_after_txid().empty() && (!bound || page.next_after_txid() < *bound)) bound = page.next_after_txid();
  }
  // Each node pages in txid order from the same cursor: the first `limit` of the union up to
  // the smallest place a node stopped are the cluster's next page.
  std::string last;
  bool cut = false;
  for (auto& [id, t] : by_id) {
    if ((bound && id > *bound) || static_cast<std::uint32_t>(out.txs_size()) >= limit) {
      cut = true;
      break;
    }
    last = id;
    *out.add_txs() = std::move(t);
  }
  if (cut || bound) out.set_next_after_txid(last.empty() ? bound.value_or("") : last);
  co_return with_coverage(out, coverage(f, covered, true));
}

asio::awaitable<response> tx_one(route_context& ctx, v1::Frame request, v1::Frame::BodyCase expected) {
  auto begun = co_await begin(ctx);
  if (auto* r = std::get_if<response>(&begun)) co_return std::move(*r);
  auto& f = std::get<fan>(begun);
  // TxShow: the home leader's record is current (a follower's copy may lag a commit).
  // TxResolve: only the home leader may decide; another node answers NOT_LEADER naming it.
  const auto deadline = expected == v1::Frame::kTxInfo ? k_read_deadline : k_change_deadline;
  auto a = co_await ask(f, f.self, request, deadline);
  if (!a) co_return error_answer(v1::INTERNAL, a.error().message);
  std::set<std::string> asked{f.self};
  std::string next;
  for (int hop = 0; hop < 4; ++hop) {
    const auto& got = a.value();
    next.clear();
    if (got.has_error() && got.error().code() == v1::NOT_LEADER && !got.error().leader_address().empty()) {
      next = got.error().leader_address();
    } else if (got.has_error() && got.error().code() == v1::UNKNOWN_TX) {
      // Not on this node (a topic with fewer replicas than nodes): the next node not asked.
      for (const auto& n : f.meta.nodes()) {
        if (!asked.contains(n.address())) {
          next = n.address();
          break;
        }
      }
    } else if (expected == v1::Frame::kTxInfo && got.has_tx_info() && got.tx_info().message_list_size() > 0) {
      const auto& first = got.tx_info().message_list(0);
      auto it = f.plan.partitions.find({first.topic(), first.partition()});
      if (it != f.plan.partitions.end() && !asked.contains(it->second.address)) next = it->second.address;
    }
    if (next.empty() || asked.contains(next)) break;
    asked.insert(next);
    auto b = co_await ask(f, next, request, deadline);
    // A home leader that does not answer a TxShow: the copy read first stands.
    if (!b && expected == v1::Frame::kTxInfo && a.value().has_tx_info()) break;
    if (!b) co_return error_answer(v1::NOT_LEADER, "node " + next + " (the transaction's home leader) did not answer: " +
                                                       b.error().message + "; retry");
    if (expected == v1::Frame::kTxInfo && a.value().has_tx_info() && b.value().has_error()) break;
    a = std::move(b);
  }
  if (auto e = error_of(a.value(), expected)) co_return std::move(*e);
  const auto* field = v1::Frame::descriptor()->FindFieldByNumber(static_cast<int>(expected));
  co_return json_answer(200, to_json(a.value().GetReflection()->GetMessage(a.value(), field)));
}

asio::awaitable<response> webhook_attempts(route_context& ctx, v1::Frame request) {
  auto& req = *request.mutable_webhook_attempts();
  const bool newest_first = req.after().starts_with('-');
  if (req.after() != "-" && !req.after().empty()) {
    co_return error_answer(v1::INVALID_ARGUMENT,
                           "after: in a cluster the attempt log is merged from every node's own log, and a cursor "
                           "names a place in one node's log; ask with limit (up to 1000) and order=newest|oldest");
  }
  auto begun = co_await begin(ctx);
  if (auto* r = std::get_if<response>(&begun)) co_return std::move(*r);
  auto& f = std::get<fan>(begun);
  const std::uint32_t limit = clamp_limit(req.limit());
  req.set_limit(limit);
  v1::WebhookAttemptsResponse out;
  // Each node logs the attempts it made (docs/cluster.md "Webhooks"): every live node is asked.
  std::vector<std::string> addresses;
  for (const auto& n : f.meta.nodes()) addresses.push_back(n.address());
  const auto got = sort_answers(f, addresses, co_await gather(f, addresses, request, k_read_deadline),
                                v1::Frame::kWebhookAttemptsResponse, nullptr);
  std::vector<v1::WebhookAttempt> all;
  for (const auto& [address, frame] : got.bodies) {
    for (const auto& at : frame.webhook_attempts_response().attempts()) all.push_back(at);
  }
  auto cov = coverage(f, {}, false);
  if (auto e = unknown_everywhere(got, cov)) co_return std::move(*e);
  const auto key = [](const v1::WebhookAttempt& a) {
    return std::make_tuple(a.time_ms(), a.topic(), a.partition(), a.offset(), a.attempt());
  };
  std::sort(all.begin(), all.end(), [&](const auto& a, const auto& b) { return newest_first ? key(b) < key(a) : key(a) < key(b); });
  if (all.size() > limit) all.resize(limit);
  for (auto& at : all) *out.add_attempts() = std::move(at);
  co_return with_coverage(out, std::move(cov));
}

}  // namespace txmq::broker::http_api::cluster_views
