#include "webhooks/webhook_signer.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace txmq::broker {
namespace {

// The example of the Standard Webhooks specification (its reference libraries' test vector).
TEST(webhook_signer_test, standard_webhooks_vector) {
  auto key = webhook_secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
  ASSERT_TRUE(key);
  EXPECT_EQ(webhook_signature(key.value(), "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
                              R"({"test": 2432232314})"),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
}

TEST(webhook_signer_test, several_keys_sign_space_separated) {
  const std::string a = "key-a", b = "key-b";
  auto header = webhook_signature_header({a, b}, "id", 1, "body");
  EXPECT_EQ(header, webhook_signature(a, "id", 1, "body") + " " + webhook_signature(b, "id", 1, "body"));
}

TEST(webhook_signer_test, secrets) {
  auto s = generate_webhook_secret();
  EXPECT_TRUE(s.starts_with("whsec_"));
  auto key = webhook_secret_key(s);
  ASSERT_TRUE(key);
  EXPECT_EQ(key.value().size(), 24u);
  EXPECT_NE(generate_webhook_secret(), s);
  EXPECT_FALSE(webhook_secret_key("whsec_!!!"));
  EXPECT_FALSE(webhook_secret_key("whsec_"));
  EXPECT_EQ(random_hex(8).size(), 16u);
}

TEST(webhook_signer_test, retry_after) {
  EXPECT_EQ(parse_retry_after("120", 0), std::chrono::seconds(120));
  EXPECT_EQ(parse_retry_after(" 0 ", 0), std::chrono::seconds(0));
  // 2015-10-21T07:28:00Z is 1445412480 s.
  const std::int64_t at = 1445412480LL * 1000;
  EXPECT_EQ(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", at - 5000), std::chrono::seconds(5));
  EXPECT_EQ(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", at + 5000), std::chrono::seconds(0));
  EXPECT_FALSE(parse_retry_after("", 0));
  EXPECT_FALSE(parse_retry_after("soon", 0));
  EXPECT_FALSE(parse_retry_after("-5", 0));
}

TEST(webhook_signer_test, urls) {
  auto u = parse_webhook_url("https://example.com/hooks/a?x=1");
  ASSERT_TRUE(u) << u.error();
  EXPECT_TRUE(u.value().tls);
  EXPECT_EQ(u.value().host, "example.com");
  EXPECT_EQ(u.value().port, "443");
  EXPECT_EQ(u.value().target, "/hooks/a?x=1");
  u = parse_webhook_url("http://127.0.0.1:8080");
  ASSERT_TRUE(u) << u.error();
  EXPECT_FALSE(u.value().tls);
  EXPECT_EQ(u.value().port, "8080");
  EXPECT_EQ(u.value().target, "/");
  u = parse_webhook_url("http://[::1]:9/x");
  ASSERT_TRUE(u) << u.error();
  EXPECT_EQ(u.value().host, "::1");
  EXPECT_FALSE(parse_webhook_url("ftp://example.com/"));
  EXPECT_FALSE(parse_webhook_url("not a url"));
  EXPECT_FALSE(parse_webhook_url("http://user:pw@example.com/"));
  EXPECT_FALSE(parse_webhook_url("http:///path"));
}

// Found by the webhook_parse fuzz target (fuzz/regressions/webhook_parse/empty_port): an empty
// port was kept as "" and a 20-digit one as text, and the client's std::stoul threw on both.
TEST(webhook_signer_test, url_ports_are_numbers_from_1_to_65535_or_the_default) {
  auto empty = parse_webhook_url("http://h:/");
  ASSERT_TRUE(empty) << empty.error();
  EXPECT_EQ(empty.value().port, "80");
  auto empty_tls = parse_webhook_url("https://h:/x");
  ASSERT_TRUE(empty_tls) << empty_tls.error();
  EXPECT_EQ(empty_tls.value().port, "443");
  EXPECT_EQ(parse_webhook_url("http://h:65535/").value().port, "65535");
  for (const char* bad : {"http://h:0/", "http://h:65536/", "http://h:99999999999999999999/", "http://h:000000/"}) {
    auto u = parse_webhook_url(bad);
    ASSERT_FALSE(u) << bad;
    EXPECT_NE(u.error().message.find("the port must be a number from 1 to 65535"), std::string::npos) << u.error();
  }
  // fuzz/regressions/webhook_parse/path_not_starting_with_slash: Boost.URL takes "&x" as the path.
  auto odd = parse_webhook_url("http://[::1]:9&x");
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.error().message.find("the path must start with '/'"), std::string::npos) << odd.error();
}

}  // namespace
}  // namespace txmq::broker
