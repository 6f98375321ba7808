// Consumer-group state across leader failovers (issue 14 item 3, DESIGN §8, docs/cluster.md
// "Consumer groups"): etcd and three txmq-broker processes on free loopback ports, stopped by
// PID. A replicas-3 topic is filled (every produce recorded in the history checker), then a
// group reads it through consumer-lib (which fetches from the partition's leader): it acks
// every message but the poison ones, which it nacks until they are dead letters
// (max_attempts 3). The leader is SIGKILLed while the group reads, several times, and once more
// after it finished. Verdict:
//  - no acknowledged ack is lost: no message is delivered by a poll that began after the
//    group's ack of it was answered OK. The at-least-once window, exactly: a message may come
//    again only if, when the poll that brought it began, it was in flight (delivered, not yet
//    settled), or its ack was sent but not answered OK yet (or answered with an error). A
//    poll began at most 1 s (its 500 ms wait and a margin) before the first fetch() call since
//    the last one that returned deliveries; that bound is the poll's start here;
//  - nothing lost (the history checker: every acknowledged produce was read) and every
//    non-poison message acked;
//  - attempts carry over: a message whose nack of attempt k was answered OK is next delivered
//    with attempt > k, wherever; every poison message ends in the dead-letter queue with
//    3 attempts, and the dead letters are still all there on the new leader after a last kill.
// On the code before group replication this fails: a new leader has no group state, so it
// hands the whole partition out again and has no dead letters.
// Label `cluster`.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "broker_process.h"
#include "cluster_brokers.h"
#include "dead_letters.h"
#include "etcd_process.h"
#include "eventually.h"
#include "history_checker.h"
#include "txmq/client/admin.h"
#include "txmq/client/connection.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/producer.h"

namespace txmq::test {
namespace {
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* k_topic = "jobs";
constexpr const char* k_group = "workers";
constexpr int k_messages = 1500;
constexpr int k_poison_every = 25;  // offsets i with i % 25 == 7: nacked until dead
constexpr std::uint32_t k_max_attempts = 3;

bool poison(const std::string& body) { return body.rfind("poison", 0) == 0; }

// What the group saw and settled, judged at the end (all times are the test's steady clock).
struct group_log {
  std::mutex mu;
  std::map<std::uint64_t, std::string> ids;                 // offset → message id
  std::map<std::uint64_t, steady_clock::time_point> acked;  // ack answered OK
  // Acks sent, whatever the answer: one answered with an error may or may not have been
  // applied (at-least-once), and an applied one is not delivered again.
  std::set<std::uint64_t> settled;
  std::vector<std::string> settle_errors;
  std::map<std::uint64_t, std::uint32_t> nacked;            // highest attempt whose nack was answered OK
  std::map<std::uint64_t, steady_clock::time_point> nacked_at;
  std::map<std::uint64_t, std::vector<std::uint32_t>> attempts;
  std::vector<std::string> lost_acks;        // delivered again after an acknowledged ack
  std::vector<std::string> attempts_reset;   // delivered with attempt <= an acknowledged nack's
  std::size_t deliveries = 0, redeliveries = 0, failed_settles = 0;
  // First seen by this consumer with attempt > 1: taken from the log by a fetch but held back
  // (behind its key, or past the answer's size) when the leader died, so the new leader counts
  // it as delivered once (docs/semantics.md: a possible redelivery).
  std::size_t first_seen_late = 0;
};

class cluster_groups_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
    cluster_ = std::make_unique<cluster_brokers>();
    cluster_->start({"--node-lease-ttl", "3s", "--replica-lag-max", "4s", "--replication-timeout", "10s",
                     "--max-attempts", std::to_string(k_max_attempts), "--retry-schedule", "200ms",
                     "--ack-deadline", "20s"});
  }

  std::string logs() const { return cluster_->logs(); }
  std::string bootstrap() const { return cluster_->bootstrap(); }
  std::optional<partition_view> view() { return cluster_->view(k_topic); }
  bool whole() {
    auto v = view();
    return v && v->leader > 0 && v->isr.size() == 3;
  }
  // The group's dead letters on a broker (its own store), by offset → attempts.
  std::map<std::uint64_t, std::uint32_t> dead_letters(int id) {
    return test::dead_letters(cluster_->broker(id).address(), k_group);
  }

  std::unique_ptr<cluster_brokers> cluster_;  // etcd and brokers 1-3
};

TEST_F(cluster_groups_test, acks_attempts_and_dead_letters_survive_leader_sigkills) {
  // The topic, once all three nodes are in.
  ASSERT_TRUE(eventually([&] {
    auto c = connect_to(cluster_->broker(1).address());
    if (!c) return false;
    v1::Frame f;
    f.mutable_metadata();
    auto r = c->request(std::move(f), milliseconds(2000));
    return r && r.value().metadata_response().nodes_size() == 3;
  }, 20s)) << logs();
  {
    client::admin admin(connect_to(cluster_->broker(1).address()));
    auto r = admin.create_topic({.name = k_topic, .partitions = 1, .replicas = 3});
    ASSERT_TRUE(r) << r.error().to_string();
  }
  ASSERT_TRUE(eventually([&] { return whole(); }, 20s)) << logs();

  // Fill it: every produce recorded, all acknowledged before the group reads.
  history h;
  std::set<std::string> poison_ids;
  {
    producer::producer_options o;
    o.connection.address = bootstrap();
    o.delivery_timeout = 40000ms;
    o.request_timeout = 5000ms;
    o.linger = 1ms;
    producer::producer p(o);
    std::atomic<int> acked{0};
    for (int i = 0; i < k_messages; ++i) {
      producer::outgoing_message m;
      m.topic = k_topic;
      m.key = "k" + std::to_string(i % 16);
      m.body = (i % k_poison_every == 7 ? "poison" : "job") + std::to_string(i);
      m.id = protocol::uuid::make_v7();
      const std::string id(m.id->raw());
      if (poison(m.body)) poison_ids.insert(id);
      h.attempt(id, *m.key, m.body, static_cast<std::uint64_t>(i));
      p.async_send(std::move(m), [&h, &acked, id](client::result<producer::send_result> r) {
        h.resolve(id, r ? attempt_outcome::acknowledged : attempt_outcome::unknown);
        if (r) acked.fetch_add(1);
      });
    }
    ASSERT_TRUE(p.flush(60s)) << logs();
    p.close();
    ASSERT_EQ(acked.load(), k_messages) << logs();
  }

  // The group, through consumer-lib, on a thread; it reads up to `quota` acks, then waits.
  group_log g;
  std::atomic<std::size_t> quota{0};
  std::atomic<bool> stop{false};
  consumer::consumer_options co;
  co.connection.address = bootstrap();
  co.connection.request_timeout = milliseconds(12000);
  co.connection.reconnect_backoff_max = milliseconds(300);
  co.group = k_group;
  co.topics = {k_topic};
  co.metadata_refresh = milliseconds(300);
  consumer::consumer reader(co);
  std::condition_variable more;  // quota raised, or stop
  std::thread worker([&] {
    auto window_start = steady_clock::now();
    bool last_empty = false;
    while (!stop) {
      {
        // At the quota: every fetched message has been settled; wait for more quota.
        std::unique_lock lk(g.mu);
        if (!more.wait_for(lk, 200ms, [&] { return stop.load() || g.settled.size() < quota.load(); })) continue;
        if (stop) break;
      }
      // The poll that brings a delivery began during this call, or during an earlier call that
      // returned nothing (its answer is kept for the next one), and a poll lasts at most its
      // wait (500 ms): 1 s before the first such call bounds when it began.
      const auto call_start = steady_clock::now();
      if (!last_empty) window_start = call_start - 1000ms;
      auto r = reader.fetch(10, 500ms);
      if (!r || r.value().empty()) {
        last_empty = true;
        continue;
      }
      last_empty = false;
      std::vector<consumer::delivery_ref> acks, nacks;
      std::vector<std::uint32_t> ack_attempts, nack_attempts;
      {
        std::lock_guard lk(g.mu);
        for (const auto& d : r.value()) {
          const auto& m = d.message;
          const std::uint64_t o = m.offset();
          ++g.deliveries;
          if (m.attempt() > 1) ++g.redeliveries;
          if (m.attempt() > 1 && !g.attempts.contains(o)) ++g.first_seen_late;
          g.ids[o] = m.id();
          g.attempts[o].push_back(m.attempt());
          h.consumed(m.id(), m.key(), m.body(), m.partition(), o);
          if (auto a = g.acked.find(o); a != g.acked.end() && a->second < window_start) {
            g.lost_acks.push_back("offset " + std::to_string(o) + " attempt " + std::to_string(m.attempt()));
          }
          if (auto n = g.nacked_at.find(o); n != g.nacked_at.end() && n->second < window_start &&
                                            m.attempt() <= g.nacked[o]) {
            g.attempts_reset.push_back("offset " + std::to_string(o) + ": attempt " + std::to_string(m.attempt()) +
                                       " after the nack of attempt " + std::to_string(g.nacked[o]));
          }
          if (poison(m.body())) {
            nacks.push_back(d.ref());
            nack_attempts.push_back(m.attempt());
          } else {
            acks.push_back(d.ref());
            ack_attempts.push_back(m.attempt());
          }
        }
      }
      if (!acks.empty()) {
        auto a = reader.ack(acks);
        const auto at = steady_clock::now();
        std::lock_guard lk(g.mu);
        for (std::size_t i = 0; i < acks.size(); ++i) {
          g.settled.insert(acks[i].offset);
          if (a && i < a.value().size() && a.value()[i]) {
            g.acked.emplace(acks[i].offset, at);
          } else {
            ++g.failed_settles;
            if (g.settle_errors.size() < 5) {
              g.settle_errors.push_back("ack of offset " + std::to_string(acks[i].offset) + ": " +
                                        (!a ? a.error().to_string() : i < a.value().size() ? a.value()[i].error().to_string() : "no answer"));
            }
          }
        }
      }
      if (!nacks.empty()) {
        auto n = reader.nack(nacks, 0ms);
        const auto at = steady_clock::now();
        std::lock_guard lk(g.mu);
        for (std::size_t i = 0; i < nacks.size(); ++i) {
          if (n && i < n.value().size() && n.value()[i]) {
            auto& best = g.nacked[nacks[i].offset];
            if (nack_attempts[i] > best) {
              best = nack_attempts[i];
              g.nacked_at[nacks[i].offset] = at;
            }
          } else {
            ++g.failed_settles;
          }
        }
      }
    }
  });
  struct worker_guard {
    std::atomic<bool>& stop;
    std::thread& t;
    std::condition_variable& more;
    ~worker_guard() {
      stop = true;
      more.notify_all();
      if (t.joinable()) t.join();
    }
  } guard{stop, worker, more};

  const std::size_t good = static_cast<std::size_t>(k_messages - k_messages / k_poison_every);
  const auto acked_count = [&] {
    std::lock_guard lk(g.mu);
    return g.settled.size();
  };
  // 3, or TXMQ_CLUSTER_KILLS (the soak, cluster_groups_soak: 20 rotating kills).
  const int kills = [] {
    const char* v = std::getenv("TXMQ_CLUSTER_KILLS");
    return v ? std::max(1, std::atoi(v)) : 3;
  }();
  std::vector<double> election_ms;
  for (int round = 0; round < kills; ++round) {
    ASSERT_TRUE(eventually([&] { return whole(); }, 30s)) << "round " << round << ": the ISR is not whole\n" << logs();
    // The group reads on; the leader dies while it is in the middle of a stretch.
    const std::size_t target = good * static_cast<std::size_t>(round + 1) / (kills + 1);
    {
      std::lock_guard lk(g.mu);
      quota = target + 60;
    }
    more.notify_all();
    ASSERT_TRUE(eventually([&] { return acked_count() >= target; }, 60s))
        << "round " << round << ": the group does not progress (" << acked_count() << " acked)\n" << logs();
    const auto v = view();
    ASSERT_TRUE(v);
    const int leader = static_cast<int>(v->leader);
    cluster_->broker(leader).kill();
    const auto killed = steady_clock::now();
    ASSERT_TRUE(eventually([&] {
      auto w = view();
      return w && w->leader > 0 && w->leader != leader && w->epoch > v->epoch;
    }, 15s)) << "round " << round << ": no new leader\n" << logs();
    election_ms.push_back(std::chrono::duration<double, std::milli>(steady_clock::now() - killed).count());
    cluster_->broker(leader).start();
  }
  // The rest, then every poison message dead.
  {
    std::lock_guard lk(g.mu);
    quota = good;
  }
  more.notify_all();
  ASSERT_TRUE(eventually([&] { return acked_count() >= good; }, 120s))
      << acked_count() << " of " << good << " acked\n" << [&] {
           std::lock_guard lk(g.mu);
           std::string e;
           for (auto& x : g.settle_errors) e += x + "\n";
           return e;
         }() << logs();
  ASSERT_TRUE(eventually([&] {
    auto v = view();
    return v && v->leader > 0 && dead_letters(static_cast<int>(v->leader)).size() == poison_ids.size();
  }, 30s)) << "dead letters on the leader: " << dead_letters(static_cast<int>(view()->leader)).size() << " of "
           << poison_ids.size() << "\n" << logs();
  stop = true;
  more.notify_all();
  worker.join();

  // One more kill once everything is settled: the new leader still has every dead letter.
  ASSERT_TRUE(eventually([&] { return whole(); }, 30s)) << logs();
  const int last_leader = static_cast<int>(view()->leader);
  cluster_->broker(last_leader).kill();
  int new_leader = 0;
  ASSERT_TRUE(eventually([&] {
    auto w = view();
    if (w && w->leader > 0 && w->leader != last_leader) new_leader = static_cast<int>(w->leader);
    return new_leader != 0;
  }, 15s)) << logs();
  std::map<std::uint64_t, std::uint32_t> dead;
  EXPECT_TRUE(eventually([&] { return (dead = dead_letters(new_leader)).size() == poison_ids.size(); }, 20s))
      << "the new leader holds " << dead.size() << " of " << poison_ids.size() << " dead letters\n" << logs();
  for (auto& [o, attempts] : dead) EXPECT_EQ(attempts, k_max_attempts) << "dead letter at offset " << o;

  const auto verdict = h.check();
  std::cout << verdict.summary() << "\n";
  EXPECT_TRUE(verdict.lost.empty()) << verdict.summary();
  EXPECT_TRUE(verdict.invented.empty()) << verdict.summary();
  EXPECT_TRUE(verdict.duplicated.empty()) << verdict.summary();
  std::lock_guard lk(g.mu);
  auto first = [](const std::vector<std::string>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size() && i < 5; ++i) s += "\n  " + v[i];
    return s;
  };
  EXPECT_TRUE(g.lost_acks.empty()) << g.lost_acks.size() << " acknowledged acks lost (delivered again):"
                                   << first(g.lost_acks);
  EXPECT_TRUE(g.attempts_reset.empty()) << g.attempts_reset.size() << " attempt counts not carried over:"
                                        << first(g.attempts_reset);
  // Every poison message went out exactly max_attempts times outside the window; a delivery
  // past that would be an attempt count the failover forgot.
  for (auto& [o, seen] : g.attempts) {
    for (auto a : seen) EXPECT_LE(a, k_max_attempts + 1) << "offset " << o;
  }
  for (auto& e : g.settle_errors) std::cout << "settle answered with an error: " << e << "\n";
  std::sort(election_ms.begin(), election_ms.end());
  std::cout << "CLUSTER-FIGURES groups: " << k_messages << " messages, " << kills << " leader kills + 1, "
            << g.deliveries << " deliveries, " << g.redeliveries << " with attempt > 1 (poison retries and the "
            << "at-least-once window; " << g.first_seen_late << " of them first seen so), " << g.failed_settles << " settles answered with an error, "
            << g.lost_acks.size() << " acknowledged acks lost, " << dead.size() << " dead letters kept; new leader p50 "
            << election_ms[election_ms.size() / 2] << " ms, max " << election_ms.back() << " ms\n";
}

}  // namespace
}  // namespace txmq::test
