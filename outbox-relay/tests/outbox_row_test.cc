#include "txmq/relay/outbox_row.h"

#include <limits>

#include <gtest/gtest.h>

namespace txmq::relay {
namespace {

outbox_row_text row(std::string_view headers, std::string_view payload = "\\x6869") {
  return {"0190b1f2-0000-7000-8000-000000000001", "orders", std::optional<std::string_view>("k1"), headers, payload,
          "1764121234567", "42"};
}

TEST(outbox_row, decodes_id_key_headers_body_and_seq) {
  auto r = decode_row(row(R"({"a": "x", "n": 1})"));
  ASSERT_TRUE(r) << r.error();
  const auto& m = r.value().message;
  EXPECT_EQ(m.id->to_string(), "0190b1f2-0000-7000-8000-000000000001");
  EXPECT_EQ(m.topic, "orders");
  EXPECT_EQ(m.key, "k1");
  EXPECT_EQ(m.body, "hi");
  EXPECT_EQ(m.headers.at("a"), "x");
  EXPECT_EQ(m.headers.at("n"), "1");  // a non-string header travels as its JSON text
  EXPECT_EQ(r.value().seq, 42);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(r.value().created_at.time_since_epoch()).count(),
            1764121234567);
}

// Found by the outbox_row fuzz target (fuzz/regressions/outbox_row/created_at_beyond_2262): a
// created_at past what system_clock holds (year 2262) overflowed in the conversion to it.
TEST(outbox_row, a_created_at_beyond_the_clock_is_clamped) {
  auto text = row("{}");
  text.created_at_ms = "1795651208880000";  // year 58871
  auto r = decode_row(text);
  ASSERT_TRUE(r) << r.error();
  const auto limit =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::duration::max());
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(r.value().created_at.time_since_epoch()), limit);
  text.created_at_ms = "-1795651208880000";
  auto before = decode_row(text);
  ASSERT_TRUE(before) << before.error();
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(before.value().created_at.time_since_epoch()),
            -limit);
}

// The relay reads the payload in binary result format: its raw bytes, NULs included, are the body.
TEST(outbox_row, a_raw_payload_is_the_body_as_it_is) {
  const std::string bytes("\\x68\0\xff", 6);  // would be bad hex; raw, it is 6 bytes
  auto text = row("{}", bytes);
  text.payload_raw = true;
  auto r = decode_row(text);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r.value().message.body, bytes);
  text.payload_raw = false;
  EXPECT_FALSE(decode_row(text));  // the same bytes as hex text are refused
}

TEST(outbox_row, no_key_stays_no_key) {
  auto text = row("{}");
  text.key = std::nullopt;
  auto r = decode_row(text);
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(r.value().message.key);
  EXPECT_TRUE(r.value().message.headers.empty());
}

TEST(outbox_row, refuses_what_it_cannot_carry_and_names_the_row) {
  auto bad_headers = decode_row(row("[1, 2]"));
  ASSERT_FALSE(bad_headers);
  EXPECT_NE(bad_headers.error().message.find("0190b1f2-0000-7000-8000-000000000001"), std::string::npos);
  EXPECT_FALSE(decode_row(row("{}", "zz")));
}

std::string big_endian8(std::int64_t v) {
  std::string b(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) b[static_cast<std::size_t>(i)] = static_cast<char>(v & 0xff);
  return b;
}

// What txmq-relay reads a round as: every column in binary result format.
TEST(outbox_row, binary_columns_decode_to_the_same_message) {
  const auto id = protocol::uuid::parse("0190b1f2-0000-7000-8000-000000000001").value();
  // 2025-11-26 01:40:34.567 UTC as PostgreSQL stores it: microseconds since 2000-01-01.
  const std::int64_t unix_us = 1764121234567000;
  const std::string created = big_endian8(unix_us - 946684800000000);
  const std::string seq = big_endian8(42);
  const std::string payload("h\0i", 3);
  outbox_row_binary b{id.raw(), "orders", std::optional<std::string_view>("k1"), R"({"a": "x", "n": 1})", payload, created, seq};
  auto r = decode_row(b);
  ASSERT_TRUE(r) << r.error();
  const auto& m = r.value().message;
  EXPECT_EQ(m.id->to_string(), "0190b1f2-0000-7000-8000-000000000001");
  EXPECT_EQ(m.topic, "orders");
  EXPECT_EQ(m.key, "k1");
  EXPECT_EQ(m.body, payload);
  EXPECT_EQ(m.headers.at("a"), "x");
  EXPECT_EQ(m.headers.at("n"), "1");
  EXPECT_EQ(r.value().seq, 42);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::microseconds>(r.value().created_at.time_since_epoch()).count(), unix_us);

  // 'infinity' and '-infinity' (INT64_MAX / INT64_MIN) are clamped, not overflowed.
  const std::string inf = big_endian8(std::numeric_limits<std::int64_t>::max());
  b.created_at = inf;
  auto far = decode_row(b);
  ASSERT_TRUE(far) << far.error();
  EXPECT_EQ(far.value().created_at.time_since_epoch(),
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::duration::max()));
  const std::string minus_inf = big_endian8(std::numeric_limits<std::int64_t>::min());
  b.created_at = minus_inf;
  ASSERT_TRUE(decode_row(b));

  b.created_at = created;
  b.id = "short";
  EXPECT_FALSE(decode_row(b));
  b.id = id.raw();
  b.seq = "1234";
  EXPECT_FALSE(decode_row(b));
  b.seq = seq;
  b.headers_json = "[1]";
  auto bad = decode_row(b);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("0190b1f2-0000-7000-8000-000000000001"), std::string::npos);
}

}  // namespace
}  // namespace txmq::relay
