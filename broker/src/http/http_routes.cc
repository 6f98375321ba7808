// The /v1 routes of the HTTP/JSON API (docs/http-api.md): each builds the wire request, awaits
// the broker's answer through gateway::call and writes it as JSON (json_mapping.h). Message
// routes (produce, fetch, ack) shape their JSON for HTTP callers: ids as UUID text, bodies as
// text or base64, an opaque `delivery` handle per delivered message.

#include <charconv>

#include <boost/json.hpp>

#include "http/cluster_views.h"
#include "http/json_mapping.h"
#include "http/route_table.h"
#include "service/service.h"
#include "txmq/common/base64.h"
#include "txmq/protocol/message_id.h"

namespace txmq::broker::http_api {

namespace asio = boost::asio;
namespace json = boost::json;
namespace http = boost::beast::http;
using response = common::http_response;

namespace {

constexpr std::string_view k_handle_prefix = "d1.";

// The body as a JSON object (an empty body is an empty object), or the 400 answer.
std::variant<json::object, response> body_object(const route_context& ctx) {
  if (ctx.req.body.empty()) return json::object{};
  boost::system::error_code ec;
  auto v = json::parse(ctx.req.body, ec);
  if (ec) return error_answer(v1::INVALID_ARGUMENT, "request body is not JSON: " + ec.message());
  if (!v.is_object()) return error_answer(v1::INVALID_ARGUMENT, "request body must be a JSON object");
  return std::move(v.as_object());
}

// The answer to a call: `render` of the expected body, or the error.
template <class Render>
response answer(const v1::Frame& f, v1::Frame::BodyCase expected, Render render) {
  if (f.has_error()) return error_answer(f.error());
  if (f.body_case() != expected) return error_answer(v1::INTERNAL, "unexpected answer from the broker");
  return json_answer(200, render(f));
}

response bad(std::string text) { return error_answer(v1::INVALID_ARGUMENT, std::move(text)); }

std::optional<std::uint32_t> query_u32(const route_context& ctx, std::string_view name, std::string& error) {
  auto it = ctx.query.find(name);
  if (it == ctx.query.end()) return std::nullopt;
  std::uint32_t v = 0;
  auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  if (ec != std::errc() || p != it->second.data() + it->second.size()) {
    error = std::string(name) + "=" + it->second + ": expected a non-negative integer";
    return std::nullopt;
  }
  return v;
}

// An opaque delivery handle: the DeliveryRef (topic, partition, offset, attempt) in
// URL-safe base64. Acks by handle therefore name the exact delivery, as the wire's attempt does.
std::string make_handle(const v1::Message& m) {
  v1::DeliveryRef ref;
  ref.set_topic(m.topic());
  ref.set_partition(m.partition());
  ref.set_offset(m.offset());
  ref.set_attempt(m.attempt());
  std::string b = common::base64_encode(ref.SerializeAsString());
  for (auto& c : b) c = c == '+' ? '-' : c == '/' ? '_' : c;
  while (!b.empty() && b.back() == '=') b.pop_back();
  return std::string(k_handle_prefix) + b;
}

std::optional<v1::DeliveryRef> parse_handle(std::string_view h) {
  if (!h.starts_with(k_handle_prefix)) return std::nullopt;
  std::string b(h.substr(k_handle_prefix.size()));
  for (auto& c : b) c = c == '-' ? '+' : c == '_' ? '/' : c;
  while (b.size() % 4) b.push_back('=');
  auto raw = common::base64_decode(b);
  v1::DeliveryRef ref;
  if (!raw || !ref.ParseFromString(raw.value()) || ref.topic().empty()) return std::nullopt;
  return ref;
}

// ---- messages --------------------------------------------------------------------------------

asio::awaitable<response> produce(route_context& ctx) {
  auto body = body_object(ctx);
  if (auto* r = std::get_if<response>(&body)) co_return std::move(*r);
  auto& o = std::get<json::object>(body);
  const std::string& topic = ctx.params["topic"];
  if (auto* t = o.if_contains("topic"); t && !(t->is_string() && t->get_string() == topic)) {
    co_return bad("the body's topic differs from the path's ('" + topic + "'); leave it out");
  }
  o.erase("topic");
  if (!o.contains("messages")) co_return bad("messages: required (an array of messages)");
  v1::Frame f;
  auto* req = f.mutable_produce();
  if (auto r = from_json(o, *req); !r) co_return bad(r.error().message);
  req->set_topic(topic);
  std::vector<std::string> ids;
  for (auto& m : *req->mutable_messages()) {
    // The topic is the path's; a message naming another is refused by the broker, as on the wire.
    if (m.id().empty()) m.set_id(std::string(protocol::uuid::make_v7().raw()));
    ids.push_back(m.id());
  }
  auto a = co_await ctx.gw.call(std::move(f), ctx.req.principal);
  co_return answer(a, v1::Frame::kProduceResponse, [&](const v1::Frame& f) {
    json::array out;
    const auto& pos = f.produce_response().positions();
    for (int i = 0; i < pos.size(); ++i) {
      out.push_back(json::object{{"id", protocol::uuid::from_bytes(ids[static_cast<std::size_t>(i)]).value().to_string()},
                                 {"partition", pos[i].partition()},
                                 {"offset", pos[i].offset()},
                                 {"duplicate", pos[i].duplicate()}});
    }
    return json::object{{"messages", std::move(out)}};
  });
}

asio::awaitable<response> fetch(route_context& ctx) {
  auto body = body_object(ctx);
  if (auto* r = std::get_if<response>(&body)) co_return std::move(*r);
  auto& o = std::get<json::object>(body);
  v1::Frame f;
  auto* req = f.mutable_fetch();
  req->set_group(ctx.params["group"]);
  for (auto& kv : o) {
    const auto& v = kv.value();
    const std::string key(kv.key());
    auto u32 = [&](auto setter) -> std::optional<response> {
      if (!v.is_int64() || v.get_int64() < 0 || v.get_int64() > 0xffffffffLL) return bad(key + ": expected a non-negative integer");
      setter(static_cast<std::uint32_t>(v.get_int64()));
      return std::nullopt;
    };
    std::optional<response> err;
    if (key == "topic") {
      if (!v.is_string()) co_return bad("topic: expected a string");
      req->add_topics(std::string(v.get_string()));
    } else if (key == "topics") {
      if (!v.is_array()) co_return bad("topics: expected an array of strings");
      for (auto& t : v.get_array()) {
        if (!t.is_string()) co_return bad("topics: expected an array of strings");
        req->add_topics(std::string(t.get_string()));
      }
    } else if (key == "max") {
      err = u32([&](std::uint32_t x) { req->set_max_messages(x); });
    } else if (key == "wait_ms") {
      err = u32([&](std::uint32_t x) { req->set_max_wait_ms(std::min(x, k_max_wait_ms)); });
    } else if (key == "ack_deadline_ms") {
      err = u32([&](std::uint32_t x) { req->set_ack_deadline_ms(x); });
    } else {
      co_return bad(key + ": unknown field (topic, topics, max, wait_ms, ack_deadline_ms)");
    }
    if (err) co_return std::move(*err);
  }
  if (req->topics().empty()) co_return bad("topic: required");
  auto a = co_await ctx.gw.call(std::move(f), ctx.req.principal);
  co_return answer(a, v1::Frame::kFetchResponse, [&](const v1::Frame& f) {
    json::array out;
    for (auto& d : f.fetch_response().deliveries()) {
      auto m = to_json(d.message()).as_object();
      m.erase("txid");
      if (!d.message().txid().empty()) m["txid"] = protocol::uuid::from_bytes(d.message().txid()).value().to_string();
      json::object e{{"delivery", make_handle(d.message())}, {"deadline_ms", d.deadline_ms()}};
      for (auto& kv : m) e[kv.key()] = kv.value();
      out.push_back(std::move(e));
    }
    return json::object{{"deliveries", std::move(out)}};
  });
}

// Ack, nack and extend: {"deliveries": [handle, ...], "delay_ms"|"extend_ms": n}.
template <v1::Frame::BodyCase Kind>
asio::awaitable<response> settle(route_context& ctx) {
  auto body = body_object(ctx);
  if (auto* r = std::get_if<response>(&body)) co_return std::move(*r);
  auto& o = std::get<json::object>(body);
  const char* ms_name = Kind == v1::Frame::kNack ? "delay_ms" : Kind == v1::Frame::kExtend ? "extend_ms" : nullptr;
  std::uint32_t ms = 0;
  std::vector<std::string> handles;
  for (auto& kv : o) {
    const std::string key(kv.key());
    if (key == "deliveries") {
      if (!kv.value().is_array()) co_return bad("deliveries: expected an array of delivery handles");
      for (auto& h : kv.value().get_array()) {
        if (!h.is_string()) co_return bad("deliveries: expected an array of delivery handles");
        handles.emplace_back(h.get_string());
      }
    } else if (ms_name && key == ms_name) {
      const auto& v = kv.value();
      if (!v.is_int64() || v.get_int64() < 0 || v.get_int64() > 0xffffffffLL) co_return bad(key + ": expected a non-negative integer");
      ms = static_cast<std::uint32_t>(v.get_int64());
    } else {
      co_return bad(key + ": unknown field");
    }
  }
  v1::Frame f;
  google::protobuf::RepeatedPtrField<v1::DeliveryRef>* refs = nullptr;
  if constexpr (Kind == v1::Frame::kAck) {
    f.mutable_ack()->set_group(ctx.params["group"]);
    refs = f.mutable_ack()->mutable_refs();
  } else if constexpr (Kind == v1::Frame::kNack) {
    f.mutable_nack()->set_group(ctx.params["group"]);
    f.mutable_nack()->set_delay_ms(ms);
    refs = f.mutable_nack()->mutable_refs();
  } else {
    f.mutable_extend()->set_group(ctx.params["group"]);
    f.mutable_extend()->set_extend_ms(ms);
    refs = f.mutable_extend()->mutable_refs();
  }
  for (std::size_t i = 0; i < handles.size(); ++i) {
    auto ref = parse_handle(handles[i]);
    if (!ref) co_return bad("deliveries[" + std::to_string(i) + "]: not a delivery handle from a fetch");
    *refs->Add() = std::move(*ref);
  }
  auto a = co_await ctx.gw.call(std::move(f), ctx.req.principal);
  co_return answer(a, v1::Frame::kDeliveryResults, [&](const v1::Frame& f) {
    json::array out;
    const auto& res = f.delivery_results().results();
    for (int i = 0; i < res.size() && static_cast<std::size_t>(i) < handles.size(); ++i) {
      json::object e{{"delivery", handles[static_cast<std::size_t>(i)]}, {"ok", res[i] == v1::ERROR_CODE_UNSPECIFIED}};
      if (res[i] != v1::ERROR_CODE_UNSPECIFIED) e["error"] = v1::ErrorCode_Name(res[i]);
      out.push_back(std::move(e));
    }
    return json::object{{"results", std::move(out)}};
  });
}

// ---- administration: one wire request, its answer as JSON ------------------------------------

// Sends the request and answers the expected body (the Frame field numbered `expected`) as JSON.
asio::awaitable<response> simple(route_context& ctx, v1::Frame f, v1::Frame::BodyCase expected) {
  auto a = co_await ctx.gw.call(std::move(f), ctx.req.principal);
  const auto* field = v1::Frame::descriptor()->FindFieldByNumber(static_cast<int>(expected));
  co_return answer(a, expected, [&](const v1::Frame& f) {
    return to_json(f.GetReflection()->GetMessage(f, field));
  });
}

// A request whose JSON body maps onto the wire request (json_mapping.h).
template <class Req>
std::optional<response> fill(const route_context& ctx, Req& req) {
  auto body = body_object(ctx);
  if (auto* r = std::get_if<response>(&body)) return std::move(*r);
  if (auto r = from_json(std::get<json::object>(body), req); !r) return bad(r.error().message);
  return std::nullopt;
}

asio::awaitable<response> list_topics(route_context& ctx) {
  v1::Frame f;
  f.mutable_list_topics();
  if (cluster_views::enabled(ctx.gw)) co_return co_await cluster_views::list_topics(ctx, std::move(f));
  co_return co_await simple(ctx, std::move(f), v1::Frame::kListTopicsResponse);
}

asio::awaitable<response> create_topic(route_context& ctx) {
  v1::Frame f;
  if (auto e = fill(ctx, *f.mutable_create_topic())) co_return std::move(*e);
  co_return co_await simple(ctx, std::move(f), v1::Frame::kTopicInfo);
}

asio::awaitable<response> describe_topic(route_context& ctx) {
  v1::Frame f;
  f.mutable_describe_topic()->set_name(ctx.params["topic"]);
  co_return co_await simple(ctx, std::move(f), v1::Frame::kTopicInfo);
}

asio::awaitable<response> alter_topic(route_context& ctx) {
  v1::Frame f;
  if (auto e = fill(ctx, *f.mutable_alter_topic())) co_return std::move(*e);
  f.mutable_alter_topic()->set_name(ctx.params["topic"]);  // the path names the topic
  co_return co_await simple(ctx, std::move(f), v1::Frame::kTopicInfo);
}

asio::awaitable<response> reconcile_list(route_context& ctx) { co_return co_await ctx.gw.svc().webhooks().reconcile_list(ctx.req); }
asio::awaitable<response> reconcile_one(route_context& ctx) { co_return co_await ctx.gw.svc().webhooks().reconcile_one(ctx.req); }

asio::awaitable<response> list_groups(route_context& ctx) {
  v1::Frame f;
  f.mutable_list_groups();
  if (cluster_views::enabled(ctx.gw)) co_return co_await cluster_views::list_groups(ctx, std::move(f));
  co_return co_await simple(ctx, std::move(f), v1::Frame::kListGroupsResponse);
}

asio::awaitable<response> create_group(route_context& ctx) {
  v1::Frame f;
  if (auto e = fill(ctx, *f.mutable_create_group())) co_return std::move(*e);
  co_return co_await simple(ctx, std::move(f), v1::Frame::kGroupInfo);
}

asio::awaitable<response> describe_group(route_context& ctx) {
  v1::Frame f;
  f.mutable_describe_group()->set_group(ctx.params["group"]);
  if (cluster_views::enabled(ctx.gw)) co_return co_await cluster_views::describe_group(ctx, std::move(f));
  co_return co_await simple(ctx, std::move(f), v1::Frame::kGroupInfo);
}

asio::awaitable<response> dlq_list(route_context& ctx) {
  v1::Frame f;
  f.mutable_dlq_list()->set_group(ctx.params["group"]);
  std::string err;
  if (auto limit = query_u32(ctx, "limit", err)) f.mutable_dlq_list()->set_limit(*limit);
  if (!err.empty()) co_return bad(err);
  if (cluster_views::enabled(ctx.gw)) co_return co_await cluster_views::dlq_list(ctx, std::move(f));
  co_return co_await simple(ctx, std::move(f), v1::Frame::kDlqListResponse);
}

asio::awaitable<response> dlq_redrive(route_context& ctx) {
  v1::Frame f;
  f.mutable_dlq_redrive()->set_group(ctx.params["group"]);
  if (cluster_views::enabled(ctx.gw)) co_return co_await cluster_views::dlq_redrive(ctx, std::move(f));
  co_return co_await simple(ctx, std::move(f), v1::Frame::kDlqRedriveResponse);
}

std::optional<std::string> parse_txid(const std::string& text, std::string& raw) {
  auto u = protocol::uuid::parse(text);
  if (!u) return "'" + text + "' is not a transaction id (UUID text)";
  raw = std::string(u.value().raw());
  return std::nullopt;
}

asio::awaitable<response> tx_list(route_context& ctx) {
  v1::Frame f;
  auto* req = f.mutable_tx_list();
  std::string err;
  if (auto limit = query_u32(ctx, "limit", err)) req->set_limit(*limit);
  if (!err.empty()) co_return bad(err);
  if (auto it = ctx.query.find("state"); it != ctx.query.end() && it->second != "unresolved") {
    std::string name = it->second;
    for (auto& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    v1::TxState st{};
    if (name == "ALL") {
      req->set_all_states(true);
    } else if (v1::TxState_Parse(name, &st) && st != v1::TX_STATE_UNSPECIFIED) {
      req->set_state(st);
    } else {
      co_return bad("state=" + it->second + ": expected prepared, abandoned, committed, rolled_back, unresolved or all");
    }
  }
  if (auto it = ctx.query.find("topic"); it != ctx.query.end()) req->set_topic(it->second);
  if (auto it = ctx.query.find("after"); it != ctx.query.end()) {
    std::string raw;
    if (auto e = parse_txid(it->second, raw)) co_return bad("after: " + *e);
    req->set_after_txid(raw);
  }
  if (cluster_views::enabled(ctx.gw)) co_return co_await cluster_views::tx_list(ctx, std::move(f));
  co_return co_await simple(ctx, std::move(f), v1::Frame::kTxListResponse);
}

asio::awaitable<response> tx_show(route_context& ctx) {
  v1::Frame f;
  std::string raw;
  if (auto e = parse_txid(ctx.params["txid"], raw)) co_return bad(*e);
  f.mutable_tx_show()->set_txid(raw);
  if (cluster_views::enabled(ctx.gw)) co_return co_await cluster_views::tx_one(ctx, std::move(f), v1::Frame::kTxInfo);
  co_return co_await simple(ctx, std::move(f), v1::Frame::kTxInfo);
}

template <v1::TxOutcome Outcome>
asio::awaitable<response> tx_resolve(route_context& ctx) {
  v1::Frame f;
  std::string raw;
  if (auto e = parse_txid(ctx.params["txid"], raw)) co_return bad(*e);
  f.mutable_tx_resolve()->set_txid(raw);
  f.mutable_tx_resolve()->set_outcome(Outcome);
  if (cluster_views::enabled(ctx.gw)) {
    co_return co_await cluster_views::tx_one(ctx, std::move(f), v1::Frame::kEndTxResponse);
  }
  co_return co_await simple(ctx, std::move(f), v1::Frame::kEndTxResponse);
}

asio::awaitable<response> webhook_list(route_context& ctx) {
  v1::Frame f;
  f.mutable_webhook_list();
  co_return co_await simple(ctx, std::move(f), v1::Frame::kWebhookListResponse);
}

asio::awaitable<response> webhook_create(route_context& ctx) {
  auto body = body_object(ctx);
  if (auto* r = std::get_if<response>(&body)) co_return std::move(*r);
  auto& o = std::get<json::object>(body);
  v1::Frame f;
  auto* req = f.mutable_webhook_create();
  // The subscription's fields at the top level, plus from_earliest and a plain `secret`.
  if (auto* e = o.if_contains("from_earliest")) {
    if (!e->is_bool()) co_return bad("from_earliest: expected true or false");
    req->set_from_earliest(e->get_bool());
    o.erase("from_earliest");
  }
  std::string secret;
  if (auto* s = o.if_contains("secret")) {
    if (!s->is_string()) co_return bad("secret: expected a string");
    secret = std::string(s->get_string());
    o.erase("secret");
  }
  if (auto r = from_json(o, *req->mutable_webhook()); !r) co_return bad(r.error().message);
  if (!secret.empty()) {
    req->mutable_webhook()->clear_secrets();
    req->mutable_webhook()->add_secrets()->set_secret(secret);
  }
  co_return co_await simple(ctx, std::move(f), v1::Frame::kWebhook);
}

asio::awaitable<response> webhook_delete(route_context& ctx) {
  v1::Frame f;
  f.mutable_webhook_delete()->set_id(ctx.params["id"]);
  co_return co_await simple(ctx, std::move(f), v1::Frame::kWebhookDeleteResponse);
}

asio::awaitable<response> webhook_attempts(route_context& ctx) {
  v1::Frame f;
  auto* req = f.mutable_webhook_attempts();
  req->set_id(ctx.params["id"]);
  std::string err;
  if (auto limit = query_u32(ctx, "limit", err)) req->set_limit(*limit);
  if (!err.empty()) co_return bad(err);
  if (auto it = ctx.query.find("message"); it != ctx.query.end()) {
    auto u = protocol::uuid::parse(it->second);
    if (!u) co_return bad("message=" + it->second + ": not a message id (UUID text)");
    req->set_message_id(std::string(u.value().raw()));
  }
  if (auto it = ctx.query.find("after"); it != ctx.query.end()) req->set_after(it->second);
  // order=newest: the cursor carries the order (a '-' first, webhook_admin.cc); a next_after
  // passed back already has it.
  if (auto it = ctx.query.find("order"); it != ctx.query.end()) {
    if (it->second != "newest" && it->second != "oldest") co_return bad("order=" + it->second + ": newest or oldest");
    if (it->second == "newest" && !req->after().starts_with('-')) req->set_after("-" + req->after());
  }
  if (cluster_views::enabled(ctx.gw)) co_return co_await cluster_views::webhook_attempts(ctx, std::move(f));
  co_return co_await simple(ctx, std::move(f), v1::Frame::kWebhookAttemptsResponse);
}

asio::awaitable<response> webhook_replay(route_context& ctx) {
  v1::Frame f;
  if (auto e = fill(ctx, *f.mutable_webhook_replay())) co_return std::move(*e);
  f.mutable_webhook_replay()->set_id(ctx.params["id"]);
  co_return co_await simple(ctx, std::move(f), v1::Frame::kWebhookReplayResponse);
}

asio::awaitable<response> webhook_rotate(route_context& ctx) {
  v1::Frame f;
  if (auto e = fill(ctx, *f.mutable_webhook_rotate_secret())) co_return std::move(*e);
  f.mutable_webhook_rotate_secret()->set_id(ctx.params["id"]);
  co_return co_await simple(ctx, std::move(f), v1::Frame::kWebhook);
}

asio::awaitable<response> list_connections(route_context& ctx) {
  v1::Frame f;
  f.mutable_connection_list();
  co_return co_await simple(ctx, std::move(f), v1::Frame::kConnectionListResponse);
}

asio::awaitable<response> cluster(route_context& ctx) { co_return co_await cluster_views::metadata(ctx); }

asio::awaitable<response> openapi(route_context&) {
  co_return response{200, "application/json", std::string(openapi_document()), {}};
}

}  // namespace

const std::vector<route>& route_table() {
  using v = http::verb;
  static const std::vector<route> table = {
      {{v::post, "/v1/topics/{topic}/messages", "produce", "topic:{topic}", "Produce messages (answered after fsync)"}, produce},
      {{v::post, "/v1/groups/{group}/fetch", "consume", "group:{group}", "Fetch messages for a group (long poll)"}, fetch},
      {{v::post, "/v1/groups/{group}/ack", "consume", "group:{group}", "Acknowledge deliveries"}, settle<v1::Frame::kAck>},
      {{v::post, "/v1/groups/{group}/nack", "consume", "group:{group}", "Redeliver deliveries later"}, settle<v1::Frame::kNack>},
      {{v::post, "/v1/groups/{group}/extend", "consume", "group:{group}", "Extend the ack deadline of deliveries"}, settle<v1::Frame::kExtend>},
      {{v::get, "/v1/topics", "admin", "cluster", "List topics"}, list_topics},
      {{v::post, "/v1/topics", "admin", "cluster", "Create a topic"}, create_topic},
      {{v::get, "/v1/topics/{topic}", "admin", "cluster", "Describe a topic"}, describe_topic},
      {{v::patch, "/v1/topics/{topic}", "admin", "cluster", "Change a topic's settings"}, alter_topic},
      {{v::get, "/v1/topics/{topic}/messages", "webhook-token", "topic:{topic}", "Reconciliation: a webhook subscription's messages"}, reconcile_list},
      {{v::get, "/v1/messages/{id}", "webhook-token", "", "Reconciliation: one message with its attempt log"}, reconcile_one},
      {{v::get, "/v1/groups", "admin", "cluster", "List consumer groups"}, list_groups},
      {{v::post, "/v1/groups", "admin", "cluster", "Create a consumer group"}, create_group},
      {{v::get, "/v1/groups/{group}", "admin", "cluster", "Describe a consumer group"}, describe_group},
      {{v::get, "/v1/groups/{group}/dead-letters", "admin", "cluster", "List a group's dead letters"}, dlq_list},
      {{v::post, "/v1/groups/{group}/dead-letters/redrive", "admin", "cluster", "Redrive a group's dead letters"}, dlq_redrive},
      {{v::get, "/v1/transactions", "admin", "cluster", "List transactions"}, tx_list},
      {{v::get, "/v1/transactions/{txid}", "admin", "cluster", "Show a transaction"}, tx_show},
      {{v::post, "/v1/transactions/{txid}/commit", "admin", "cluster", "Commit a transaction (operator)"}, tx_resolve<v1::COMMIT>},
      {{v::post, "/v1/transactions/{txid}/rollback", "admin", "cluster", "Roll back a transaction (operator)"}, tx_resolve<v1::ROLLBACK>},
      {{v::get, "/v1/webhooks", "admin", "cluster", "List webhook subscriptions"}, webhook_list},
      {{v::post, "/v1/webhooks", "admin", "cluster", "Create a webhook subscription"}, webhook_create},
      {{v::delete_, "/v1/webhooks/{id}", "admin", "cluster", "Delete a webhook subscription"}, webhook_delete},
      {{v::get, "/v1/webhooks/{id}/attempts", "admin", "cluster", "A webhook subscription's attempt log"}, webhook_attempts},
      {{v::post, "/v1/webhooks/{id}/replay", "admin", "cluster", "Send a webhook subscription's messages again"}, webhook_replay},
      {{v::post, "/v1/webhooks/{id}/rotate-secret", "admin", "cluster", "Rotate a webhook subscription's secret"}, webhook_rotate},
      {{v::get, "/v1/connections", "admin", "cluster", "List client connections"}, list_connections},
      {{v::get, "/v1/cluster", "admin", "cluster", "The cluster: nodes, controller, partition leaders and ISR"}, cluster},
      {{v::get, "/v1/openapi.json", "", "", "This API's OpenAPI 3.0 description"}, openapi},
  };
  return table;
}

}  // namespace txmq::broker::http_api
