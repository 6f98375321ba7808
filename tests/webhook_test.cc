// Webhooks end to end (docs/semantics.md §5): the real txmq-broker and txmq CLI against an HTTP receiver
// that runs in this test process on a free loopback port, with shortened schedules.

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "broker_process.h"
#include "fault_support.h"
#include "cli_runner.h"
#include "webhook_receiver.h"

namespace txmq::test {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

// GET on the broker's admin port; status and body.
std::pair<unsigned, std::string> http_get(std::uint16_t port, const std::string& target, const std::string& token) {
  asio::io_context io;
  beast::tcp_stream stream(io);
  stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, "127.0.0.1");
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res);
  return {res.result_int(), res.body()};
}

struct webhook {
  std::string id, secret, token;
};

class webhook_test : public ::testing::Test {
 protected:
  void SetUp() override { broker_.start(); }

  cli_result txmq(std::vector<std::string> args, const std::string& input = "") {
    return test::txmq(broker_, std::move(args), input);
  }

  webhook create(const std::string& topic, const std::string& url, std::vector<std::string> extra = {}) {
    EXPECT_EQ(txmq({"topic", "create", topic, "--partitions", "2"}).status, 0);
    std::vector<std::string> args{"--json", "webhook", "create", topic, "--url", url};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = txmq(args);
    EXPECT_EQ(r.status, 0) << r;
    auto objs = r.objects();
    if (objs.size() != 1) return {};
    return {std::string(objs[0].at("id").as_string()), std::string(objs[0].at("secret").as_string()),
            std::string(objs[0].at("token").as_string())};
  }

  // Produces one message per body; returns their ids.
  std::vector<std::string> produce(const std::string& topic, const std::vector<std::string>& bodies) {
    std::string input;
    for (auto& b : bodies) input += b + "\n";
    auto r = txmq({"--json", "produce", topic}, input);
    EXPECT_EQ(r.status, 0) << r.err;
    std::vector<std::string> ids;
    for (auto& o : r.objects()) ids.emplace_back(o.at("id").as_string());
    return ids;
  }

  // The attempt log, once it holds at least `n` entries (deadline 10 s).
  std::vector<json::object> attempts(const std::string& id, std::size_t n) {
    const auto deadline = steady::now() + std::chrono::seconds(10);
    std::vector<json::object> got;
    while (steady::now() < deadline) {
      auto r = txmq({"--json", "webhook", "attempts", id});
      got = r.objects();
      if (got.size() >= n) return got;
      std::this_thread::sleep_for(milliseconds(50));  // polling the broker's log with a deadline
    }
    ADD_FAILURE() << "attempt log of " << id << " has " << got.size() << " entries, wanted " << n;
    return got;
  }

  // The receivers listen on loopback, which the egress guard refuses by default.
  broker_process broker_{{"--webhook-timeout", "2s", "--webhook-allow-private"}};
};

double seconds_between(steady::time_point a, steady::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

TEST_F(webhook_test, signature_verifies_with_openssl) {
  receiver rx([](const seen&, std::size_t) { return reply{}; });
  auto w = create("signed", rx.url());
  ASSERT_TRUE(w.secret.starts_with("whsec_")) << w.secret;
  auto ids = produce("signed", {R"({"order":42,"note":"héllo"})"});
  ASSERT_TRUE(rx.wait_for(1, std::chrono::seconds(10)));
  const auto got = rx.requests().front();
  EXPECT_EQ(got.id, ids.at(0));
  EXPECT_EQ(got.body, R"({"order":42,"note":"héllo"})");
  const auto now_s = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(std::stoll(got.timestamp), now_s, 60);

  // Independently of the broker's code: the key is the base64-decoded part of the secret, the
  // content "<id>.<timestamp>.<body>", HMAC-SHA256 by the openssl binary.
  const auto dir = broker_.dir();
  {
    std::ofstream(dir / "content.txt", std::ios::binary) << got.id << '.' << got.timestamp << '.' << got.body;
    std::ofstream(dir / "secret.b64") << w.secret.substr(6) << '\n';
  }
  const std::string key_hex =
      shell_stdout("openssl base64 -d -A -in " + (dir / "secret.b64").string() + " | od -An -tx1 -v | tr -d ' \\n'");
  ASSERT_EQ(key_hex.size(), 48u) << key_hex;
  const std::string mac = shell_stdout("openssl dgst -sha256 -mac HMAC -macopt hexkey:" + key_hex + " -binary " +
                                (dir / "content.txt").string() + " | openssl base64 -A");
  ASSERT_FALSE(mac.empty());
  EXPECT_EQ(got.signature, "v1," + mac);

  // A rotated secret: both sign during the grace period, the new one first.
  auto rot = txmq({"--json", "webhook", "rotate-secret", w.id});
  ASSERT_EQ(rot.status, 0) << rot.err;
  const std::string new_secret(rot.objects().at(0).at("secret").as_string());
  EXPECT_NE(new_secret, w.secret);
  produce("signed", {"second"});
  ASSERT_TRUE(rx.wait_for(2, std::chrono::seconds(10)));
  const auto second = rx.requests().at(1);
  const auto space = second.signature.find(' ');
  ASSERT_NE(space, std::string::npos) << second.signature;
  {
    std::ofstream(dir / "content.txt", std::ios::binary) << second.id << '.' << second.timestamp << '.' << second.body;
  }
  const std::string old_mac = shell_stdout("openssl dgst -sha256 -mac HMAC -macopt hexkey:" + key_hex + " -binary " +
                                    (dir / "content.txt").string() + " | openssl base64 -A");
  EXPECT_EQ(second.signature.substr(space + 1), "v1," + old_mac);

  // Replay sends both messages once more, outside the schedule, and logs it.
  auto replay = txmq({"--json", "webhook", "replay", w.id, "--since", "1h"});
  ASSERT_EQ(replay.status, 0) << replay;
  EXPECT_EQ(replay.objects().at(0).at("queued").as_int64(), 2);
  ASSERT_TRUE(rx.wait_for(4, std::chrono::seconds(10)));
  EXPECT_EQ(rx.requests().at(2).id, ids.at(0));
  auto log = attempts(w.id, 4);
  ASSERT_EQ(log.size(), 4u);
  EXPECT_TRUE(log[2].at("replay").as_bool());
  EXPECT_TRUE(log[3].at("replay").as_bool());
}

TEST_F(webhook_test, a_hanging_endpoint_does_not_delay_another_subscription) {
  receiver slow([](const seen&, std::size_t) { return reply{200, {}, true}; });
  receiver fast([](const seen&, std::size_t) { return reply{}; });
  // The slow endpoint's timeout is far beyond the waits below, so no retry of it can be counted,
  // and the waits leave room for a loaded machine.
  create("shared", slow.url(), {"--timeout", "15s", "--concurrency", "2"});
  // The topic exists now; the second subscription only needs the webhook.
  auto second = txmq({"--json", "webhook", "create", "shared", "--url", fast.url()});
  ASSERT_EQ(second.status, 0) << second;
  produce("shared", {"1", "2", "3", "4", "5"});
  ASSERT_TRUE(fast.wait_for(5, std::chrono::seconds(6))) << "the fast endpoint waited for the slow one";
  ASSERT_TRUE(slow.wait_for(2, std::chrono::seconds(6)));
  EXPECT_FALSE(slow.wait_for(3, milliseconds(300))) << "more than concurrency 2 requests in flight";
}

TEST_F(webhook_test, failing_receiver_gets_the_message_on_schedule_and_every_try_is_logged) {
  receiver rx([](const seen&, std::size_t i) { return reply{i < 3 ? 500u : 200u, {}, false}; });
  auto w = create("sched", rx.url(), {"--schedule", "300ms,600ms,900ms"});
  auto ids = produce("sched", {"pay-1"});
  ASSERT_TRUE(rx.wait_for(4, std::chrono::seconds(10)));
  const auto reqs = rx.requests();
  const double steps[] = {0.3, 0.6, 0.9};
  for (int i = 0; i < 3; ++i) {
    const double gap = seconds_between(reqs[i].at, reqs[i + 1].at);
    EXPECT_GE(gap, steps[i] - 0.03) << "attempt " << i + 2;
    EXPECT_LE(gap, steps[i] + 1.0) << "attempt " << i + 2;  // not wildly late, even on a loaded machine
    EXPECT_EQ(reqs[i + 1].attempt, std::to_string(i + 2));
    EXPECT_EQ(reqs[i + 1].id, ids.at(0));
  }
  auto log = attempts(w.id, 4);
  ASSERT_EQ(log.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(log[i].at("attempt").as_int64(), static_cast<std::int64_t>(i + 1));
    EXPECT_EQ(log[i].at("status").as_int64(), i < 3 ? 500 : 200);
    EXPECT_EQ(std::string(log[i].at("outcome").as_string()), i < 3 ? "failed" : "delivered");
    EXPECT_EQ(std::string(log[i].at("message").as_string()), ids.at(0));
  }
  EXPECT_FALSE(rx.wait_for(5, milliseconds(1500))) << "a delivered message was sent again";
}

TEST_F(webhook_test, gone_disables_the_subscription) {
  receiver rx([](const seen&, std::size_t) { return reply{410, {}, false}; });
  auto w = create("gone", rx.url(), {"--schedule", "100ms"});
  produce("gone", {"a"});
  ASSERT_TRUE(rx.wait_for(1, std::chrono::seconds(10)));
  auto log = attempts(w.id, 1);
  EXPECT_EQ(std::string(log.at(0).at("outcome").as_string()), "gone");
  auto list = txmq({"--json", "webhook", "list"});
  ASSERT_EQ(list.objects().size(), 1u);
  EXPECT_EQ(std::string(list.objects()[0].at("state").as_string()), "disabled");
  auto table = txmq({"webhook", "list"});
  ASSERT_EQ(table.rows().size(), 1u) << table;
  EXPECT_EQ(fields(table.rows()[0]).at(3), "disabled") << table;
  produce("gone", {"b"});
  EXPECT_FALSE(rx.wait_for(2, milliseconds(1000))) << "a disabled subscription was still called";
}

TEST_F(webhook_test, retry_after_is_honoured) {
  receiver rx([](const seen&, std::size_t i) {
    if (i == 0) return reply{429, {{"Retry-After", "1"}}, false};
    return reply{};
  });
  auto w = create("throttle", rx.url(), {"--schedule", "50ms,50ms"});
  produce("throttle", {"x"});
  ASSERT_TRUE(rx.wait_for(2, std::chrono::seconds(10)));
  const auto reqs = rx.requests();
  const double gap = seconds_between(reqs[0].at, reqs[1].at);
  EXPECT_GE(gap, 0.97);  // the header, not the 50 ms schedule
  EXPECT_LE(gap, 2.0);
  auto log = attempts(w.id, 2);
  EXPECT_EQ(std::string(log.at(0).at("outcome").as_string()), "throttled");
  EXPECT_EQ(log.at(0).at("status").as_int64(), 429);
  EXPECT_EQ(std::string(log.at(1).at("outcome").as_string()), "delivered");
}

TEST_F(webhook_test, hanging_receiver_times_out) {
  receiver rx([](const seen&, std::size_t i) { return reply{200, {}, i == 0}; });
  auto w = create("hang", rx.url(), {"--schedule", "100ms", "--timeout", "400ms"});
  produce("hang", {"slow"});
  ASSERT_TRUE(rx.wait_for(2, std::chrono::seconds(10)));
  const auto reqs = rx.requests();
  EXPECT_GE(seconds_between(reqs[0].at, reqs[1].at), 0.45);
  auto log = attempts(w.id, 2);
  EXPECT_EQ(std::string(log.at(0).at("outcome").as_string()), "timed_out");
  EXPECT_EQ(log.at(0).at("status").as_int64(), 0);
  EXPECT_GE(log.at(0).at("latency_ms").as_int64(), 390);
  EXPECT_EQ(std::string(log.at(1).at("outcome").as_string()), "delivered");
}

TEST_F(webhook_test, exhausted_after_last_attempt_and_reconciliation_returns_it) {
  receiver rx([](const seen&, std::size_t) { return reply{500, {}, false}; });
  auto w = create("exhaust", rx.url(), {"--schedule", "100ms,100ms"});
  auto ids = produce("exhaust", {R"({"n":1})"});
  auto log = attempts(w.id, 3);
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(std::string(log[2].at("outcome").as_string()), "exhausted");
  EXPECT_FALSE(rx.wait_for(4, milliseconds(600))) << "an exhausted message was tried again";

  auto [status, body] = http_get(broker_.http_port(), "/v1/messages/" + ids[0], w.token);
  ASSERT_EQ(status, 200u) << body;
  auto m = json::parse(body).as_object();
  EXPECT_EQ(std::string(m.at("status").as_string()), "exhausted");
  EXPECT_EQ(m.at("attempts").as_int64(), 3);
  EXPECT_EQ(std::string(m.at("body").as_string()), R"({"n":1})");
  EXPECT_EQ(m.at("attempt_log").as_array().size(), 3u);

  std::tie(status, body) = http_get(broker_.http_port(), "/v1/topics/exhaust/messages?limit=10", w.token);
  ASSERT_EQ(status, 200u) << body;
  auto page = json::parse(body).as_object();
  ASSERT_EQ(page.at("messages").as_array().size(), 1u);
  EXPECT_EQ(std::string(page.at("messages").as_array()[0].at("status").as_string()), "exhausted");
  // Nothing after the last one.
  std::tie(status, body) = http_get(broker_.http_port(), "/v1/topics/exhaust/messages?after=" + ids[0], w.token);
  ASSERT_EQ(status, 200u) << body;
  EXPECT_TRUE(json::parse(body).as_object().at("messages").as_array().empty()) << body;

  EXPECT_EQ(http_get(broker_.http_port(), "/v1/messages/" + ids[0], "").first, 401u);
  EXPECT_EQ(http_get(broker_.http_port(), "/v1/messages/" + ids[0], "whtok_wrong").first, 401u);
  EXPECT_EQ(http_get(broker_.http_port(), "/v1/topics/other/messages", w.token).first, 403u);
  EXPECT_EQ(http_get(broker_.http_port(), "/v1/messages/not-an-id", w.token).first, 400u);

  // Metrics: attempts by outcome, exhausted, backlog per subscription.
  std::tie(status, body) = http_get(broker_.http_port(), "/metrics", "");
  ASSERT_EQ(status, 200u);
  EXPECT_NE(body.find("txmq_webhook_exhausted_total 1"), std::string::npos) << body;
  EXPECT_NE(body.find("txmq_webhook_attempts_total{outcome=\"failed\"} 2"), std::string::npos) << body;
  EXPECT_NE(body.find("txmq_webhook_backlog{webhook=\"" + w.id + "\"} 0"), std::string::npos) << body;

  // Unknown subscriptions and bad URLs are typed errors.
  auto del = txmq({"webhook", "delete", "wh_0000000000000000"});
  EXPECT_EQ(del.status, 1);
  EXPECT_NE(del.err.find("UNKNOWN_GROUP"), std::string::npos) << del.err;
  auto bad = txmq({"webhook", "create", "exhaust", "--url", "ftp://x/"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("INVALID_ARGUMENT"), std::string::npos) << bad.err;
}

TEST_F(webhook_test, sigkill_mid_schedule_resumes_without_skipping_or_repeating) {
  // Messages whose body starts with "fail" fail their first attempt; the rest succeed.
  receiver rx([](const seen& s, std::size_t) { return reply{s.body.starts_with("fail") && s.attempt == "1" ? 500u : 200u, {}, false}; });
  auto w = create("crash", rx.url(), {"--schedule", "1500ms,1500ms"});
  auto ids = produce("crash", {"ok-1", "fail-1", "fail-2", "fail-3"});
  ASSERT_EQ(ids.size(), 4u);
  attempts(w.id, 4);  // every first attempt is logged, so its outcome is written too
  const auto killed_at = steady::now();
  broker_.kill();
  broker_.start();
  ASSERT_TRUE(rx.wait_for(7, std::chrono::seconds(15)));
  EXPECT_FALSE(rx.wait_for(8, milliseconds(2000))) << "more attempts than the schedule calls for";
  std::map<std::string, std::vector<seen>> by_id;
  for (auto& r : rx.requests()) by_id[r.id].push_back(r);
  EXPECT_EQ(by_id[ids[0]].size(), 1u) << "a message delivered before the kill was sent again";
  for (int i = 1; i < 4; ++i) {
    const auto& tries = by_id[ids[i]];
    ASSERT_EQ(tries.size(), 2u) << "message " << i;
    EXPECT_EQ(tries[1].attempt, "2");
    // The retry kept its place in the schedule: not before the step, not re-sent at restart.
    EXPECT_GE(seconds_between(tries[0].at, tries[1].at), 1.47);
    EXPECT_GE(seconds_between(killed_at, tries[1].at), 0.0);
  }
}

TEST_F(webhook_test, rate_limit_spaces_the_attempts) {
  receiver rx([](const seen&, std::size_t) { return reply{}; });
  create("rated", rx.url(), {"--rate", "5"});
  produce("rated", {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"});
  ASSERT_TRUE(rx.wait_for(10, std::chrono::seconds(10)));
  // A bucket of 5 goes at once, the other 5 at 5 per second.
  const auto reqs = rx.requests();
  EXPECT_GE(seconds_between(reqs.front().at, reqs.back().at), 0.9);
}

TEST_F(webhook_test, https_verifies_the_certificate) {
  // A self-signed certificate for 127.0.0.1, made by the openssl binary.
  const auto dir = broker_.dir();
  const auto cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  shell_stdout("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 "
        "-keyout " + key + " -out " + cert + " 2>/dev/null");
  ASSERT_TRUE(std::filesystem::exists(cert));
  receiver rx([](const seen&, std::size_t) { return reply{}; }, receiver_tls{cert, key});

  // Not trusted by the broker of the fixture: the handshake fails, the attempt is logged.
  auto untrusted = create("tls", rx.url(), {"--schedule", "1h"});
  produce("tls", {"secret-stuff"});
  ASSERT_TRUE(rx.wait_for_failed_handshake(std::chrono::seconds(10)));
  auto log = attempts(untrusted.id, 1);
  EXPECT_EQ(std::string(log.at(0).at("outcome").as_string()), "failed");
  EXPECT_NE(std::string(log.at(0).at("error").as_string()).find("TLS"), std::string::npos) << log.at(0);
  EXPECT_TRUE(rx.requests().empty());
  broker_.stop();

  // A broker that trusts it (webhook_ca_file) delivers.
  broker_process trusting({"--webhook-ca-file", cert, "--webhook-allow-private"});
  trusting.start();
  auto c = test::txmq(trusting, {"topic", "create", "tls2"});
  ASSERT_EQ(c.status, 0) << c;
  auto w = test::txmq(trusting, {"--json", "webhook", "create", "tls2", "--url", rx.url()});
  ASSERT_EQ(w.status, 0) << w;
  auto p = test::txmq(trusting, {"produce", "tls2", "over-tls"});
  ASSERT_EQ(p.status, 0) << p;
  ASSERT_TRUE(rx.wait_for(1, std::chrono::seconds(10)));
  EXPECT_EQ(rx.requests().at(0).body, "over-tls");
}

// A reconciliation page stays within max_frame_bytes of JSON: large messages make it end early,
// and next_after continues after the last one it holds, so paging sees each message once.
TEST(webhook_reconciliation, a_page_of_large_messages_stays_within_max_frame_bytes) {
  broker_process broker({"--max-message-bytes", "64KiB", "--max-frame-bytes", "128KiB", "--webhook-allow-private"});
  broker.start();
  receiver rx([](const seen&, std::size_t) { return reply{200, {}, false}; });
  ASSERT_EQ(test::txmq(broker, {"topic", "create", "big", "--partitions", "2"}).status, 0);
  auto created = test::txmq(broker, {"--json", "webhook", "create", "big", "--url", rx.url()});
  ASSERT_EQ(created.status, 0) << created;
  const std::string token(created.objects().at(0).at("token").as_string());
  std::set<std::string> ids;
  for (int i = 0; i < 12; ++i) {  // one per request: a batch of them would pass the frame limit
    auto produced = test::txmq(broker, {"--json", "produce", "big"}, std::to_string(i) + std::string(30'000, 'x') + "\n");
    ASSERT_EQ(produced.status, 0) << produced.err;
    for (auto& o : produced.objects()) ids.emplace(o.at("id").as_string());
  }
  ASSERT_EQ(ids.size(), 12u);

  std::set<std::string> listed;
  std::string after;
  int pages = 0;
  for (; pages < 20; ++pages) {
    auto [status, body] =
        http_get(broker.http_port(), "/v1/topics/big/messages?limit=5000" + (after.empty() ? "" : "&after=" + after),
                 token);
    ASSERT_EQ(status, 200u) << "after " << after << ": " << body.substr(0, 300);
    EXPECT_LE(body.size(), 128u * 1024);
    auto page = json::parse(body).as_object();
    const auto& messages = page.at("messages").as_array();
    if (messages.empty()) break;
    for (const auto& m : messages) EXPECT_TRUE(listed.emplace(m.at("id").as_string()).second);
    after = std::string(page.at("next_after").as_string());
  }
  EXPECT_EQ(listed, ids);
  EXPECT_GE(pages, 3) << "12 messages of 30 KB in pages of at most 128 KiB";
  // The query's last value ends where the query ends (it was read one byte too far: limit=1
  // came out as 10 and every page was the default 100).
  auto [status, body] = http_get(broker.http_port(), "/v1/topics/big/messages?limit=1", token);
  ASSERT_EQ(status, 200u) << body.substr(0, 300);
  EXPECT_EQ(json::parse(body).as_object().at("messages").as_array().size(), 1u);
  EXPECT_EQ(broker.stop(), 0) << broker.log();
}

}  // namespace
}  // namespace txmq::test
