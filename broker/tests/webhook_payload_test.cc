#include "webhooks/webhook_payload.h"

#include <boost/json.hpp>
#include <gtest/gtest.h>

namespace txmq::broker {
namespace {

namespace json = boost::json;

v1::Message message(std::string body) {
  v1::Message m;
  m.set_topic("orders");
  m.set_body(std::move(body));
  m.set_publish_time_ms(1767225606123);
  return m;
}

TEST(webhook_payload_test, raw_content_type_from_header_then_json_then_octet_stream) {
  auto m = message("hello");
  EXPECT_EQ(webhook_payload(m, v1::WEBHOOK_PAYLOAD_RAW).content_type, "application/octet-stream");
  EXPECT_EQ(webhook_payload(message(R"({"a": 1})"), v1::WEBHOOK_PAYLOAD_RAW).content_type, "application/json");
  EXPECT_EQ(webhook_payload(message(" 42 "), v1::WEBHOOK_PAYLOAD_RAW).content_type, "application/json");
  EXPECT_EQ(webhook_payload(message("{not json"), v1::WEBHOOK_PAYLOAD_RAW).content_type, "application/octet-stream");
  (*m.mutable_headers())["Content-Type"] = "text/plain; charset=utf-8";
  auto p = webhook_payload(m, v1::WEBHOOK_PAYLOAD_RAW);
  EXPECT_EQ(p.content_type, "text/plain; charset=utf-8");
  EXPECT_EQ(p.body, "hello");
}

TEST(webhook_payload_test, envelope_wraps_json_under_data_and_other_bodies_under_data_base64) {
  auto p = webhook_payload(message(R"({"order": 7})"), v1::WEBHOOK_PAYLOAD_ENVELOPE);
  EXPECT_EQ(p.content_type, "application/json");
  auto v = json::parse(p.body).as_object();
  EXPECT_EQ(v.at("type"), "orders");
  EXPECT_EQ(v.at("timestamp"), "2026-01-01T00:00:06.123Z");
  EXPECT_EQ(v.at("data").at("order"), 7);
  EXPECT_FALSE(v.contains("data_base64"));

  auto b = json::parse(webhook_payload(message(std::string("\x00\x01hi", 4)), v1::WEBHOOK_PAYLOAD_ENVELOPE).body).as_object();
  EXPECT_EQ(b.at("data_base64"), "AAFoaQ==");
  EXPECT_FALSE(b.contains("data"));
}

TEST(webhook_payload_test, rfc3339) {
  EXPECT_EQ(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(rfc3339_ms(1767225599999), "2025-12-31T23:59:59.999Z");
}

}  // namespace
}  // namespace txmq::broker
