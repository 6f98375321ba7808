#include "txmq/common/address.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace txmq::common {
namespace {

using testing::HasSubstr;

TEST(host_port, parses_names_ipv4_and_bracketed_ipv6) {
  EXPECT_EQ(parse_host_port("127.0.0.1:7878").value(), (host_port{"127.0.0.1", 7878}));
  EXPECT_EQ(parse_host_port("[::1]:80").value(), (host_port{"::1", 80}));
  EXPECT_EQ(parse_host_port("[::1]:9").value(), (host_port{"::1", 9}));
  EXPECT_EQ(parse_host_port("localhost:0").value(), (host_port{"localhost", 0}));
  EXPECT_EQ(parse_host_port("0.0.0.0:65535").value(), (host_port{"0.0.0.0", 65535}));
  EXPECT_EQ(parse_host_port("broker.internal:1").value(), (host_port{"broker.internal", 1}));
  EXPECT_EQ(parse_host_port(" 127.0.0.1:7878\t").value(), (host_port{"127.0.0.1", 7878}));
}

TEST(host_port, rejects_malformed_text_with_a_reason) {
  for (const char* bad : {"", "127.0.0.1", ":80", "host:", "127.0.0.1:x", "host:70000", "host:65536",
                          "host:-1", "host:+1", "host:8o", "host: 80", "::1:80", "[::1]80", "[::1]:",
                          "[::1", "[]:80", "host:99999999999999999999"}) {
    auto r = parse_host_port(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, std::make_error_code(std::errc::invalid_argument)) << bad;
    EXPECT_THAT(r.error().message, HasSubstr("is not HOST:PORT")) << bad;
    EXPECT_THAT(r.error().message, HasSubstr("'" + std::string(bad) + "'")) << bad;
  }
  EXPECT_THAT(parse_host_port("127.0.0.1:x").error().message, HasSubstr("the port must be a number from 0 to 65535"));
  // 70000 does not wrap to 4464: it is refused.
  EXPECT_THAT(parse_host_port("host:70000").error().message, HasSubstr("from 0 to 65535"));
  EXPECT_THAT(parse_host_port(":80").error().message, HasSubstr("no host"));
  EXPECT_THAT(parse_host_port("host").error().message, HasSubstr("no port"));
  EXPECT_THAT(parse_host_port("::1:80").error().message, HasSubstr("[ADDR]:PORT"));
}

// Found by the address_units fuzz target (fuzz/regressions/address_units/bracketed_non_ipv6):
// "[[]:1" parsed as host "[", which formats to "[:1", which does not parse.
TEST(host_port, brackets_hold_only_an_ipv6_address) {
  for (const char* text : {"[[]:1", "[]:1", "[host]:1", "[127.0.0.1]:1", "[::1x]:1", "[ ]:1"}) {
    auto r = parse_host_port(text);
    ASSERT_FALSE(r) << text;
    EXPECT_NE(r.error().message.find("brackets hold an IPv6 address"), std::string::npos) << r.error().message;
  }
  EXPECT_EQ(parse_host_port("[fe80::1]:7").value(), (host_port{"fe80::1", 7}));
}

TEST(host_port, formats_what_it_parses) {
  EXPECT_EQ((host_port{"::1", 80}).to_string(), "[::1]:80");
  EXPECT_EQ((host_port{"127.0.0.1", 80}).to_string(), "127.0.0.1:80");
  for (const char* text : {"127.0.0.1:7878", "[::1]:9", "localhost:0", "broker.internal:65535"}) {
    EXPECT_EQ(parse_host_port(text).value().to_string(), text);
  }
}

TEST(host_port, loopback_and_ip_literals) {
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("127.1.2.3"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(is_loopback_host("::"));
  EXPECT_FALSE(is_loopback_host("10.1.2.3"));
  EXPECT_FALSE(is_loopback_host("example.com"));

  EXPECT_TRUE(is_ip_literal("10.0.0.1"));
  EXPECT_TRUE(is_ip_literal("::1"));
  EXPECT_FALSE(is_ip_literal("localhost"));
  EXPECT_FALSE(is_ip_literal("[::1]"));
}

TEST(host_port, endpoints_without_resolving) {
  EXPECT_EQ(to_endpoint({"localhost", 80}).value(),
            boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 80));
  EXPECT_EQ(to_endpoint({"::1", 81}).value(),
            boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("::1"), 81));
  auto named = to_endpoint({"example.com", 80});
  ASSERT_FALSE(named);
  EXPECT_THAT(named.error().message, HasSubstr("'example.com'"));
  EXPECT_THAT(named.error().message, HasSubstr("not an IP address"));
}

}  // namespace
}  // namespace txmq::common
