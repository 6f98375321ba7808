// Principals and grants in etcd (auth_records.h).

#include "txmq/cluster/auth_records.h"

#include <optional>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "etcd_json.h"
#include "txmq/cluster/errc.h"

namespace txmq::cluster {

namespace asio = boost::asio;
namespace json = boost::json;

using detail::bad_value;

namespace {

std::string to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::optional<std::string> from_hex(std::string_view hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

std::string acl_key(const key_layout& keys, const acl_record& a) {
  return keys.acls_of(a.principal) + a.permission + "/" + a.resource;
}

error bad_name(std::string_view name) {
  return error(errc::invalid_argument, "principal name '" + std::string(name) + "' must be non-empty and hold no '/'");
}

}  // namespace

std::string encode(const principal_record& p) {
  json::object o;
  o["token_sha256"] = to_hex(p.token_sha256);
  o["created_ms"] = p.created_ms;
  return json::serialize(o);
}

std::string encode(const acl_record& a) {
  json::object o;
  o["principal"] = a.principal;
  o["permission"] = a.permission;
  o["resource"] = a.resource;
  return json::serialize(o);
}

result<principal_record> decode_principal(std::string_view name, std::string_view text) {
  std::error_code ec;
  auto v = json::parse(text, ec);
  if (ec || !v.is_object()) return bad_value("a principal", "not a JSON object");
  const auto& o = v.get_object();
  const auto* hash = o.if_contains("token_sha256");
  const auto* created = o.if_contains("created_ms");
  if (hash == nullptr || !hash->is_string()) return bad_value("a principal", "no token_sha256");
  auto raw = from_hex(std::string_view(hash->get_string()));
  if (!raw || raw->size() != 32) return bad_value("a principal", "token_sha256 is not 64 hex digits");
  principal_record p;
  p.name = std::string(name);
  p.token_sha256 = std::move(*raw);
  if (created != nullptr && created->is_int64()) p.created_ms = created->get_int64();
  return p;
}

result<acl_record> decode_acl(std::string_view text) {
  std::error_code ec;
  auto v = json::parse(text, ec);
  if (ec || !v.is_object()) return bad_value("a grant", "not a JSON object");
  const auto& o = v.get_object();
  acl_record a;
  for (auto [field, out] : {std::pair{"principal", &a.principal}, std::pair{"permission", &a.permission},
                            std::pair{"resource", &a.resource}}) {
    const auto* f = o.if_contains(field);
    if (f == nullptr || !f->is_string()) return bad_value("a grant", std::string("no ") + field);
    *out = std::string(f->get_string());
  }
  return a;
}

asio::awaitable<result<record_change>> put_principal(etcd_client& etcd, const key_layout& keys,
                                                     const principal_record& p) {
  if (p.name.empty() || p.name.find('/') != std::string::npos) co_return bad_name(p.name);
  txn_request req;
  req.compares.push_back({keys.principal(p.name), compare_target::create_revision, compare_result::equal, 0, {}});
  req.success.push_back(op_put{keys.principal(p.name), encode(p), 0});
  auto answer = co_await etcd.txn(req);
  if (!answer) co_return answer.error();
  co_return record_change{answer.value().succeeded, answer.value().revision};
}

asio::awaitable<result<record_change>> delete_principal(etcd_client& etcd, const key_layout& keys,
                                                        std::string_view name) {
  if (name.empty() || name.find('/') != std::string_view::npos) co_return bad_name(name);
  const std::string grants = keys.acls_of(name);
  txn_request req;
  req.compares.push_back({keys.principal(name), compare_target::create_revision, compare_result::greater, 0, {}});
  req.success.push_back(op_delete{keys.principal(name), {}});
  req.success.push_back(op_delete{grants, prefix_end(grants)});
  // Grants left by a principal deleted meanwhile go too (nothing else writes them).
  req.failure.push_back(op_delete{grants, prefix_end(grants)});
  auto answer = co_await etcd.txn(req);
  if (!answer) co_return answer.error();
  co_return record_change{answer.value().succeeded, answer.value().revision};
}

asio::awaitable<result<record_change>> put_acl(etcd_client& etcd, const key_layout& keys, const acl_record& a) {
  if (a.principal.empty() || a.principal.find('/') != std::string::npos) co_return bad_name(a.principal);
  const std::string key = acl_key(keys, a);
  txn_request req;
  req.compares.push_back({keys.principal(a.principal), compare_target::create_revision, compare_result::greater, 0, {}});
  req.compares.push_back({key, compare_target::create_revision, compare_result::equal, 0, {}});
  req.success.push_back(op_put{key, encode(a), 0});
  req.failure.push_back(op_range{keys.principal(a.principal), {}});
  auto answer = co_await etcd.txn(req);
  if (!answer) co_return answer.error();
  if (answer.value().succeeded) co_return record_change{true, answer.value().revision};
  const auto& r = answer.value();
  if (r.ranges.empty() || r.ranges.front().kvs.empty()) {
    co_return error(errc::invalid_argument,
                    "no principal '" + a.principal + "'; create it with: txmq principal create " + a.principal);
  }
  co_return record_change{false, r.revision};  // the grant exists
}

asio::awaitable<result<record_change>> delete_acl(etcd_client& etcd, const key_layout& keys, const acl_record& a) {
  if (a.principal.empty() || a.principal.find('/') != std::string::npos) co_return bad_name(a.principal);
  const std::string key = acl_key(keys, a);
  txn_request req;
  req.compares.push_back({key, compare_target::create_revision, compare_result::greater, 0, {}});
  req.success.push_back(op_delete{key, {}});
  auto answer = co_await etcd.txn(req);
  if (!answer) co_return answer.error();
  co_return record_change{answer.value().succeeded, answer.value().revision};
}

asio::awaitable<result<record_change>> put_webhook(etcd_client& etcd, const key_layout& keys, std::string_view id,
                                                   std::string record, bool create) {
  if (id.empty() || id.find('/') != std::string_view::npos)
    co_return error(errc::invalid_argument, "webhook id '" + std::string(id) + "' must be non-empty and hold no '/'");
  txn_request req;
  req.compares.push_back({keys.webhook(id), compare_target::create_revision,
                          create ? compare_result::equal : compare_result::greater, 0, {}});
  req.success.push_back(op_put{keys.webhook(id), std::move(record), 0});
  auto answer = co_await etcd.txn(req);
  if (!answer) co_return answer.error();
  co_return record_change{answer.value().succeeded, answer.value().revision};
}

asio::awaitable<result<record_change>> update_webhook(
    etcd_client& etcd, const key_layout& keys, std::string id,
    std::function<std::optional<std::string>(std::string_view current)> change, int attempts) {
  const auto key = keys.webhook(id);
  for (int i = 0; i < attempts; ++i) {
    auto read = co_await etcd.range(key);
    if (!read) co_return read.error();
    if (read.value().kvs.empty()) co_return record_change{false, read.value().revision};  // deleted
    const auto& kv = read.value().kvs.front();
    auto next = change(kv.value);
    if (!next) co_return record_change{false, read.value().revision};
    txn_request req;
    req.compares.push_back({key, compare_target::mod_revision, compare_result::equal, kv.mod_revision, {}});
    req.success.push_back(op_put{key, std::move(*next), 0});
    auto answer = co_await etcd.txn(req);
    if (!answer) co_return answer.error();
    if (answer.value().succeeded) co_return record_change{true, answer.value().revision};
    // Changed since the read (a rotation, a delete): decide again on what is there now.
  }
  co_return error(errc::compare_failed, "webhook " + id + " kept changing under " + std::to_string(attempts) +
                                            " attempts to update it");
}

asio::awaitable<result<record_change>> delete_webhook(etcd_client& etcd, const key_layout& keys, std::string_view id) {
  txn_request req;
  req.compares.push_back({keys.webhook(id), compare_target::create_revision, compare_result::greater, 0, {}});
  req.success.push_back(op_delete{keys.webhook(id), {}});
  auto answer = co_await etcd.txn(req);
  if (!answer) co_return answer.error();
  co_return record_change{answer.value().succeeded, answer.value().revision};
}

}  // namespace txmq::cluster
