#include "etcd_json.h"

#include <charconv>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "txmq/cluster/errc.h"
#include "txmq/common/base64.h"

namespace txmq::cluster::detail {
namespace json = boost::json;
namespace {

std::string b64(std::string_view bytes) { return common::base64_encode(bytes); }

// 64-bit numbers travel as strings: JSON numbers lose precision past 2^53 in many readers.
json::string num(std::int64_t n) { return json::string(std::to_string(n)); }

json::object range_body(std::string_view key, std::string_view range_end) {
  json::object o{{"key", b64(key)}};
  if (!range_end.empty()) o["range_end"] = b64(range_end);
  return o;
}

json::object put_body(std::string_view key, std::string_view value, std::int64_t lease) {
  json::object o{{"key", b64(key)}, {"value", b64(value)}};
  if (lease != 0) o["lease"] = num(lease);
  return o;
}

json::object op_body(const txn_op& op) {
  if (const auto* p = std::get_if<op_put>(&op)) return {{"request_put", put_body(p->key, p->value, p->lease)}};
  if (const auto* r = std::get_if<op_range>(&op)) return {{"request_range", range_body(r->key, r->range_end)}};
  const auto& d = std::get<op_delete>(op);
  return {{"request_delete_range", range_body(d.key, d.range_end)}};
}

const char* target_name(compare_target t) {
  switch (t) {
    case compare_target::version: return "VERSION";
    case compare_target::create_revision: return "CREATE";
    case compare_target::mod_revision: return "MOD";
    case compare_target::value: return "VALUE";
  }
  return "MOD";
}

const char* result_name(compare_result r) {
  switch (r) {
    case compare_result::equal: return "EQUAL";
    case compare_result::greater: return "GREATER";
    case compare_result::less: return "LESS";
    case compare_result::not_equal: return "NOT_EQUAL";
  }
  return "EQUAL";
}

error bad(std::string what) { return {errc::bad_response, "etcd's answer: " + std::move(what)}; }

result<std::string> get_bytes(const json::object& o, std::string_view field) {
  const auto* v = o.if_contains(field);
  if (v == nullptr) return std::string();
  if (!v->is_string()) return bad("'" + std::string(field) + "' is not a string");
  auto decoded = common::base64_decode(v->get_string());
  if (!decoded) return bad("'" + std::string(field) + "' is not base64");
  return std::move(decoded).value();
}

result<key_value> decode_kv(const json::object& o) {
  key_value kv;
  TXMQ_TRY(kv.key, get_bytes(o, "key"));
  TXMQ_TRY(kv.value, get_bytes(o, "value"));
  TXMQ_TRY(kv.create_revision, get_int64(o, "create_revision"));
  TXMQ_TRY(kv.mod_revision, get_int64(o, "mod_revision"));
  TXMQ_TRY(kv.version, get_int64(o, "version"));
  TXMQ_TRY(kv.lease, get_int64(o, "lease"));
  return kv;
}

result<std::vector<key_value>> decode_kvs(const json::object& o) {
  std::vector<key_value> out;
  const auto* kvs = o.if_contains("kvs");
  if (kvs == nullptr) return out;
  if (!kvs->is_array()) return bad("'kvs' is not an array");
  for (const auto& item : kvs->get_array()) {
    if (!item.is_object()) return bad("an entry of 'kvs' is not an object");
    TXMQ_TRY(auto kv, decode_kv(item.get_object()));
    out.push_back(std::move(kv));
  }
  return out;
}

}  // namespace

std::string encode_range(std::string_view key, std::string_view range_end) {
  return json::serialize(range_body(key, range_end));
}

std::string encode_put(std::string_view key, std::string_view value, std::int64_t lease) {
  return json::serialize(put_body(key, value, lease));
}

std::string encode_delete(std::string_view key, std::string_view range_end) {
  return json::serialize(range_body(key, range_end));
}

std::string encode_txn(const txn_request& request) {
  json::array compares;
  for (const auto& c : request.compares) {
    json::object o{{"key", b64(c.key)}, {"target", target_name(c.target)}, {"result", result_name(c.result)}};
    switch (c.target) {
      case compare_target::version: o["version"] = num(c.number); break;
      case compare_target::create_revision: o["create_revision"] = num(c.number); break;
      case compare_target::mod_revision: o["mod_revision"] = num(c.number); break;
      case compare_target::value: o["value"] = b64(c.value); break;
    }
    compares.push_back(std::move(o));
  }
  json::array success;
  for (const auto& op : request.success) success.push_back(op_body(op));
  json::array failure;
  for (const auto& op : request.failure) failure.push_back(op_body(op));
  return json::serialize(json::object{{"compare", std::move(compares)},
                                      {"success", std::move(success)},
                                      {"failure", std::move(failure)}});
}

std::string encode_lease_grant(std::int64_t ttl_seconds) {
  return json::serialize(json::object{{"TTL", num(ttl_seconds)}});
}

std::string encode_lease_id(std::int64_t id) { return json::serialize(json::object{{"ID", num(id)}}); }

std::string encode_watch_create(std::string_view key, std::string_view range_end, std::int64_t start_revision) {
  json::object create = range_body(key, range_end);
  if (start_revision > 0) create["start_revision"] = num(start_revision);
  return json::serialize(json::object{{"create_request", std::move(create)}});
}

result<json::object> parse_object(std::string_view text) {
  std::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return bad("not JSON (" + ec.message() + ")");
  if (!v.is_object()) return bad("not a JSON object");
  return std::move(v.get_object());
}

result<std::int64_t> get_int64(const json::object& o, std::string_view field) {
  const auto* v = o.if_contains(field);
  if (v == nullptr) return std::int64_t{0};
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->get_uint64());
  if (v->is_string()) {
    const auto& s = v->get_string();
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc() && end == s.data() + s.size()) return n;
  }
  return bad("'" + std::string(field) + "' is not a 64-bit number");
}

result<std::int64_t> decode_revision(const json::object& answer) {
  const auto* h = answer.if_contains("header");
  if (h == nullptr || !h->is_object()) return bad("no header");
  return get_int64(h->get_object(), "revision");
}

result<range_result> decode_range(const json::object& answer) {
  range_result r;
  TXMQ_TRY(r.revision, decode_revision(answer));
  TXMQ_TRY(r.kvs, decode_kvs(answer));
  return r;
}

result<std::int64_t> decode_deleted(const json::object& answer) { return get_int64(answer, "deleted"); }

result<txn_result> decode_txn(const json::object& answer) {
  txn_result r;
  TXMQ_TRY(r.revision, decode_revision(answer));
  const auto* s = answer.if_contains("succeeded");
  r.succeeded = s != nullptr && s->is_bool() && s->get_bool();
  const auto* responses = answer.if_contains("responses");
  if (responses == nullptr) return r;
  if (!responses->is_array()) return bad("'responses' is not an array");
  for (const auto& item : responses->get_array()) {
    if (!item.is_object()) return bad("a txn response is not an object");
    const auto* range = item.get_object().if_contains("response_range");
    if (range == nullptr) continue;
    if (!range->is_object()) return bad("'response_range' is not an object");
    range_result rr;
    rr.revision = r.revision;
    TXMQ_TRY(rr.kvs, decode_kvs(range->get_object()));
    r.ranges.push_back(std::move(rr));
  }
  return r;
}

result<lease_grant_result> decode_lease_grant(const json::object& answer) {
  if (const auto* e = answer.if_contains("error"); e != nullptr && e->is_string() && !e->get_string().empty())
    return error(errc::etcd_error, "lease grant: " + std::string(e->get_string()));
  lease_grant_result r;
  TXMQ_TRY(r.id, get_int64(answer, "ID"));
  TXMQ_TRY(const auto ttl, get_int64(answer, "TTL"));
  r.ttl = std::chrono::seconds(ttl);
  if (r.id == 0) return bad("lease grant without an ID");
  return r;
}

result<std::chrono::seconds> decode_keepalive(const json::object& answer) {
  const auto* res = answer.if_contains("result");
  if (res == nullptr || !res->is_object()) return decode_error(200, json::serialize(answer));
  TXMQ_TRY(const auto ttl, get_int64(res->get_object(), "TTL"));
  // etcd answers a keep-alive for an unknown (expired, revoked) lease with TTL 0 (left out).
  if (ttl <= 0) return error(errc::lease_not_found, "the lease has expired or was revoked");
  return std::chrono::seconds(ttl);
}

result<watch_message> decode_watch_message(const json::object& message) {
  const auto* res = message.if_contains("result");
  if (res == nullptr || !res->is_object()) return decode_error(200, json::serialize(message));
  const auto& r = res->get_object();
  watch_message m;
  if (const auto* h = r.if_contains("header"); h != nullptr && h->is_object()) {
    TXMQ_TRY(m.revision, get_int64(h->get_object(), "revision"));
  }
  if (const auto* c = r.if_contains("created"); c != nullptr && c->is_bool()) m.created = c->get_bool();
  if (const auto* c = r.if_contains("canceled"); c != nullptr && c->is_bool()) m.canceled = c->get_bool();
  if (const auto* c = r.if_contains("cancel_reason"); c != nullptr && c->is_string())
    m.cancel_reason = std::string(c->get_string());
  TXMQ_TRY(m.compact_revision, get_int64(r, "compact_revision"));
  if (const auto* events = r.if_contains("events"); events != nullptr) {
    if (!events->is_array()) return bad("'events' is not an array");
    for (const auto& item : events->get_array()) {
      if (!item.is_object()) return bad("a watch event is not an object");
      const auto& e = item.get_object();
      watch_event ev;
      if (const auto* t = e.if_contains("type"); t != nullptr && t->is_string() && t->get_string() == "DELETE")
        ev.type = watch_event::kind::del;
      if (const auto* kv = e.if_contains("kv"); kv != nullptr && kv->is_object()) {
        TXMQ_TRY(ev.kv, decode_kv(kv->get_object()));
      }
      m.events.push_back(std::move(ev));
    }
  }
  return m;
}

error decode_error(unsigned http_status, std::string_view body) {
  std::string text;
  std::int64_t code = 0;
  if (auto parsed = parse_object(body)) {
    const auto& o = parsed.value();
    const json::object* e = &o;
    // A stream reports its error as {"error":{"grpc_code":..,"message":..}}.
    if (const auto* inner = o.if_contains("error"); inner != nullptr && inner->is_object()) e = &inner->get_object();
    if (const auto* m = e->if_contains("message"); m != nullptr && m->is_string()) text = std::string(m->get_string());
    if (auto c = get_int64(*e, "code")) code = c.value();
  }
  if (text.empty()) text = "HTTP " + std::to_string(http_status) + ": " + std::string(body.substr(0, 200));
  if (text.find("lease not found") != std::string::npos) return {errc::lease_not_found, std::move(text)};
  // gRPC UNAVAILABLE (14): etcd has no leader or is stopping; DEADLINE_EXCEEDED (4) likewise.
  if (code == 14 || code == 4) return {errc::etcd_unavailable, "etcd: " + text};
  return {errc::etcd_error, "etcd: " + text};
}

}  // namespace txmq::cluster::detail
