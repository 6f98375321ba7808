// The HTTP/JSON API's pure parts: the route table against openapi.json, path matching, the
// access each route needs, the JSON mapping and the error statuses. The API against a real
// broker is tests/http_api_test.py.

#include "http/http_api.h"

#include <set>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "http/json_mapping.h"
#include "http/route_table.h"
#include "txmq/protocol/message_id.h"

namespace txmq::broker::http_api {
namespace {

namespace json = boost::json;
namespace http = boost::beast::http;

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

TEST(http_api_test, openapi_lists_exactly_the_route_table) {
  auto doc = json::parse(openapi_document()).as_object();
  EXPECT_EQ(doc.at("openapi").as_string().subview().substr(0, 2), "3.");
  std::set<std::pair<std::string, std::string>> in_doc;
  for (auto& [path, item] : doc.at("paths").as_object()) {
    for (auto& [method, op] : item.as_object()) {
      if (method == "parameters") continue;
      in_doc.insert({std::string(path), std::string(method)});
    }
  }
  std::set<std::pair<std::string, std::string>> in_table;
  for (auto& r : routes()) in_table.insert({std::string(r.pattern), lower(http::to_string(r.method))});
  EXPECT_EQ(in_doc, in_table);
}

TEST(http_api_test, every_route_names_its_access) {
  for (auto& r : routes()) {
    if (r.pattern == "/v1/openapi.json") continue;
    EXPECT_FALSE(r.permission.empty()) << r.pattern;
  }
  auto a = required_access(http::verb::post, "/v1/topics/orders%2Feu/messages");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->permission, "produce");
  EXPECT_EQ(a->resource, "topic:orders/eu");
  a = required_access(http::verb::post, "/v1/groups/billing/ack");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->permission, "consume");
  EXPECT_EQ(a->resource, "group:billing");
  a = required_access(http::verb::post, "/v1/transactions/01890a5d-ac96-774b-bcce-b302099a8057/commit");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->permission, "admin");
  EXPECT_EQ(a->resource, "cluster");
  EXPECT_FALSE(required_access(http::verb::put, "/v1/topics"));
  EXPECT_FALSE(required_access(http::verb::get, "/v1/topics/a/b/c"));
}

TEST(http_api_test, patterns) {
  std::map<std::string, std::string, std::less<>> p;
  EXPECT_TRUE(match_pattern("/v1/topics/{topic}", {"v1", "topics", "t"}, p));
  EXPECT_EQ(p["topic"], "t");
  p.clear();
  EXPECT_FALSE(match_pattern("/v1/topics/{topic}", {"v1", "topics"}, p));
  EXPECT_FALSE(match_pattern("/v1/topics/{topic}", {"v1", "topics", ""}, p));
  EXPECT_FALSE(match_pattern("/v1/topics", {"v1", "topics", "t"}, p));
  EXPECT_TRUE(match_pattern("/v1/topics", {"v1", "topics"}, p));
}

TEST(http_api_test, json_mapping_round_trip) {
  v1::Message m;
  const auto id = protocol::uuid::make_v7();
  m.set_id(std::string(id.raw()));
  m.set_topic("orders");
  m.set_key(std::string("\xff\x00", 2));
  (*m.mutable_headers())["a"] = "b";
  m.set_body("hello");
  m.set_offset(1ull << 40);
  auto v = to_json(m).as_object();
  EXPECT_EQ(v.at("id").as_string(), id.to_string());
  EXPECT_EQ(v.at("key_base64"), "/wA=");
  EXPECT_FALSE(v.contains("key"));
  EXPECT_EQ(v.at("body"), "hello");
  EXPECT_EQ(v.at("offset").to_number<std::uint64_t>(), 1ull << 40);
  v1::Message back;
  ASSERT_TRUE(from_json(v, back));
  EXPECT_EQ(back.SerializeAsString(), m.SerializeAsString());

  // Binary that happens to be valid UTF-8 still goes out as base64.
  m.set_body(std::string("\x00\x01", 2));
  EXPECT_EQ(to_json(m).as_object().at("body_base64"), "AAE=");
}

TEST(http_api_test, json_mapping_refuses_what_it_cannot_map) {
  v1::ProduceRequest r;
  auto e = from_json(json::parse(R"({"messages":[{"bdy":"x"}]})"), r);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("messages[0].bdy"), std::string::npos) << e.error().message;
  EXPECT_FALSE(from_json(json::parse(R"({"messages":[{"id":"nope"}]})"), r));
  EXPECT_FALSE(from_json(json::parse(R"({"messages":[{"body":"a","body_base64":"YQ=="}]})"), r));
  EXPECT_FALSE(from_json(json::parse(R"({"messages":[{"body_base64":"%%%"}]})"), r));
  EXPECT_FALSE(from_json(json::parse(R"({"messages":[{"deliver_at_ms":1.5}]})"), r));
  v1::CreateTopicRequest t;
  EXPECT_FALSE(from_json(json::parse(R"({"name":"t","partitions":-1})"), t));
  EXPECT_TRUE(from_json(json::parse(R"({"name":"t","partitions":3})"), t));
  EXPECT_EQ(t.partitions(), 3u);
}

TEST(http_api_test, statuses) {
  EXPECT_EQ(http_status(v1::INVALID_ARGUMENT), 400u);
  EXPECT_EQ(http_status(v1::UNKNOWN_TOPIC), 404u);
  EXPECT_EQ(http_status(v1::TOPIC_EXISTS), 409u);
  EXPECT_EQ(http_status(v1::MESSAGE_TOO_LARGE), 413u);
  EXPECT_EQ(http_status(v1::LIMIT_EXCEEDED), 429u);
  EXPECT_EQ(http_status(v1::STORE_FULL), 503u);
  EXPECT_EQ(http_status(v1::INTERNAL), 500u);
}

}  // namespace
}  // namespace txmq::broker::http_api
