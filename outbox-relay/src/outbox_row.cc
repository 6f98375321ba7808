#include "txmq/relay/outbox_row.h"

#include <algorithm>
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
  if (row.payload_raw) {
    out.message.body = std::string(row.payload_hex);
  } else {
    auto body = pg::bytea_value(row.payload_hex);
    if (!body) return bad_row(row.id, "payload: " + body.error().message);
    out.message.body = std::move(body).value();
  }
  // created_at as epoch milliseconds with a fraction ("1764121234567.123"): the integer part.
  std::int64_t ms = 0;
  std::from_chars(row.created_at_ms.data(), row.created_at_ms.data() + row.created_at_ms.size(), ms);
  // system_clock counts nanoseconds in 64 bits (years 1677 to 2262); PostgreSQL's timestamps
  // reach year 294276. A time beyond is clamped (it only feeds the age metric), not converted
  // with an overflow (found by fuzzing: fuzz/regressions/outbox_row/created_at_beyond_2262).
  constexpr auto k_limit_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::duration::max()).count();
  ms = std::clamp<std::int64_t>(ms, -k_limit_ms, k_limit_ms);
  out.created_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
  std::from_chars(row.seq.data(), row.seq.data() + row.seq.size(), out.seq);
  return out;
}

}  // namespace txmq::relay
