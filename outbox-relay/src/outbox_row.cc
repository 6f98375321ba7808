#include "txmq/relay/outbox_row.h"

#include <charconv>

#include <boost/json.hpp>

#include "txmq/pg/pg.h"

namespace txmq::relay {
namespace {

client::error bad_row(std::string_view id, const std::string& what) {
  return {client::errc::invalid_argument, "outbox row " + std::string(id) + ": " + what};
}

}  // namespace

client::result<decoded_row> decode_row(const outbox_row_text& row) {
  decoded_row out;
  auto id = protocol::uuid::parse(row.id);
  if (!id) return bad_row(row.id, "id is not a UUID");
  out.message.id = id.value();
  out.message.topic = std::string(row.topic);
  if (row.key) out.message.key = std::string(*row.key);
  if (!row.headers_json.empty() && row.headers_json != "{}") {
    boost::system::error_code ec;
    auto parsed = boost::json::parse(row.headers_json, ec);
    if (ec || !parsed.is_object()) return bad_row(row.id, "headers are not a JSON object");
    for (const auto& [k, v] : parsed.as_object()) {
      out.message.headers.emplace(std::string(k), v.is_string() ? std::string(v.as_string()) : boost::json::serialize(v));
    }
  }
  auto body = pg::bytea_value(row.payload_hex);
  if (!body) return bad_row(row.id, "payload: " + body.error().message);
  out.message.body = std::move(body).value();
  // created_at as epoch milliseconds with a fraction ("1764121234567.123"): the integer part.
  std::int64_t ms = 0;
  std::from_chars(row.created_at_ms.data(), row.created_at_ms.data() + row.created_at_ms.size(), ms);
  out.created_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
  std::from_chars(row.seq.data(), row.seq.data() + row.seq.size(), out.seq);
  return out;
}

}  // namespace txmq::relay
