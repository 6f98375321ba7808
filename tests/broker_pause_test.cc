// The broker frozen (SIGSTOP) during a produce stream and a consume stream, then thawed
// (SIGCONT): the clients wait or reconnect, every acknowledged message is consumed, and no
// message that was never sent appears (docs/operations.md, "The broker is paused").
// The pause is TXMQ_FAULT_PAUSE (default 10s, issue 13): longer than the ack deadline (2s) and
// the client's connect timeout, shorter than its request and delivery timeouts (30s), so both
// kinds of recovery run: requests answered late, and deliveries redelivered after their
// deadline passed while the broker stood still.

#include <signal.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stop_token>
#include <thread>

#include <gtest/gtest.h>

#include "broker_process.h"
#include "eventually.h"
#include "fault_support.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/producer.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;

TEST(broker_pause, sigstop_during_produce_and_consume_loses_and_invents_nothing) {
  const auto pause = fault_pause(10s);
  broker_process broker({"--ack-deadline", "2s", "--retry-schedule", "200ms"});
  broker.start();

  std::mutex mu;
  std::set<std::string> sent, acked, consumed;
  std::size_t deliveries = 0, send_failures = 0;

  consumer::consumer_options co;
  co.connection.address = broker.address();
  co.group = "pause";
  co.topics = {"paused"};
  co.concurrency = 2;
  co.max_wait = 200ms;
  consumer::consumer c(co);
  std::stop_source stop_consumer;
  std::thread consumer_thread([&] {
    auto handler = [&](const consumer::delivery& d) -> consumer::handler_result {
      std::lock_guard lock(mu);
      ++deliveries;
      consumed.insert(d.message.body());
      return outcome::success();
    };
    while (!stop_consumer.stop_requested()) (void)c.run(handler, stop_consumer.get_token());
  });

  producer::producer_options po;
  po.connection.address = broker.address();
  po.linger = 1ms;
  po.max_in_flight_messages = 2000;
  producer::producer p(po);
  std::atomic<bool> producing{true};
  std::atomic<int> next{0};
  std::thread producer_thread([&] {
    while (producing.load()) {
      const std::string body = "m-" + std::to_string(next++);
      {
        std::lock_guard lock(mu);
        sent.insert(body);
      }
      p.async_send({"paused", std::nullopt, {}, body, std::nullopt, std::nullopt},
                   [&, body](client::result<producer::send_result> r) {
                     std::lock_guard lock(mu);
                     if (r) acked.insert(body);
                     else ++send_failures;
                   });
      std::this_thread::sleep_for(500us);  // the stream's pace, about 2,000 messages a second
    }
  });
  auto count = [&](const std::set<std::string>& s) {
    std::lock_guard lock(mu);
    return s.size();
  };

  ASSERT_TRUE(eventually([&] { return count(consumed) >= 500; }, 30s)) << broker.log();
  const auto acked_before = count(acked);
  {
    frozen stopped({broker.pid()});
    std::this_thread::sleep_for(pause);  // the fault itself: the broker stands still this long
  }
  // The streams go on after the thaw.
  EXPECT_TRUE(eventually([&] { return count(acked) >= acked_before + 2000; }, 60s)) << broker.log();
  producing = false;
  producer_thread.join();
  EXPECT_TRUE(p.flush(60s));
  const bool all = eventually(
      [&] {
        std::lock_guard lock(mu);
        for (const auto& b : acked) {
          if (!consumed.contains(b)) return false;
        }
        return true;
      },
      60s);
  stop_consumer.request_stop();
  consumer_thread.join();
  p.close();

  std::lock_guard lock(mu);
  const auto counts = count_outcome(sent, acked, consumed);
  print_fault_counts("broker_sigstop", counts.acknowledged, counts.consumed, counts.lost, counts.invented,
                     "pause_ms=" + std::to_string(pause.count()) + " deliveries=" + std::to_string(deliveries) +
                         " send_failures=" + std::to_string(send_failures));
  EXPECT_TRUE(all);
  EXPECT_EQ(counts.lost, 0u);
  EXPECT_EQ(counts.invented, 0u);
  EXPECT_GT(counts.acknowledged, acked_before);
  EXPECT_EQ(broker.stop(), 0) << broker.log();
}

}  // namespace
}  // namespace txmq::test
