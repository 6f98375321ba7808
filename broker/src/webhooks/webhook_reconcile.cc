// The reconciliation API of webhooks (docs/protocol.md §11) on the admin HTTP port:
//   GET /v1/topics/{topic}/messages?after={id}&limit={n}
//   GET /v1/messages/{id}
// authorised by the subscription's token (Authorization: Bearer <token>), also with auth on: the
// token is a capability for one subscription's topic, handed to its receiver, not a principal. Answers JSON with
// each message and its status for that subscription: delivered, pending, exhausted (or
// filtered: the subscription's filter skips it).
//
// Messages are listed in (publish time, id) order, so a receiver that remembers the last id it
// saw gets everything published after it, across partitions. Each partition is entered by a
// binary search on publish time (publish times only grow within a partition).
//
// The handlers are coroutines on the io thread, where the subscriptions live: they find the
// token's subscription and copy what they need of it there, then read the store on the admin
// worker (admin_reads.h) — a page binary-searches and scans every partition and reads each
// message's attempt log and the dead letters — and the io thread serves other clients meanwhile.

#include <algorithm>
#include <set>

#include <boost/json.hpp>
#include <boost/url/parse_query.hpp>
#include <openssl/crypto.h>

#include "admin_reads.h"
#include "txmq/common/admin_http.h"
#include "txmq/common/base64.h"
#include "request_checks.h"
#include "webhooks/webhook_subscription.h"

namespace txmq::broker {

namespace json = boost::json;
namespace http = boost::beast::http;

namespace {

constexpr std::size_t k_default_limit = 100;
constexpr std::size_t k_max_limit = k_max_list_limit;

common::http_response json_response(unsigned status, const json::value& v) {
  return common::http_response{status, "application/json", json::serialize(v) + "\n", {}};
}

common::http_response json_error(unsigned status, std::string code, std::string text) {
  return json_response(status, json::object{{"error", std::move(code)}, {"message", std::move(text)}});
}

bool is_utf8(std::string_view s) {
  // Bodies go out as text when they are valid UTF-8 (structure only), else as base64.
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : 4;
    if (n == 4 || i + n >= s.size()) return false;
    for (std::size_t k = 1; k <= n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n + 1;
  }
  return true;
}

std::string id_text(std::string_view raw) {
  auto u = protocol::uuid::from_bytes(raw);
  return u ? u.value().to_string() : std::string();
}

}  // namespace

struct webhook_notifier::http_auth {
  std::shared_ptr<subscription> sub;
  std::optional<common::http_response> error;
};

// What the worker needs of a subscription, copied on the io thread.
struct webhook_notifier::reconcile_view {
  v1::Webhook rec;
  std::string group;
  std::vector<partition_summary> summary;
};

webhook_notifier::http_auth webhook_notifier::authorise(const common::http_request& req) const {
  // Finds the subscription of the bearer token, comparing in constant time.
  auto it = req.headers.find(http::field::authorization);
  std::string_view value = it == req.headers.end() ? std::string_view() : std::string_view(it->value());
  if (!value.starts_with("Bearer ")) {
    return {nullptr, json_error(401, "NOT_AUTHENTICATED", "send the subscription's token as Authorization: Bearer <token>")};
  }
  value.remove_prefix(7);
  for (auto& [id, s] : subs_) {
    const auto& t = s->rec.token();
    if (t.size() == value.size() && CRYPTO_memcmp(t.data(), value.data(), t.size()) == 0) return {s, std::nullopt};
  }
  return {nullptr, json_error(401, "NOT_AUTHENTICATED", "the token belongs to no webhook subscription")};
}

namespace {

using dead_set = std::set<std::pair<std::uint32_t, std::uint64_t>>;

result<dead_set> read_dead_set(const storage::store& store, const std::string& group, const admin_reads& reads) {
  dead_set out;
  std::optional<storage::message_ref> after;
  for (;;) {
    if (reads.stopping()) return error(protocol::errc::shutting_down, "the broker is shutting down");
    TXMQ_TRY(auto page, store.dead_letters(group, k_admin_scan_page, after));
    for (auto& l : page) out.insert({l.partition, l.offset});
    if (page.size() < k_admin_scan_page) return out;
    after = storage::message_ref{page.back().topic, page.back().partition, page.back().offset};
  }
}

// The message as JSON with its status for the subscription (on the worker).
json::object describe_message(const storage::store& store, const auto& view, const v1::Message& m, const dead_set& dead,
                              bool with_attempts) {
  json::object o;
  o["id"] = id_text(m.id());
  o["topic"] = m.topic();
  o["partition"] = m.partition();
  o["offset"] = m.offset();
  if (m.has_key()) o["key"] = m.key();
  json::object headers;
  for (auto& [k, v] : m.headers()) headers[k] = v;
  o["headers"] = std::move(headers);
  if (is_utf8(m.body())) {
    o["body"] = m.body();
  } else {
    o["body_base64"] = common::base64_encode(m.body());
  }
  o["publish_time_ms"] = m.publish_time_ms();
  storage::webhook_attempts_query q;
  q.webhook_id = view.rec.id();
  q.message = protocol::uuid::from_bytes(m.id()).value();
  auto attempts = store.webhook_attempts(q);
  bool delivered = false;
  json::array list;
  std::uint32_t count = 0;
  if (attempts) {
    for (auto& a : attempts.value()) {
      delivered = delivered || a.outcome() == v1::WEBHOOK_DELIVERED;
      if (!a.replay()) ++count;
      if (with_attempts) {
        list.push_back(json::object{{"attempt", a.attempt()},
                                    {"time_ms", a.time_ms()},
                                    {"status", a.status()},
                                    {"latency_ms", a.latency_ms()},
                                    {"error", a.error()},
                                    {"replay", a.replay()}});
      }
    }
  }
  std::string status = "pending";
  if (!webhook_matches(view.rec, m)) {
    status = "filtered";
  } else if (dead.count({m.partition(), m.offset()})) {
    status = "exhausted";
  } else if (delivered) {
    status = "delivered";
  } else {
    for (auto& p : view.summary) {
      if (p.topic == m.topic() && p.partition == m.partition() && m.offset() < p.acked) {
        // Done without a logged attempt: published before the subscription started at the
        // latest message, or delivered so long ago that its attempts expired.
        status = count == 0 && m.publish_time_ms() < view.rec.created_ms() ? "before_subscription" : "delivered";
      }
    }
  }
  o["status"] = status;
  o["attempts"] = count;
  if (with_attempts) o["attempt_log"] = std::move(list);
  return o;
}

common::http_response worker_failure(const error& e) {
  return json_error(503, "STORE_UNAVAILABLE", "reading the store failed: " + e.message);
}

}  // namespace

void webhook_notifier::register_routes(common::admin_http_server& server) {
  server.add_async_route(http::verb::get, "/v1/topics/", [this](const common::http_request& req) { return reconcile_list(req); },
                         common::route_access::by_handler());
  server.add_async_route(http::verb::get, "/v1/messages", [this](const common::http_request& req) { return reconcile_one(req); },
                         common::route_access::by_handler());
}

boost::asio::awaitable<common::http_response> webhook_notifier::reconcile_list(const common::http_request& req) {
  auto auth = authorise(req);
  if (auth.error) co_return *auth.error;
  const reconcile_view view{auth.sub->rec, auth.sub->group, auth.sub->tracker->summary()};
  // /v1/topics/{topic}/messages
  std::string_view rest = req.path.substr(std::string_view("/v1/topics/").size());
  const auto slash = rest.find('/');
  if (slash == std::string_view::npos || rest.substr(slash) != "/messages") {
    co_return json_error(404, "NOT_FOUND", "use /v1/topics/{topic}/messages");
  }
  const std::string topic(rest.substr(0, slash));
  if (topic != view.rec.topic()) {
    co_return json_error(403, "NOT_AUTHORIZED", "the token's subscription is for topic '" + view.rec.topic() + "'");
  }
  std::size_t limit = k_default_limit;
  std::optional<protocol::uuid> after_id;
  std::string after_text;
  // Parsed from a copy that ends where the query ends: given the view into the request's
  // buffer, Boost.URL 1.81 read the last value one byte too far (`limit=1` came out as "10",
  // an `after` id with a trailing newline).
  const std::string query(req.query);
  auto params = boost::urls::parse_query(query);
  if (!params) co_return json_error(400, "INVALID_ARGUMENT", "malformed query string");
  for (auto p : params.value()) {
    if (p.key == "limit") {
      try {
        limit = std::stoul(std::string(p.value));
      } catch (const std::exception&) {
        co_return json_error(400, "INVALID_ARGUMENT", "limit must be a number");
      }
      limit = std::clamp<std::size_t>(limit, 1, k_max_limit);
    } else if (p.key == "after" && !p.value.empty()) {
      auto id = protocol::uuid::parse(p.value);
      if (!id) {
        co_return json_error(400, "INVALID_ARGUMENT",
                             "after must be a message id (UUID text), not '" + std::string(p.value.substr(0, 64)) + "'");
      }
      after_id = id.value();
      after_text = std::string(p.value);
    }
  }
  // A named std::function, not a lambda temporary inside the co_await expression: GCC 12
  // destroyed such a temporary wrongly on resumption (free() of an invalid pointer).
  std::function<result<common::http_response>()> list_page = [this, view, topic, limit, after_id,
                                                               after_text]() -> result<common::http_response> {
    std::optional<v1::Message> after;
    if (after_id) {
      auto loc = store_.find_id(*after_id);
      if (!loc || !loc.value() || loc.value()->topic != topic) {
        return json_error(404, "NOT_FOUND", "no message " + after_text + " in topic '" + topic + "'");
      }
      storage::read_request rr{topic, loc.value()->partition, loc.value()->offset, 1};
      auto r = store_.read(rr);
      if (!r || r.value().messages.empty() || r.value().messages.front().offset() != loc.value()->offset) {
        return json_error(404, "NOT_FOUND", "message " + after_text + " is no longer retained");
      }
      after = std::move(r.value().messages.front());
    }
    auto t = store_.topic(topic);
    if (!t) return json_error(404, "NOT_FOUND", "no topic '" + topic + "'");
    const auto later = [](const v1::Message& a, const v1::Message& b) {
      return a.publish_time_ms() != b.publish_time_ms() ? a.publish_time_ms() < b.publish_time_ms() : a.id() < b.id();
    };
    std::vector<v1::Message> found;
    for (std::uint32_t p = 0; p < t->partitions.size(); ++p) {
      std::uint64_t lo = t->partitions[p].start_offset, hi = t->partitions[p].next_offset;
      const auto at = [&](std::uint64_t off) -> std::optional<v1::Message> {
        auto r = store_.read(storage::read_request{topic, p, off, 1});
        if (!r || r.value().messages.empty()) return std::nullopt;
        return std::move(r.value().messages.front());
      };
      if (after) {
        // First offset whose publish time reaches the after-message's.
        while (lo < hi) {
          const auto mid = lo + (hi - lo) / 2;
          auto m = at(mid);
          if (m && m->publish_time_ms() < after->publish_time_ms()) {
            lo = mid + 1;
          } else {
            hi = mid;
          }
        }
      }
      storage::read_request rr{topic, p, lo, limit};
      std::size_t taken = 0;
      while (rr.from_offset < t->partitions[p].next_offset && taken < limit) {
        if (reads_.stopping()) return error(protocol::errc::shutting_down, "the broker is shutting down");
        auto r = store_.read(rr);
        if (!r || r.value().messages.empty()) break;
        for (auto& m : r.value().messages) {
          if (after && !later(*after, m)) continue;
          if (!webhook_matches(view.rec, m)) continue;
          found.push_back(std::move(m));
          if (++taken == limit) break;
        }
        rr.from_offset = r.value().next_offset;
      }
    }
    std::sort(found.begin(), found.end(), later);
    if (found.size() > limit) found.resize(limit);
    TXMQ_TRY(const auto dead, read_dead_set(store_, view.group, reads_));
    // Like the broker's answers, a page stays within max_frame_bytes of JSON (large bodies in
    // base64): it ends early, and next_after continues after the last message it holds.
    json::array out;
    std::size_t bytes = 0;
    const v1::Message* last = nullptr;
    for (auto& m : found) {
      auto entry = describe_message(store_, view, m, dead, false);
      const std::size_t size = json::serialize(entry).size() + 1;
      if (last && bytes + size > settings_.max_frame_bytes) break;
      bytes += size;
      out.push_back(std::move(entry));
      last = &m;
    }
    json::object body{{"messages", std::move(out)}};
    if (last) body["next_after"] = id_text(last->id());
    return json_response(200, body);
  };
  auto page = co_await reads_.await(std::move(list_page));
  if (!page) co_return worker_failure(page.error());
  co_return std::move(page.value());
}

boost::asio::awaitable<common::http_response> webhook_notifier::reconcile_one(const common::http_request& req) {
  auto auth = authorise(req);
  if (auth.error) co_return *auth.error;
  const reconcile_view view{auth.sub->rec, auth.sub->group, auth.sub->tracker->summary()};
  const std::string text(req.path.substr(std::min(req.path.size(), std::string_view("/v1/messages/").size())));
  auto id = protocol::uuid::parse(text);
  if (!id) co_return json_error(400, "INVALID_ARGUMENT", "use /v1/messages/{id} with a message id (UUID text)");
  std::function<result<common::http_response>()> one = [this, view, text, id = id.value()]() -> result<common::http_response> {
    auto loc = store_.find_id(id);
    // Another topic's message is none of this token's business: not found, as if absent.
    if (!loc || !loc.value() || loc.value()->topic != view.rec.topic()) {
      return json_error(404, "NOT_FOUND", "no message " + text + " in topic '" + view.rec.topic() + "'");
    }
    auto r = store_.read(storage::read_request{loc.value()->topic, loc.value()->partition, loc.value()->offset, 1});
    if (!r || r.value().messages.empty() || r.value().messages.front().offset() != loc.value()->offset) {
      return json_error(404, "NOT_FOUND", "message " + text + " is no longer retained");
    }
    TXMQ_TRY(const auto dead, read_dead_set(store_, view.group, reads_));
    return json_response(200, describe_message(store_, view, r.value().messages.front(), dead, true));
  };
  auto answer = co_await reads_.await(std::move(one));
  if (!answer) co_return worker_failure(answer.error());
  co_return std::move(answer.value());
}

}  // namespace txmq::broker
