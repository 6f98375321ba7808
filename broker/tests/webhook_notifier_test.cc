// webhook_notifier's attempts and their outcomes in the attempt log, on an in-memory store,
// against an HTTP receiver that this test runs on the same io_context (loopback, port 0) and
// that answers from a script: 2xx delivers, 410 disables, 429/503 throttle, anything else fails,
// and a failure on the last attempt exhausts the message.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>

#include "handler_test_support.h"

namespace txmq::broker::test {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

// Answers each request with the next scripted status (200 once the script is used up).
class http_receiver {
 public:
  struct reply {
    unsigned status = 200;
    std::string retry_after;
  };

  explicit http_receiver(asio::io_context& io) : acceptor_(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    asio::co_spawn(io, accept(), [](std::exception_ptr e) {
      if (e) ADD_FAILURE() << "http_receiver stopped by an exception";
    });
  }

  [[nodiscard]] std::string url() const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()) + "/hook";
  }
  void stop() {
    boost::system::error_code ec;
    acceptor_.close(ec);
  }

  std::deque<reply> script;
  std::vector<http::request<http::string_body>> received;

 private:
  asio::awaitable<void> accept() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      asio::co_spawn(acceptor_.get_executor(), serve(std::move(socket)), [](std::exception_ptr e) {
        if (e) ADD_FAILURE() << "http_receiver connection stopped by an exception";
      });
    }
  }

  asio::awaitable<void> serve(tcp::socket socket) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> req;
      auto [ec, n] = co_await http::async_read(socket, buffer, req, asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      received.push_back(req);
      reply r;
      if (!script.empty()) {
        r = script.front();
        script.pop_front();
      }
      http::response<http::string_body> res{static_cast<http::status>(r.status), req.version()};
      if (!r.retry_after.empty()) res.set(http::field::retry_after, r.retry_after);
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      auto [wec, wn] = co_await http::async_write(socket, res, asio::as_tuple(asio::use_awaitable));
      if (wec || !res.keep_alive()) co_return;
    }
  }

  tcp::acceptor acceptor_;
};

class webhook_notifier_test : public handler_test {
 protected:
  // The receiver listens on loopback, which the egress guard refuses by default.
  webhook_notifier_test() { settings.webhooks.guard.allow_private = true; }

  void TearDown() override {
    receiver_.stop();
    handler_test::TearDown();
  }

  // Creates a subscription to topic `t` with the given retry schedule; answers its id.
  std::string subscribe(const std::shared_ptr<recording_responder>& c, std::vector<std::uint32_t> schedule_ms) {
    v1::Frame f;
    auto* w = f.mutable_webhook_create()->mutable_webhook();
    w->set_topic("t");
    w->set_url(receiver_.url());
    for (auto ms : schedule_ms) w->add_schedule_ms(ms);
    auto r = request(c, std::move(f));
    EXPECT_TRUE(r.has_webhook()) << r.ShortDebugString();
    return r.webhook().id();
  }

  // The subscription's attempt log, oldest first, read through the WebhookAttempts request.
  std::vector<v1::WebhookAttempt> attempts(const std::shared_ptr<recording_responder>& c, const std::string& id) {
    v1::Frame f;
    f.mutable_webhook_attempts()->set_id(id);
    auto r = request(c, std::move(f));
    EXPECT_TRUE(r.has_webhook_attempts_response()) << r.ShortDebugString();
    return {r.webhook_attempts_response().attempts().begin(), r.webhook_attempts_response().attempts().end()};
  }

  // Runs until the log holds `n` attempts; answers them.
  std::vector<v1::WebhookAttempt> wait_for_attempts(const std::shared_ptr<recording_responder>& c,
                                                    const std::string& id, std::size_t n) {
    std::vector<v1::WebhookAttempt> log;
    const bool held = run_until([&] {
      log = attempts(c, id);
      return log.size() >= n;
    });
    EXPECT_TRUE(held) << "the log has " << log.size() << " attempts, not " << n;
    return log;
  }

  std::vector<v1::WebhookOutcome> outcomes(const std::vector<v1::WebhookAttempt>& log) {
    std::vector<v1::WebhookOutcome> out;
    for (auto& a : log) out.push_back(a.outcome());
    return out;
  }

  http_receiver receiver_{io_};
};

TEST_F(webhook_notifier_test, a_2xx_answer_delivers_the_message_once) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  const auto id = subscribe(c, {1});
  auto m = message("{\"n\":1}");
  ASSERT_TRUE(request(c, produce_frame("t", {m})).has_produce_response());

  auto log = wait_for_attempts(c, id, 1);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].outcome(), v1::WEBHOOK_DELIVERED);
  EXPECT_EQ(log[0].status(), 200u);
  EXPECT_EQ(log[0].attempt(), 1u);
  EXPECT_EQ(log[0].message_id(), m.id());
  ASSERT_EQ(receiver_.received.size(), 1u);
  EXPECT_EQ(receiver_.received[0].body(), "{\"n\":1}");
  EXPECT_EQ(receiver_.received[0]["webhook-id"], protocol::uuid::from_bytes(m.id()).value().to_string());
  EXPECT_TRUE(receiver_.received[0]["webhook-signature"].starts_with("v1,"));
}

TEST_F(webhook_notifier_test, failures_are_retried_on_the_schedule_and_the_last_one_exhausts_the_message) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  receiver_.script = {{500}, {500}};
  const auto id = subscribe(c, {1});  // two attempts
  ASSERT_TRUE(request(c, produce_frame("t", {message("x")})).has_produce_response());

  auto log = wait_for_attempts(c, id, 2);
  EXPECT_EQ(outcomes(log), (std::vector<v1::WebhookOutcome>{v1::WEBHOOK_FAILED, v1::WEBHOOK_EXHAUSTED}));
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].attempt(), 1u);
  EXPECT_EQ(log[1].attempt(), 2u);
  EXPECT_EQ(log[1].status(), 500u);
  // Exhausted: in the subscription's dead letters, never attempted again.
  ASSERT_TRUE(run_until([&] {
    auto d = store_->dead_letters("webhook:" + id, 10);
    return d && d.value().size() == 1;
  }));
  EXPECT_EQ(receiver_.received.size(), 2u);
}

TEST_F(webhook_notifier_test, a_throttled_attempt_is_retried_and_then_delivered) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  receiver_.script = {{503, "0"}};
  const auto id = subscribe(c, {1, 1});
  ASSERT_TRUE(request(c, produce_frame("t", {message("x")})).has_produce_response());

  auto log = wait_for_attempts(c, id, 2);
  EXPECT_EQ(outcomes(log), (std::vector<v1::WebhookOutcome>{v1::WEBHOOK_THROTTLED, v1::WEBHOOK_DELIVERED}));
}

TEST_F(webhook_notifier_test, gone_disables_the_subscription) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  receiver_.script = {{410}};
  const auto id = subscribe(c, {1, 1});
  ASSERT_TRUE(request(c, produce_frame("t", {message("x")})).has_produce_response());

  auto log = wait_for_attempts(c, id, 1);
  EXPECT_EQ(outcomes(log), (std::vector<v1::WebhookOutcome>{v1::WEBHOOK_GONE}));
  v1::Frame list;
  list.mutable_webhook_list();
  auto listed = request(c, std::move(list));
  ASSERT_EQ(listed.webhook_list_response().webhooks_size(), 1);
  EXPECT_TRUE(listed.webhook_list_response().webhooks(0).disabled());
  // Disabled: the next message gets no attempt.
  ASSERT_TRUE(request(c, produce_frame("t", {message("y")})).has_produce_response());
  bool more = run_until([&] { return receiver_.received.size() > 1; }, 200ms);
  EXPECT_FALSE(more) << "a disabled subscription was attempted";
}

}  // namespace
}  // namespace txmq::broker::test

namespace txmq::broker::test {
namespace {

// txmq_webhook_backlog at scale: 1,000 subscriptions whose endpoint refuses connections (each
// message's first attempt fails and waits an hour for the next), so nothing is settled and
// every subscription's backlog is its topic's messages since it started. Few messages: the
// subscriptions keep attempting them against the refused endpoint while the rest are made, and
// what a scrape costs depends on the subscriptions and partitions, not the messages (3,200 on t
// made this test 48 s and 52 s of CPU, 32 make it 1.6 s). The family is one collector over one
// read of the topics' end offsets, not a callback per subscription that copied the topic per
// partition; the test prints what a scrape costs (a figure, not a check).
class webhook_backlog_metrics_test : public webhook_notifier_test {
 protected:
  webhook_backlog_metrics_test() : metrics_(registry_) { metrics = &metrics_; }
  // The service unregisters its collectors from registry_ when it is destroyed, which the base
  // fixture would do after registry_ is gone.
  ~webhook_backlog_metrics_test() override { svc_.reset(); }

  std::map<std::string, std::uint64_t> scrape() {
    const std::string text = registry_.render();
    std::map<std::string, std::uint64_t> out;
    const std::regex line("\ntxmq_webhook_backlog\\{webhook=\"([^\"]+)\"\\} ([0-9]+)");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator(); ++it) {
      out[(*it)[1].str()] = std::stoull((*it)[2].str());
    }
    return out;
  }

  common::metrics_registry registry_;
  broker_metrics metrics_;
};

TEST_F(webhook_backlog_metrics_test, every_subscriptions_backlog_is_right_with_a_thousand_subscriptions) {
  constexpr int k_subscriptions = 1000;
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 16)).has_topic_info());
  ASSERT_TRUE(request(c, create_topic_frame("u", 4)).has_topic_info());
  const auto produce = [&](const std::string& topic, int n) {
    for (int done = 0; done < n;) {
      std::vector<v1::Message> batch;
      for (int i = 0; i < 500 && done < n; ++i, ++done) batch.push_back(message("m" + std::to_string(done)));
      ASSERT_TRUE(request(c, produce_frame(topic, std::move(batch))).has_produce_response());
    }
  };
  ASSERT_NO_FATAL_FAILURE(produce("t", 32));
  ASSERT_NO_FATAL_FAILURE(produce("u", 8));
  const std::string refused = receiver_.url();
  receiver_.stop();  // connections to it are refused from now on

  // Even subscriptions read t from the earliest message, odd ones u from the next one.
  std::map<std::string, std::uint64_t> expected;
  std::vector<std::string> ids;
  for (int i = 0; i < k_subscriptions; ++i) {
    v1::Frame f;
    auto* w = f.mutable_webhook_create()->mutable_webhook();
    const bool on_t = i % 2 == 0;
    w->set_topic(on_t ? "t" : "u");
    w->set_url(refused);
    w->set_concurrency(1);
    w->add_schedule_ms(3'600'000);
    f.mutable_webhook_create()->set_from_earliest(on_t);
    auto r = request(c, std::move(f));
    ASSERT_TRUE(r.has_webhook()) << r.ShortDebugString();
    ids.push_back(r.webhook().id());
    expected[r.webhook().id()] = on_t ? 32 : 0;
  }
  EXPECT_EQ(scrape(), expected);

  // More messages for u: the backlog of each subscription to u grows by them.
  ASSERT_NO_FATAL_FAILURE(produce("u", 4));
  for (int i = 1; i < k_subscriptions; i += 2) expected[ids[i]] += 4;
  EXPECT_EQ(scrape(), expected);

  // A deleted subscription's series goes with it.
  v1::Frame del;
  del.mutable_webhook_delete()->set_id(ids[0]);
  ASSERT_FALSE(request(c, std::move(del)).has_error());
  expected.erase(ids[0]);
  EXPECT_EQ(scrape(), expected);

  constexpr int k_scrapes = 20;
  std::vector<double> ms;
  for (int i = 0; i < k_scrapes; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto text = registry_.render();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    ASSERT_FALSE(text.empty());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("scrape of %d webhook subscriptions: median %.3f ms, min %.3f ms, max %.3f ms over %d scrapes\n",
              k_subscriptions - 1, ms[ms.size() / 2], ms.front(), ms.back(), k_scrapes);
  RecordProperty("scrape_median_us", static_cast<int>(ms[ms.size() / 2] * 1000));
  // One collector for the family (per-subscription callbacks cost a topic copy per partition).
  EXPECT_TRUE(registry_.remove_collector("txmq_webhook_backlog"));
}

}  // namespace
}  // namespace txmq::broker::test
