#include "txmq/relay/outbox_row.h"

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

}  // namespace
}  // namespace txmq::relay
