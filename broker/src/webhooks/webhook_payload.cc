#include "webhooks/webhook_payload.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include <boost/json.hpp>

#include "txmq/common/base64.h"

namespace txmq::broker {

namespace json = boost::json;

bool is_json(std::string_view body) {
  boost::system::error_code ec;
  json::parse(body, ec);
  return !ec;
}

std::string rfc3339_ms(std::int64_t unix_ms) {
  const std::int64_t secs = unix_ms >= 0 ? unix_ms / 1000 : (unix_ms - 999) / 1000;
  const auto ms = static_cast<int>(unix_ms - secs * 1000);
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

webhook_body webhook_payload(const v1::Message& m, v1::WebhookPayload payload) {
  if (payload == v1::WEBHOOK_PAYLOAD_ENVELOPE) {
    json::object o{{"type", m.topic()}, {"timestamp", rfc3339_ms(m.publish_time_ms())}};
    boost::system::error_code ec;
    auto data = json::parse(m.body(), ec);
    if (!ec) {
      o["data"] = std::move(data);
    } else {
      o["data_base64"] = common::base64_encode(m.body());
    }
    return {"application/json", json::serialize(o)};
  }
  // Header names are case-sensitive in the message; HTTP's are not: accept any spelling.
  for (const auto& [name, value] : m.headers()) {
    if (name.size() == 12 && std::equal(name.begin(), name.end(), "content-type", [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == b;
        })) {
      return {value, m.body()};
    }
  }
  return {is_json(m.body()) ? "application/json" : "application/octet-stream", m.body()};
}

}  // namespace txmq::broker
