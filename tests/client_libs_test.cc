// The producer and consumer libraries against the real broker binary: batching producer,
// concurrent consumer with per-key order, retries after a failing handler, and a producer
// that keeps its messages through a SIGKILL of the broker.

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <stop_token>
#include <thread>

#include <gtest/gtest.h>

#include "broker_process.h"
#include "raw_client.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/producer.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;

producer::producer_options producer_opts(const broker_process& b) {
  producer::producer_options o;
  o.connection.address = b.address();
  o.connection.client_id = "test-producer";
  return o;
}

consumer::consumer_options consumer_opts(const broker_process& b, std::string group, std::string topic,
                                         std::size_t concurrency) {
  consumer::consumer_options o;
  o.connection.address = b.address();
  o.connection.client_id = "test-consumer";
  o.group = std::move(group);
  o.topics = {std::move(topic)};
  o.concurrency = concurrency;
  o.max_wait = 200ms;
  return o;
}

// Runs the consumer until `done` says so or the deadline passes.
template <class Handler, class Done>
void run_consumer(consumer::consumer& c, Handler handler, Done done, std::chrono::seconds deadline = 60s) {
  std::stop_source stop;
  std::thread runner([&] { (void)c.run(handler, stop.get_token()); });
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (!done() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);  // polling a counter
  stop.request_stop();
  runner.join();
}

TEST(client_libs_test, batched_sends_reach_a_concurrent_consumer_in_key_order) {
  broker_process b;
  b.start();
  constexpr int keys = 8, per_key = 250;
  {
    producer::producer p(producer_opts(b));
    std::vector<std::future<client::result<producer::send_result>>> results;
    for (int i = 0; i < per_key; ++i) {
      for (int k = 0; k < keys; ++k) {
        producer::outgoing_message m;
        m.topic = "orders";
        m.key = "key-" + std::to_string(k);
        m.body = std::to_string(i);
        results.push_back(p.async_send(std::move(m)));
      }
    }
    std::set<std::pair<std::uint32_t, std::uint64_t>> positions;
    for (auto& f : results) {
      auto r = f.get();
      ASSERT_TRUE(r) << r.error().message;
      EXPECT_TRUE(positions.insert({r.value().partition, r.value().offset}).second);
    }
  }
  std::mutex mu;
  std::map<std::string, std::vector<int>> seen;
  std::atomic<int> handled{0};
  consumer::consumer c(consumer_opts(b, "g", "orders", 4));
  run_consumer(
      c,
      [&](const consumer::delivery& d) -> consumer::handler_result {
        {
          std::lock_guard lk(mu);
          seen[d.message.key()].push_back(std::stoi(d.message.body()));
        }
        ++handled;
        return outcome::success();
      },
      [&] { return handled.load() >= keys * per_key; });
  ASSERT_EQ(handled.load(), keys * per_key);
  for (auto& [key, seq] : seen) {
    ASSERT_EQ(seq.size(), static_cast<std::size_t>(per_key)) << key;
    for (int i = 0; i < per_key; ++i) ASSERT_EQ(seq[static_cast<std::size_t>(i)], i) << key;
  }
}

TEST(client_libs_test, a_failing_handler_gets_the_message_again_with_its_attempt) {
  broker_process b({"--retry-schedule", "50ms"});
  b.start();
  {
    producer::producer p(producer_opts(b));
    for (int i = 0; i < 20; ++i) {
      producer::outgoing_message m;
      m.topic = "jobs";
      m.body = "job-" + std::to_string(i);
      ASSERT_TRUE(p.send(std::move(m)));
    }
  }
  std::mutex mu;
  std::map<std::string, std::vector<std::uint32_t>> attempts;
  std::atomic<int> succeeded{0};
  consumer::consumer c(consumer_opts(b, "workers", "jobs", 2));
  run_consumer(
      c,
      [&](const consumer::delivery& d) -> consumer::handler_result {
        std::lock_guard lk(mu);
        attempts[d.message.body()].push_back(d.attempt());
        if (d.attempt() == 1) throw std::runtime_error("first attempt always fails");
        ++succeeded;
        return outcome::success();
      },
      [&] { return succeeded.load() >= 20; });
  ASSERT_EQ(succeeded.load(), 20);
  for (auto& [body, a] : attempts) EXPECT_EQ(a, (std::vector<std::uint32_t>{1, 2})) << body;
}

TEST(client_libs_test, a_producer_keeps_its_messages_through_a_broker_sigkill) {
  broker_process b;
  b.start();
  std::atomic<int> acked{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::set<std::string> ids_acked;
  std::vector<std::string> failures;
  auto opts = producer_opts(b);
  opts.delivery_timeout = 60s;
  producer::producer p(opts);
  std::thread sender([&] {
    std::vector<std::pair<std::string, std::future<client::result<producer::send_result>>>> pending;
    for (int i = 0; i < 3000 && !stop; ++i) {
      producer::outgoing_message m;
      m.topic = "durable";
      m.id = protocol::uuid::make_v7();
      m.body = "n" + std::to_string(i);
      const auto id = m.id->to_string();
      pending.emplace_back(id, p.async_send(std::move(m)));
      if (pending.size() >= 200) {
        for (auto& [pid, f] : pending) {
          auto r = f.get();
          std::lock_guard lk(mu);
          if (r) {
            ids_acked.insert(pid);
            ++acked;
          } else {
            failures.push_back(r.error().message);
          }
        }
        pending.clear();
      }
    }
    for (auto& [pid, f] : pending) {
      auto r = f.get();
      std::lock_guard lk(mu);
      if (r) ids_acked.insert(pid);
      else failures.push_back(r.error().message);
    }
  });
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (acked.load() < 600 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  b.kill();
  b.start();
  sender.join();
  EXPECT_TRUE(failures.empty()) << failures.size() << " sends failed, first: " << failures.front();
  EXPECT_EQ(ids_acked.size(), 3000u);

  // Every acknowledged id is stored exactly once (retries were absorbed by the dedupe).
  raw_client rc(b.port());
  rc.hello();
  v1::Frame d;
  d.mutable_describe_topic()->set_name("durable");
  auto info = rc.request(d);
  ASSERT_TRUE(info.has_topic_info()) << info.ShortDebugString();
  std::uint64_t stored = 0;
  for (auto& p : info.topic_info().partition_info()) stored += p.end_offset();
  EXPECT_EQ(stored, 3000u) << "retries after the kill must not store a message twice";
  std::set<std::string> consumed;
  consumer::consumer c(consumer_opts(b, "check", "durable", 1));
  run_consumer(
      c,
      [&](const consumer::delivery& dl) -> consumer::handler_result {
        std::lock_guard lk(mu);
        consumed.insert(dl.id().to_string());
        return outcome::success();
      },
      [&] {
        std::lock_guard lk(mu);
        return consumed.size() >= ids_acked.size();
      });
  for (auto& id : ids_acked) EXPECT_TRUE(consumed.count(id)) << "lost " << id;
}

}  // namespace
}  // namespace txmq::test
