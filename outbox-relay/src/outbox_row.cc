#include "txmq/relay/outbox_row.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include <boost/json.hpp>

#include "txmq/pg/pg.h"

namespace txmq::relay {
namespace {

client::error bad_row(std::string_view id, const std::string& what) {
  return {client::errc::invalid_argument, "outbox row " + std::string(id) + ": " + what};
}

// The topic, key and headers, common to both column forms. Error: the headers' text.
std::optional<std::string> fill_message(producer::outgoing_message& m, std::string_view topic,
                                        const std::optional<std::string_view>& key, std::string_view headers_json) {
  m.topic = std::string(topic);
  if (key) m.key = std::string(*key);
  if (!headers_json.empty() && headers_json != "{}") {
    boost::system::error_code ec;
    auto parsed = boost::json::parse(headers_json, ec);
    if (ec || !parsed.is_object()) return "headers are not a JSON object";
    for (const auto& [k, v] : parsed.as_object()) {
      m.headers.emplace(std::string(k), v.is_string() ? std::string(v.as_string()) : boost::json::serialize(v));
    }
  }
  return std::nullopt;
}

// system_clock counts nanoseconds in 64 bits (years 1677 to 2262); PostgreSQL's timestamps
// reach year 294276. A time beyond is clamped (it only feeds the age metric), not converted
// with an overflow (found by fuzzing: fuzz/regressions/outbox_row/created_at_beyond_2262).
std::chrono::system_clock::time_point clamped_time(std::int64_t since_unix_epoch_us) {
  constexpr auto k_limit_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::duration::max()).count();
  since_unix_epoch_us = std::clamp<std::int64_t>(since_unix_epoch_us, -k_limit_us, k_limit_us);
  return std::chrono::system_clock::time_point(std::chrono::microseconds(since_unix_epoch_us));
}

std::int64_t big_endian_int64(std::string_view b) {
  std::uint64_t v = 0;
  for (unsigned char c : b) v = v << 8 | c;
  return static_cast<std::int64_t>(v);
}

}  // namespace

client::result<decoded_row> decode_row(const outbox_row_binary& row) {
  decoded_row out;
  auto id = protocol::uuid::from_bytes(row.id);
  if (!id) return bad_row("(binary)", "id is not a UUID's 16 bytes");
  out.message.id = id.value();
  if (row.created_at.size() != 8 || row.seq.size() != 8) {
    return bad_row(id.value().to_string(), "created_at or seq is not an 8-byte binary value");
  }
  if (auto bad = fill_message(out.message, row.topic, row.key, row.headers_json)) return bad_row(id.value().to_string(), *bad);
  out.message.body = std::string(row.payload);
  // From PostgreSQL's epoch (2000-01-01) to Unix's, in microseconds; clamped before the shift
  // so that 'infinity' (INT64_MAX) does not overflow.
  constexpr std::int64_t k_pg_epoch_us = 946'684'800'000'000;
  constexpr std::int64_t k_max = std::numeric_limits<std::int64_t>::max() - k_pg_epoch_us;
  out.created_at = clamped_time(std::min(big_endian_int64(row.created_at), k_max) + k_pg_epoch_us);
  out.seq = big_endian_int64(row.seq);
  return out;
}

client::result<decoded_row> decode_row(const outbox_row_text& row) {
  decoded_row out;
  auto id = protocol::uuid::parse(row.id);
  if (!id) return bad_row(row.id, "id is not a UUID");
  out.message.id = id.value();
  if (auto bad = fill_message(out.message, row.topic, row.key, row.headers_json)) return bad_row(row.id, *bad);
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
  // Clamped as above (in milliseconds first: the product with 1000 must not overflow either).
  constexpr auto k_limit_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::duration::max()).count();
  ms = std::clamp<std::int64_t>(ms, -k_limit_ms, k_limit_ms);
  out.created_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
  std::from_chars(row.seq.data(), row.seq.data() + row.seq.size(), out.seq);
  return out;
}

}  // namespace txmq::relay
