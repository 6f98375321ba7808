// The link between the clients and the broker cut and restored (issue 13 item 6,
// docs/operations.md "The network between clients and the broker fails"): the broker runs in a
// network namespace made by the test, joined by a veth pair; taking this side's link down
// drops every packet without a reset, as a pulled cable does. During a produce stream, a
// consume stream and a transactional producer (whose checker answers from its local
// decisions), the link goes down for TXMQ_FAULT_CUT (default 6s: longer than the clients'
// 3 s dead_link_timeout, so each client's connection fails and is made again) and comes back.
// Then: every acknowledged message is consumed, none invented; every transaction ends as its
// local transaction did (committed ones published once, rolled-back ones never). Needs root
// (ip netns); the namespace is removed even when the test fails.

#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stop_token>
#include <thread>

#include <gtest/gtest.h>

#include "broker_process.h"
#include "eventually.h"
#include "fault_support.h"
#include "tx_support.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/producer.h"
#include "txmq/producer/transaction.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;

std::chrono::milliseconds cut_length() { return fault_pause(6s, "TXMQ_FAULT_CUT"); }

TEST(link_cut, clients_reconnect_and_nothing_acknowledged_is_lost_nor_decided_against_its_local_outcome) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for ip netns";
  netns_link link;
  if (!link.ok()) GTEST_SKIP() << "cannot make a network namespace: " << link.error();
  const auto cut_for = cut_length();
  broker_process broker({"--insecure", "--ack-deadline", "2s", "--retry-schedule", "200ms", "--max-attempts", "100000",
                         "--tx-timeout", "1s", "--tx-check-schedule", "500ms"});
  broker.set_launch(link.exec_prefix(), link.inside_address());
  broker.start();

  std::mutex mu;
  std::set<std::string> sent, acked, consumed;
  std::size_t send_failures = 0, deliveries = 0;
  std::map<std::string, producer::tx_decision> local;  // txid -> the local transaction's outcome
  std::size_t tx_errors = 0;
  std::atomic<int> connects{0}, losses{0};
  auto client_log = [&](std::string_view text) {
    if (text.starts_with("connected to")) ++connects;
    if (text.find("lost") != std::string_view::npos) ++losses;
  };

  client::connection_options conn;
  conn.address = broker.address();
  conn.request_timeout = 3s;
  conn.connect_timeout = 2s;
  conn.reconnect_backoff_max = 500ms;
  conn.dead_link_timeout = 3s;  // the cut outlasts it: every client notices and reconnects
  conn.log = client_log;

  consumer::consumer_options co;
  co.connection = conn;
  co.group = "cut";
  co.topics = {"cut"};
  co.concurrency = 2;
  co.max_wait = 200ms;
  consumer::consumer c(co);
  std::stop_source stop, stop_consumer;
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
  po.connection = conn;
  po.linger = 1ms;
  po.request_timeout = 3s;
  po.delivery_timeout = 120s;
  producer::producer p(po);
  std::atomic<int> next{0};
  std::thread producer_thread([&] {
    while (!stop.stop_requested()) {
      const std::string body = "m-" + std::to_string(next++);
      {
        std::lock_guard lock(mu);
        sent.insert(body);
      }
      p.async_send({"cut", std::nullopt, {}, body, std::nullopt, std::nullopt}, [&, body](client::result<producer::send_result> r) {
        std::lock_guard lock(mu);
        if (r) acked.insert(body);
        else ++send_failures;
      });
      std::this_thread::sleep_for(2ms);  // the stream's pace, about 500 messages a second
    }
  });

  // Transactions: each message's body is its txid; the local transaction commits 3 in 4.
  auto tx_conn = conn;
  tx_conn.client_id = "cut-tx";
  tx_conn.producer_group = "cut-tx";
  producer::transactional_producer txp({.connection = tx_conn,
                                        .checker =
                                            [&](const producer::tx_check& check) {
                                              std::lock_guard lock(mu);
                                              auto it = local.find(check.txid.to_string());
                                              return it == local.end() ? producer::tx_decision::unknown : it->second;
                                            },
                                        .request_timeout = 3s});
  std::thread tx_thread([&] {
    std::mt19937 rng(13);
    while (!stop.stop_requested()) {
      auto tx = txp.begin();
      const std::string id = tx.id().to_string();
      tx.add({"cut-tx", std::nullopt, {}, id, std::nullopt, std::nullopt});
      if (!tx.prepare()) {
        std::lock_guard lock(mu);
        ++tx_errors;
        // The broker may hold it prepared: the local outcome of a transaction that never ran
        // is rollback, and the checker says so.
        local[id] = producer::tx_decision::rollback;
        continue;
      }
      const auto decision = rng() % 4 == 3 ? producer::tx_decision::rollback : producer::tx_decision::commit;
      {
        std::lock_guard lock(mu);
        local[id] = decision;  // the local commit point
      }
      auto end = decision == producer::tx_decision::commit ? tx.commit().has_value() : tx.rollback().has_value();
      if (!end) {
        std::lock_guard lock(mu);
        ++tx_errors;  // left to the check-back
      }
      std::this_thread::sleep_for(10ms);  // the transactions' pace
    }
  });

  auto count = [&](const std::set<std::string>& s) {
    std::lock_guard lock(mu);
    return s.size();
  };
  ASSERT_TRUE(eventually([&] { return count(consumed) >= 300; }, 30s)) << broker.log();
  const auto acked_before = count(acked);
  ASSERT_TRUE(link.cut());
  std::this_thread::sleep_for(cut_for);  // the fault itself: no packet passes for this long
  ASSERT_TRUE(link.restore());
  const bool resumed = eventually([&] { return count(acked) >= acked_before + 1000; }, 60s);
  stop.request_stop();
  producer_thread.join();
  tx_thread.join();
  EXPECT_TRUE(p.flush(120s));
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

  // Every transaction settled (by its EndTx or the check-back), then what consumers see.
  const auto unresolved = wait_all_resolved(broker.address(), 60s);
  std::map<std::string, int> published;
  for (auto& m : drain_topic(broker.address(), "cut-tx", "verify")) ++published[m.body()];
  txp.close();
  std::size_t committed = 0, missing = 0, against = 0, doubled = 0;
  {
    std::lock_guard lock(mu);
    for (const auto& [id, d] : local) {
      const bool is_published = published.contains(id);
      if (d == producer::tx_decision::commit) {
        ++committed;
        missing += is_published ? 0 : 1;
      } else {
        against += is_published ? 1 : 0;
      }
    }
    for (const auto& [id, n] : published) {
      if (!local.contains(id)) ++against;
      doubled += n > 1 ? 1 : 0;
    }
  }

  std::lock_guard lock(mu);
  const auto counts = count_outcome(sent, acked, consumed);
  print_fault_counts("link_cut", counts.acknowledged, counts.consumed, counts.lost, counts.invented,
                     "cut_ms=" + std::to_string(cut_for.count()) + " deliveries=" + std::to_string(deliveries) +
                         " send_failures=" + std::to_string(send_failures) + " tx_total=" + std::to_string(local.size()) +
                         " tx_committed_locally=" + std::to_string(committed) + " tx_published=" +
                         std::to_string(published.size()) + " tx_missing=" + std::to_string(missing) +
                         " tx_against_local=" + std::to_string(against) + " tx_doubled=" + std::to_string(doubled) +
                         " tx_request_errors=" + std::to_string(tx_errors) + " unresolved=" + std::to_string(unresolved) +
                         " client_connects=" + std::to_string(connects.load()) + " client_losses=" +
                         std::to_string(losses.load()));
  EXPECT_TRUE(resumed) << "the produce stream did not resume after the link came back";
  // Three connections (producer, consumer, transactional producer), each made again.
  EXPECT_GE(connects.load(), 6);
  EXPECT_TRUE(all);
  EXPECT_EQ(counts.lost, 0u);
  EXPECT_EQ(counts.invented, 0u);
  EXPECT_EQ(unresolved, 0u);
  EXPECT_EQ(missing, 0u) << "committed locally, never published";
  EXPECT_EQ(against, 0u) << "published although rolled back locally (or never begun)";
  EXPECT_EQ(doubled, 0u);
  EXPECT_GT(committed, 10u);
  EXPECT_EQ(broker.stop(), 0) << broker.log();
}

}  // namespace
}  // namespace txmq::test
