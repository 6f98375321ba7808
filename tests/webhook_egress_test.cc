// The webhook egress guard end to end (docs/security.md "Webhook egress guard"): the real
// txmq-broker and txmq CLI, URLs naming loopback, private and link-local addresses, and a host
// name resolving to loopback. Blocked by default (outcome `blocked` in the attempt log, nothing
// reaches the receiver), delivered with webhook_allow_private or webhook_allow_hosts.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "broker_process.h"
#include "fault_support.h"
#include "cli_runner.h"
#include "webhook_receiver.h"

namespace txmq::test {
namespace {

using std::chrono::milliseconds;

bool ipv6_loopback_available() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// Creates a topic and a subscription to `url` (one attempt an hour after the first, 1 s timeout),
// produces one message, and answers the first attempt's log line.
json::object first_attempt(const broker_process& b, const std::string& topic, const std::string& url) {
  EXPECT_EQ(txmq(b, {"topic", "create", topic, "--partitions", "1"}).status, 0);
  auto w = txmq(b, {"--json", "webhook", "create", topic, "--url", url, "--schedule", "1h", "--timeout", "1s"});
  EXPECT_EQ(w.status, 0) << w;
  if (w.objects().size() != 1) return {};
  const std::string id(w.objects()[0].at("id").as_string());
  auto p = txmq(b, {"produce", topic, "hello"});
  EXPECT_EQ(p.status, 0) << p;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = txmq(b, {"--json", "webhook", "attempts", id});
    if (!r.objects().empty()) return r.objects().at(0);
    std::this_thread::sleep_for(milliseconds(50));  // polling the broker's log with a deadline
  }
  ADD_FAILURE() << "no attempt logged for " << url;
  return {};
}

std::string outcome(const json::object& attempt) {
  return attempt.contains("outcome") ? std::string(attempt.at("outcome").as_string()) : std::string("(none)");
}

std::string error_text(const json::object& attempt) {
  return attempt.contains("error") ? std::string(attempt.at("error").as_string()) : std::string();
}

struct target {
  std::string name;
  std::string url;
  bool reaches_receiver;  // with the guard off, the receiver gets it
};

std::vector<target> targets(const receiver& rx4, const receiver* rx6) {
  const std::string port = std::to_string(rx4.port());
  std::vector<target> out = {
      {"loopback_v4", rx4.url(), true},
      {"private_10", "http://10.1.2.3:9/hook", false},
      {"metadata", "http://169.254.169.254/latest/meta-data/?token=abc", false},
      {"localhost_name", "http://localhost:" + port + "/hook", true},
  };
  if (rx6) out.push_back({"loopback_v6", rx6->url(), true});
  return out;
}

TEST(webhook_egress, loopback_private_and_link_local_are_blocked_by_default) {
  receiver rx4([](const seen&, std::size_t) { return reply{}; });
  std::unique_ptr<receiver> rx6;
  if (ipv6_loopback_available()) rx6 = std::make_unique<receiver>([](const seen&, std::size_t) { return reply{}; }, std::nullopt, "::1");
  broker_process b;
  b.start();
  for (const auto& t : targets(rx4, rx6.get())) {
    SCOPED_TRACE(t.name + " " + t.url);
    const auto a = first_attempt(b, "egress-" + t.name, t.url);
    EXPECT_EQ(outcome(a), "blocked") << a;
    EXPECT_NE(error_text(a).find("webhook_allow_private"), std::string::npos) << a;
  }
  EXPECT_TRUE(rx4.requests().empty());
  if (rx6) {
    EXPECT_TRUE(rx6->requests().empty());
  }
  // The broker's log names the subscriptions' URLs without their query (tokens hide there).
  EXPECT_EQ(b.log().find("token=abc"), std::string::npos) << b.log();
  EXPECT_NE(b.log().find("meta-data/?REDACTED"), std::string::npos) << b.log();
}

TEST(webhook_egress, allow_private_delivers_to_loopback_and_tries_private_addresses) {
  receiver rx4([](const seen&, std::size_t) { return reply{}; });
  std::unique_ptr<receiver> rx6;
  if (ipv6_loopback_available()) rx6 = std::make_unique<receiver>([](const seen&, std::size_t) { return reply{}; }, std::nullopt, "::1");
  broker_process b({"--webhook-allow-private"});
  b.start();
  for (const auto& t : targets(rx4, rx6.get())) {
    SCOPED_TRACE(t.name + " " + t.url);
    const auto a = first_attempt(b, "egress-" + t.name, t.url);
    if (t.reaches_receiver) {
      EXPECT_EQ(outcome(a), "delivered") << a;
    } else {
      // Nothing listens there: the attempt is made and fails, but it is no longer blocked.
      EXPECT_NE(outcome(a), "blocked") << a;
    }
  }
  EXPECT_EQ(rx4.requests().size(), 2u);  // 127.0.0.1 and localhost
  if (rx6) {
    EXPECT_EQ(rx6->requests().size(), 1u);
  }
}

TEST(webhook_egress, allow_hosts_exempts_names_and_cidrs_only) {
  receiver rx4([](const seen&, std::size_t) { return reply{}; });
  const std::string port = std::to_string(rx4.port());
  {
    broker_process b({"--webhook-allow-hosts", "LocalHost"});
    b.start();
    EXPECT_EQ(outcome(first_attempt(b, "by-name", "http://localhost:" + port + "/hook")), "delivered");
    EXPECT_EQ(outcome(first_attempt(b, "by-address", rx4.url())), "blocked");
  }
  {
    broker_process b({"--webhook-allow-hosts", "127.0.0.0/8"});
    b.start();
    EXPECT_EQ(outcome(first_attempt(b, "by-cidr", rx4.url())), "delivered");
    EXPECT_EQ(outcome(first_attempt(b, "outside-cidr", "http://169.254.169.254/x")), "blocked");
  }
}

TEST(webhook_egress, redirects_are_not_followed) {
  receiver inner([](const seen&, std::size_t) { return reply{}; });
  receiver outer([&](const seen&, std::size_t) { return reply{302, {{"Location", inner.url()}}, false}; });
  broker_process b({"--webhook-allow-private"});
  b.start();
  const auto a = first_attempt(b, "redirect", outer.url());
  EXPECT_EQ(outcome(a), "failed") << a;
  EXPECT_EQ(a.at("status").as_int64(), 302) << a;
  EXPECT_EQ(outer.requests().size(), 1u);
  EXPECT_TRUE(inner.requests().empty());
}

// A webhook's secret is shown by create and rotate-secret only: not by list, the attempt log,
// /metrics or the broker's log.
TEST(webhook_secrets, shown_only_at_create_and_rotation) {
  receiver rx([](const seen&, std::size_t) { return reply{}; });
  broker_process b({"--webhook-allow-private"});
  b.start();
  ASSERT_EQ(txmq(b, {"topic", "create", "s"}).status, 0);
  auto created = txmq(b, {"--json", "webhook", "create", "s", "--url", rx.url() + "?api_key=hunter2"});
  ASSERT_EQ(created.status, 0) << created;
  const auto w = created.objects().at(0);
  const std::string id(w.at("id").as_string()), secret(w.at("secret").as_string());
  ASSERT_TRUE(secret.starts_with("whsec_")) << created;
  ASSERT_EQ(txmq(b, {"produce", "s", "x"}).status, 0);
  ASSERT_TRUE(rx.wait_for(1, std::chrono::seconds(10)));

  auto rotated = txmq(b, {"--json", "webhook", "rotate-secret", id});
  ASSERT_EQ(rotated.status, 0) << rotated;
  const std::string fresh(rotated.objects().at(0).at("secret").as_string());
  ASSERT_NE(fresh, secret);

  for (const auto& args : std::vector<std::vector<std::string>>{{"--json", "webhook", "list"},
                                                                {"webhook", "list"},
                                                                {"--json", "webhook", "attempts", id}}) {
    auto r = txmq(b, args);
    EXPECT_EQ(r.status, 0) << r;
    EXPECT_EQ(r.out.find("whsec_"), std::string::npos) << r;
  }
  const auto metrics = shell_stdout("curl -sS http://127.0.0.1:" + std::to_string(b.http_port()) + "/metrics");
  EXPECT_NE(metrics.find("txmq_webhook_attempts_total"), std::string::npos);
  EXPECT_EQ(metrics.find("whsec_"), std::string::npos);
  EXPECT_EQ(b.log().find(secret.substr(6)), std::string::npos);
  EXPECT_EQ(b.log().find(fresh.substr(6)), std::string::npos);
  EXPECT_EQ(b.log().find("hunter2"), std::string::npos) << b.log();
}

}  // namespace
}  // namespace txmq::test
