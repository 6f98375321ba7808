// The webhook egress guard's classifier and allow list (docs/security.md "Webhook egress
// guard"): every blocked range at its edges, IPv6 and IPv4-mapped IPv6, and the exemptions.

#include "webhooks/egress_guard.h"

#include <gtest/gtest.h>

namespace txmq::broker {
namespace {

namespace ip = boost::asio::ip;

address_class of(const char* text) { return classify(ip::make_address(text)); }

TEST(EgressGuard, ClassifiesIpv4Ranges) {
  EXPECT_EQ(of("127.0.0.1"), address_class::loopback);
  EXPECT_EQ(of("127.255.255.254"), address_class::loopback);
  EXPECT_EQ(of("10.0.0.0"), address_class::private_net);
  EXPECT_EQ(of("10.1.2.3"), address_class::private_net);
  EXPECT_EQ(of("10.255.255.255"), address_class::private_net);
  EXPECT_EQ(of("11.0.0.1"), address_class::global);
  EXPECT_EQ(of("172.15.255.255"), address_class::global);
  EXPECT_EQ(of("172.16.0.0"), address_class::private_net);
  EXPECT_EQ(of("172.31.255.255"), address_class::private_net);
  EXPECT_EQ(of("172.32.0.0"), address_class::global);
  EXPECT_EQ(of("192.168.0.1"), address_class::private_net);
  EXPECT_EQ(of("192.169.0.1"), address_class::global);
  EXPECT_EQ(of("100.63.255.255"), address_class::global);
  EXPECT_EQ(of("100.64.0.0"), address_class::private_net);
  EXPECT_EQ(of("100.127.255.255"), address_class::private_net);
  EXPECT_EQ(of("100.128.0.0"), address_class::global);
  EXPECT_EQ(of("169.254.169.254"), address_class::link_local);
  EXPECT_EQ(of("169.254.0.0"), address_class::link_local);
  EXPECT_EQ(of("169.255.0.1"), address_class::global);
  EXPECT_EQ(of("224.0.0.1"), address_class::multicast);
  EXPECT_EQ(of("239.255.255.255"), address_class::multicast);
  EXPECT_EQ(of("0.0.0.0"), address_class::unspecified);
  EXPECT_EQ(of("0.1.2.3"), address_class::unspecified);
  EXPECT_EQ(of("255.255.255.255"), address_class::reserved);
  EXPECT_EQ(of("240.0.0.1"), address_class::reserved);
  EXPECT_EQ(of("8.8.8.8"), address_class::global);
  EXPECT_EQ(of("93.184.216.34"), address_class::global);
}

TEST(EgressGuard, ClassifiesIpv6Ranges) {
  EXPECT_EQ(of("::1"), address_class::loopback);
  EXPECT_EQ(of("::"), address_class::unspecified);
  EXPECT_EQ(of("fe80::1"), address_class::link_local);
  EXPECT_EQ(of("febf:ffff::1"), address_class::link_local);
  EXPECT_EQ(of("fec0::1"), address_class::global);
  EXPECT_EQ(of("fc00::1"), address_class::unique_local);
  EXPECT_EQ(of("fd12:3456::1"), address_class::unique_local);
  EXPECT_EQ(of("fe00::1"), address_class::global);
  EXPECT_EQ(of("ff02::1"), address_class::multicast);
  EXPECT_EQ(of("2001:db8::1"), address_class::global);
  EXPECT_EQ(of("2606:4700::1111"), address_class::global);
}

TEST(EgressGuard, ClassifiesIpv4MappedAndCompatibleIpv6AsTheirIpv4) {
  EXPECT_EQ(of("::ffff:127.0.0.1"), address_class::loopback);
  EXPECT_EQ(of("::ffff:10.1.2.3"), address_class::private_net);
  EXPECT_EQ(of("::ffff:169.254.169.254"), address_class::link_local);
  EXPECT_EQ(of("::ffff:100.64.1.1"), address_class::private_net);
  EXPECT_EQ(of("::ffff:8.8.8.8"), address_class::global);
  EXPECT_EQ(of("::127.0.0.1"), address_class::loopback);
  EXPECT_EQ(of("::10.0.0.1"), address_class::private_net);
}

TEST(EgressGuard, RefusesNonGlobalAddressesByDefault) {
  egress_guard g;
  EXPECT_FALSE(g.refuses("example.com", ip::make_address("93.184.216.34")));
  auto why = g.refuses("localhost", ip::make_address("127.0.0.1"));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("127.0.0.1 is a loopback address"), std::string::npos) << *why;
  EXPECT_NE(why->find("webhook_allow_private"), std::string::npos);
  EXPECT_TRUE(g.refuses("metadata", ip::make_address("169.254.169.254")));
  EXPECT_TRUE(g.refuses("x", ip::make_address("::ffff:10.1.2.3")));
  EXPECT_TRUE(g.refuses("x", ip::make_address("fd00::5")));
}

TEST(EgressGuard, AllowPrivateLetsEverythingThrough) {
  egress_guard g;
  g.allow_private = true;
  EXPECT_FALSE(g.refuses("localhost", ip::make_address("127.0.0.1")));
  EXPECT_FALSE(g.refuses("x", ip::make_address("::1")));
  EXPECT_FALSE(g.refuses("x", ip::make_address("169.254.169.254")));
}

TEST(EgressGuard, AllowHostsByNameAndCidr) {
  auto hosts = parse_allow_hosts(" Hooks.Internal, 10.1.0.0/16 ,fd00::/8, 192.168.1.7");
  ASSERT_TRUE(hosts) << hosts.error().message;
  egress_guard g;
  g.allowed = hosts.value();
  EXPECT_FALSE(g.refuses("hooks.internal", ip::make_address("127.0.0.1")));
  EXPECT_FALSE(g.refuses("HOOKS.INTERNAL", ip::make_address("10.9.9.9")));
  EXPECT_TRUE(g.refuses("other.internal", ip::make_address("127.0.0.1")));
  EXPECT_FALSE(g.refuses("a", ip::make_address("10.1.255.1")));
  EXPECT_FALSE(g.refuses("a", ip::make_address("::ffff:10.1.0.9")));
  EXPECT_TRUE(g.refuses("a", ip::make_address("10.2.0.1")));
  EXPECT_FALSE(g.refuses("a", ip::make_address("fd12::1")));
  EXPECT_TRUE(g.refuses("a", ip::make_address("fc00::1")));
  EXPECT_FALSE(g.refuses("a", ip::make_address("192.168.1.7")));
  EXPECT_TRUE(g.refuses("a", ip::make_address("192.168.1.8")));
}

TEST(EgressGuard, ParseAllowHostsRefusesGarbage) {
  EXPECT_TRUE(parse_allow_hosts(""));
  EXPECT_TRUE(parse_allow_hosts(" , "));
  EXPECT_FALSE(parse_allow_hosts("10.0.0.0/33"));
  EXPECT_FALSE(parse_allow_hosts("10.0.0.0/"));
  EXPECT_FALSE(parse_allow_hosts("fd00::/129"));
  EXPECT_FALSE(parse_allow_hosts("http://x"));
  EXPECT_FALSE(parse_allow_hosts("a b"));
  auto bad = parse_allow_hosts("ok.example, bad/host");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("'bad/host'"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace txmq::broker
