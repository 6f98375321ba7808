// Replication of message partitions (issue 14, DESIGN §8, docs/cluster.md "Replication"): etcd
// and three txmq-broker processes on free loopback ports, stopped by PID; faults by SIGKILL,
// a wiped data directory and SIGSTOP/SIGCONT; every wait bounded. Histories are judged by the
// history checker (support/history_checker.h):
//  - the checker finds lost acknowledged writes in a deliberately broken build
//    (TXMQ_TEST_ACK_BEFORE_REPLICAS=1: the leader acknowledges before its followers fsync);
//  - the leader SIGKILLed during a keyed produce stream, TXMQ_CLUSTER_KILLS times (default 5;
//    20 in the soak variant), replicas 3, min ISR 2: nothing acknowledged lost, nothing
//    invented, per-key order held, a new leader within 10 s and the producer (default request
//    timeout) acknowledging again within 10 s; prints CLUSTER-FIGURES failover_ms;
//  - a follower whose data directory is wiped refills from the leader and rejoins the ISR (its
//    copy read from its store once stopped: a follower's Fetch serves nothing);
//  - the zombie: a leader SIGSTOPped past its lease, a new leader elected and acknowledging,
//    SIGCONT: the write it took meanwhile is not acknowledged, and it truncates it and follows;
//  - a leader that lost the messages its followers took before its own fsync (a machine crash,
//    simulated by TXMQ_TEST_LOSE_TAIL at its restart) leads on under a new epoch, and its
//    followers drop those messages: every node's log is the same afterwards.
// Label `cluster`.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "broker_process.h"
#include "cluster_brokers.h"
#include "etcd_process.h"
#include "eventually.h"
#include "fault_support.h"
#include "history_checker.h"
#include "keyed_stream.h"
#include "store_reader.h"
#include "txmq/client/admin.h"
#include "txmq/client/connection.h"
#include "txmq/producer/producer.h"
#include "txmq/storage/store.h"

namespace txmq::test {
namespace {
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using namespace std::chrono_literals;

// node_lease_ttl of the brokers: 3 s, or TXMQ_CLUSTER_LEASE_TTL (the default 5s to measure
// failover as a default cluster has it).
std::string lease_ttl() {
  const char* v = std::getenv("TXMQ_CLUSTER_LEASE_TTL");
  return v ? v : "3s";
}

class cluster_replication_test : public ::testing::Test {
 protected:
  static constexpr const char* k_topic = "stream";

  void SetUp() override {
    if (!etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
    cluster_ = std::make_unique<cluster_brokers>();
  }
  void TearDown() override {
    ::unsetenv("TXMQ_TEST_ACK_BEFORE_REPLICAS");
    ::unsetenv("TXMQ_CLUSTER_LEASE_TTL");
  }

  void start_brokers(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args{"--node-lease-ttl", lease_ttl(), "--replica-lag-max", "4s",
                                  "--replication-timeout", "10s"};
    args.insert(args.end(), extra.begin(), extra.end());
    cluster_->start(args);
  }
  // SIGKILLs the partition's leader `kills` times during a keyed stream (rotating as the
  // leadership moves) and checks the history: nothing acknowledged lost or invented, order held.
  void leader_kills(int kills, const std::vector<std::string>& broker_args = {});

  std::string logs() const { return cluster_->logs(); }
  std::string bootstrap() const { return cluster_->bootstrap(); }
  std::optional<partition_view> view(std::int32_t partition = 0) { return cluster_->view(k_topic, partition); }

  // Creates the topic (1 partition, 3 replicas) and waits until its leader takes writes.
  void create_topic() {
    std::string why;
    ASSERT_TRUE(cluster_->create_topic(k_topic, 1, 3, why)) << why;
  }

  // Starts the brokers and the topic; its partition's view (leader, epoch), nullopt on failure.
  std::optional<partition_view> started() {
    start_brokers();
    create_topic();
    return HasFatalFailure() ? std::nullopt : view();
  }

  std::uint64_t end_offset(int id) { return cluster_->end_offset(id, k_topic); }
  void consume_all(int id, history& h, const std::string& group) {
    auto c = connect_to(cluster_->broker(id).address());
    ASSERT_TRUE(c);
    const std::uint64_t end = end_offset(id);
    std::set<std::uint64_t> seen;
    ASSERT_TRUE(eventually([&] {
      // Fetch after fetch while messages come (one per key per fetch: a key's next message
      // goes out once the previous is acked), then look again after a pause.
      for (int i = 0; i < 1000; ++i) {
        v1::Frame f;
        auto* fetch = f.mutable_fetch();
        fetch->set_group(group);
        fetch->add_topics(k_topic);
        fetch->set_max_messages(2000);
        fetch->set_max_wait_ms(100);
        fetch->set_ack_deadline_ms(600000);
        auto r = c->request(std::move(f), milliseconds(5000));
        if (!r || !r.value().has_fetch_response() || r.value().fetch_response().deliveries_size() == 0) break;
        v1::Frame ack;
        ack.mutable_ack()->set_group(group);
        for (const auto& d : r.value().fetch_response().deliveries()) {
          const auto& m = d.message();
          h.consumed(m.id(), m.key(), m.body(), m.partition(), m.offset());
          seen.insert(m.offset());
          auto* ref = ack.mutable_ack()->add_refs();
          ref->set_topic(m.topic());
          ref->set_partition(m.partition());
          ref->set_offset(m.offset());
        }
        (void)c->request(std::move(ack), milliseconds(5000));
      }
      return seen.size() >= end;
    }, 60s)) << "read " << seen.size() << " of " << end << " from broker " << id << "\n" << logs();
  }

  // A follower's own copy, read from its store once it is stopped (tests/support/store_reader.h).
  void read_stopped_log(int id, history& h) {
    ASSERT_FALSE(cluster_->broker(id).running());
    const auto why = test::read_stopped_log(cluster_->broker(id).data_dir(), k_topic, 0, h);
    ASSERT_TRUE(why.empty()) << why;
  }

  // A one-message Produce of key "k", recorded in `h` as the attempt `seq` of that key.
  static v1::Frame one_write(history& h, const std::string& body, std::uint64_t seq,
                             std::string& id) {
    v1::Frame f;
    f.mutable_produce()->set_topic(k_topic);
    auto* m = f.mutable_produce()->add_messages();
    id = std::string(protocol::uuid::make_v7().raw());
    m->set_id(id);
    m->set_key("k");
    m->set_body(body);
    h.attempt(id, "k", body, seq);
    return f;
  }

  std::unique_ptr<cluster_brokers> cluster_;  // etcd and brokers 1-3
};

int kills_wanted() {
  const char* v = std::getenv("TXMQ_CLUSTER_KILLS");
  return v ? std::max(1, std::atoi(v)) : 5;
}

TEST_F(cluster_replication_test, the_checker_finds_lost_acknowledged_writes_in_a_build_that_acks_before_followers_fsync) {
  ::setenv("TXMQ_TEST_ACK_BEFORE_REPLICAS", "1", 1);
  const auto before = started();
  ASSERT_TRUE(before);
  history h;
  const int leader = static_cast<int>(before->leader);
  auto lc = connect_to(cluster_->broker(leader).address());
  ASSERT_TRUE(lc);
  // Replication runs in this build too: 20 writes reach every node.
  for (int i = 0; i < 20; ++i) {
    std::string id;
    const auto f = one_write(h, "before" + std::to_string(i), static_cast<std::uint64_t>(i), id);
    // Retried (same id) while the new leader records its epoch (NOT_LEADER until then).
    ASSERT_TRUE(eventually([&] {
      auto r = lc->request(v1::Frame(f), milliseconds(5000));
      return r && r.value().has_produce_response();
    }, 20s)) << logs();
    h.resolve(id, attempt_outcome::acknowledged);
  }
  for (int id = 1; id <= 3; ++id) {
    ASSERT_TRUE(eventually([&] { return end_offset(id) == 20; }, 20s)) << "broker " << id << " has not replicated\n"
                                                                          << logs();
  }
  // The followers are paused (for well under the lease TTL: they stay in the ISR), the broken
  // leader acknowledges 50 writes on its own fsync, then dies with its disk.
  for (auto& [id, b] : cluster_->all()) {
    if (id != leader) ::kill(b->pid(), SIGSTOP);
  }
  for (auto& [id, b] : cluster_->all()) {
    if (id != leader) {
      ASSERT_TRUE(wait_stopped(b->pid())) << "broker " << id << " did not stop";  // kill() returns first
    }
  }
  // At most ~1 s of writes: a slow disk must not stretch the pause past the lease, which would
  // shrink the ISR to the leader and leave nobody to take over once its disk is gone.
  int acked = 0;
  const auto writes_end = std::chrono::steady_clock::now() + 1s;
  for (int i = 0; i < 50 && std::chrono::steady_clock::now() < writes_end; ++i) {
    std::string id;
    auto r = lc->request(one_write(h, "b" + std::to_string(i), static_cast<std::uint64_t>(100 + i), id),
                         milliseconds(500));
    if (r && r.value().has_produce_response()) {
      h.resolve(id, attempt_outcome::acknowledged);
      ++acked;
    }
  }
  cluster_->broker(leader).kill();
  std::filesystem::remove_all(cluster_->broker(leader).data_dir());
  for (auto& [id, b] : cluster_->all()) {
    if (id != leader) ::kill(b->pid(), SIGCONT);
  }
  EXPECT_GT(acked, 0) << "the broken build acknowledged nothing: the fault was not injected\n" << logs();
  int new_leader = 0;
  ASSERT_TRUE(eventually([&] {
    auto v = view();
    if (v && v->leader > 0 && v->leader != leader) new_leader = static_cast<int>(v->leader);
    return new_leader != 0;
  }, 20s)) << logs();
  consume_all(new_leader, h, "check");
  const auto v = h.check();
  std::cout << "broken build: " << v.summary() << "\n";
  EXPECT_FALSE(v.lost.empty()) << "the checker found no lost acknowledged write in a build that loses them\n"
                               << v.summary();
}

TEST_F(cluster_replication_test, leader_sigkilled_during_a_keyed_stream_loses_and_invents_nothing) {
  leader_kills(kills_wanted());
}

// The pipelined follower (replica_fetch_pipeline > 1: it fetches while its appends are fsynced
// and reports them in a later fetch) under the same kills: it must not report what is not fsynced.
TEST_F(cluster_replication_test, pipelined_followers_lose_and_invent_nothing_across_leader_kills) {
  leader_kills(3, {"--replica-fetch-pipeline", "4"});
}

void cluster_replication_test::leader_kills(int kills, const std::vector<std::string>& broker_args) {
  start_brokers(broker_args);
  create_topic();
  history h;
  keyed_stream s(bootstrap(), k_topic, h, 300ms);
  std::vector<double> failover_ms;
  std::vector<double> election_ms;
  for (int round = 0; round < kills; ++round) {
    // Every node up and in the ISR, and writes flowing, before each kill.
    ASSERT_TRUE(eventually([&] {
      auto v = view();
      return v && v->leader > 0 && v->isr.size() == 3;
    }, 30s)) << "round " << round << ": the ISR did not become whole again\n" << logs();
    const auto acks_before = s.acks();
    ASSERT_TRUE(eventually([&] { return s.acks() >= acks_before + 200; }, 30s))
        << "round " << round << ": writes do not flow\n" << logs();
    const auto v = view();
    ASSERT_TRUE(v);
    const int leader = static_cast<int>(v->leader);
    cluster_->broker(leader).kill();
    const auto killed = steady_clock::now();
    const auto last_before = s.last_ack();
    bool elected = eventually([&] {
      auto w = view();
      return w && w->leader > 0 && w->leader != leader && w->epoch > v->epoch;
    }, 15s);
    election_ms.push_back(std::chrono::duration<double, std::milli>(steady_clock::now() - killed).count());
    ASSERT_TRUE(elected) << "round " << round << ": no new leader\n" << logs();
    EXPECT_LT(election_ms.back(), 10'000) << "round " << round;
    std::optional<steady_clock::time_point> first_after;
    ASSERT_TRUE(eventually([&] { return (first_after = s.first_ack_after(killed)).has_value(); }, 30s))
        << "round " << round << ": no acknowledgement after the kill\n" << logs();
    failover_ms.push_back(std::chrono::duration<double, std::milli>(*first_after - last_before).count());
    // With the producer's default request timeout (10 s): the client moves as soon as the
    // partition has a new leader, not after a timeout on the dead one.
    EXPECT_LT(failover_ms.back(), 10'000) << "round " << round;
    std::cout << "round " << round << ": killed node " << leader << " at " << std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count() % 100000 << ", new leader after " << election_ms.back()
              << " ms, failover " << failover_ms.back() << " ms\n";
    cluster_->broker(leader).start();
  }
  s.stop();
  // Read the final leader's log once every node caught up.
  ASSERT_TRUE(eventually([&] {
    auto v = view();
    return v && v->leader > 0 && v->isr.size() == 3;
  }, 30s)) << logs();
  const int leader = static_cast<int>(view()->leader);
  consume_all(leader, h, "check");
  const auto verdict = h.check();
  std::cout << verdict.summary() << "\n";
  EXPECT_TRUE(verdict.lost.empty()) << verdict.summary();
  EXPECT_TRUE(verdict.invented.empty()) << verdict.summary();
  EXPECT_TRUE(verdict.duplicated.empty()) << verdict.summary();
  EXPECT_TRUE(verdict.order.empty()) << verdict.summary();
  EXPECT_GT(verdict.acknowledged, 200u * static_cast<unsigned>(kills));
  // Every replica holds the same log.
  const auto end = end_offset(leader);
  for (int id = 1; id <= 3; ++id) {
    EXPECT_TRUE(eventually([&] { return end_offset(id) == end; }, 20s)) << "broker " << id;
  }
  std::sort(failover_ms.begin(), failover_ms.end());
  std::sort(election_ms.begin(), election_ms.end());
  std::cout << "CLUSTER-FIGURES failover_ms p50=" << failover_ms[failover_ms.size() / 2]
            << " max=" << failover_ms.back() << " kills=" << kills << "\n";
  if (std::getenv("TXMQ_TEST_LOGS")) std::cout << logs();
  std::cout << "CLUSTER-FIGURES new_leader_ms p50=" << election_ms[election_ms.size() / 2]
            << " max=" << election_ms.back() << "\n";
}

TEST_F(cluster_replication_test, a_wiped_follower_refills_from_the_leader_and_rejoins_the_isr) {
  start_brokers();
  create_topic();
  history h;
  {
    keyed_stream s(bootstrap(), k_topic, h, 300ms);
    ASSERT_TRUE(eventually([&] { return s.acks() >= 3000; }, 60s)) << logs();
    s.stop();
  }
  const auto v = view();
  ASSERT_TRUE(v);
  const int leader = static_cast<int>(v->leader);
  const int follower = leader % 3 + 1;
  cluster_->broker(follower).kill();
  std::filesystem::remove_all(cluster_->broker(follower).data_dir());
  ASSERT_TRUE(eventually([&] {
    auto w = view();
    return w && w->isr.size() == 2;
  }, 20s)) << "the dead follower did not leave the ISR\n" << logs();
  cluster_->broker(follower).start();
  const auto end = end_offset(leader);
  EXPECT_GE(end, 3000u);
  ASSERT_TRUE(eventually([&] {
    auto w = view();
    return w && w->isr.size() == 3 && end_offset(follower) == end;
  }, 30s)) << "the wiped follower did not refill and rejoin\n" << logs();
  ASSERT_EQ(cluster_->broker(follower).stop(), 0);
  read_stopped_log(follower, h);
  const auto verdict = h.check();
  std::cout << "refilled follower: " << verdict.summary() << "\n";
  EXPECT_TRUE(verdict.ok()) << verdict.summary();
}

TEST_F(cluster_replication_test, a_zombie_leaders_late_write_is_not_acknowledged_and_it_truncates_and_follows) {
  start_brokers();
  create_topic();
  history h;
  {
    keyed_stream s(bootstrap(), k_topic, h, 300ms);
    ASSERT_TRUE(eventually([&] { return s.acks() >= 500; }, 60s)) << logs();
    s.stop();
  }
  const auto v = view();
  ASSERT_TRUE(v);
  const int zombie = static_cast<int>(v->leader);
  auto zc = connect_to(cluster_->broker(zombie).address());
  ASSERT_TRUE(zc);
  ::kill(cluster_->broker(zombie).pid(), SIGSTOP);
  // kill() returns before a thread running on another CPU has stopped: under load the leader
  // once took, replicated and acknowledged the "late" write before it stopped.
  ASSERT_TRUE(wait_stopped(cluster_->broker(zombie).pid())) << "the leader did not stop";
  // A write sent to the paused leader: it reads it only after SIGCONT, when another leads.
  const auto late_id = protocol::uuid::make_v7();
  std::optional<client::result<v1::Frame>> late;
  std::thread writer([&] {
    v1::Frame f;
    f.mutable_produce()->set_topic(k_topic);
    auto* m = f.mutable_produce()->add_messages();
    m->set_id(std::string(late_id.raw()));
    m->set_key("k0");
    m->set_body("late");
    late = zc->request(std::move(f), milliseconds(60000));  // past the election and the successor's write
  });
  int successor = 0;
  const bool elected = eventually([&] {
    auto w = view();
    if (w && w->leader > 0 && w->leader != zombie && w->epoch > v->epoch) successor = static_cast<int>(w->leader);
    return successor != 0;
  }, 20s);
  // Resume the zombie only once the successor leads with its ISR fetching under the new epoch:
  // a write acknowledged through the successor proves both. Before that, a follower that has
  // not yet read the new state still fetches from the zombie at the old epoch, and the zombie
  // may then acknowledge the late write, which is safe (that follower, the successor among
  // them, holds it before it leads) but is not the case this test is about (it failed so once
  // in CI, the late write kept in every log).
  bool successor_leads = false;
  if (elected) {
    // No ASSERT before SIGCONT and the writer's join: the zombie would stay stopped.
    auto sc = connect_to(cluster_->broker(successor).address());
    std::string id;
    const auto f = one_write(h, "after-election", 0, id);
    successor_leads = sc && eventually([&] {
      auto r = sc->request(v1::Frame(f), milliseconds(5000));
      return r && r.value().has_produce_response();
    }, 30s);
    if (successor_leads) h.resolve(id, attempt_outcome::acknowledged);
  }
  ::kill(cluster_->broker(zombie).pid(), SIGCONT);
  writer.join();
  ASSERT_TRUE(elected) << logs();
  ASSERT_TRUE(successor_leads) << "the successor did not acknowledge a write\n" << logs();
  ASSERT_TRUE(late.has_value());
  EXPECT_FALSE(late->has_value() && late->value().has_produce_response())
      << "the zombie acknowledged a write after another leader was elected\n" << logs();
  if (!late->has_value()) std::cout << "zombie's answer: " << late->error().to_string() << "\n";
  // The zombie follows the new leader: its log becomes the leader's (the late write truncated).
  ASSERT_TRUE(eventually([&] {
    auto w = view();
    return w && w->isr.size() == 3 && end_offset(zombie) == end_offset(successor);
  }, 30s)) << logs();
  h.attempt(std::string(late_id.raw()), "k0", "late", 1u << 30);  // unknown: may be kept or not
  ASSERT_EQ(cluster_->broker(zombie).stop(), 0);
  read_stopped_log(zombie, h);
  EXPECT_EQ(h.times_consumed(std::string(late_id.raw())), 0u) << "the zombie kept its late write";
  const auto verdict = h.check();
  std::cout << "zombie's log after it follows: " << verdict.summary() << "\n";
  EXPECT_TRUE(verdict.ok()) << verdict.summary();
}

// Followers fetch what the leader has written before its own fsync (docs/cluster.md
// "Replication"). A crash of the leader's machine may take such messages from its log while its
// followers hold them fsynced; restarted within its lease it still leads. It must then take a
// new epoch, so that its followers truncate to its shorter log: under the same epoch they would
// keep the lost messages while the leader writes other ones at the same offsets. A SIGKILL does
// not lose them (the kernel keeps the written pages), so the restart drops them by hand
// (TXMQ_TEST_LOSE_TAIL). The test fails with the new epoch left out (lead_tick): the
// followers then lack the writes acknowledged after the restart.
TEST_F(cluster_replication_test, a_leader_restarted_without_the_tail_its_followers_hold_takes_a_new_epoch_and_they_drop_it) {
  ::setenv("TXMQ_CLUSTER_LEASE_TTL", "10s", 1);  // the restart comes well within the lease: it still leads
  const auto before = started();
  ASSERT_TRUE(before);
  history h;
  const int leader = static_cast<int>(before->leader);
  std::uint64_t seq = 0;
  // Sends one write to the leader; `ack`: retried until acknowledged (and recorded so), else
  // sent once and its outcome left unknown.
  auto write = [&](client::connection& c, bool ack) {
    std::string id;
    const auto f = one_write(h, "w" + std::to_string(seq), seq, id);
    ++seq;
    if (!ack) {
      (void)c.request(v1::Frame(f), milliseconds(5000));
      return true;
    }
    const bool acked = eventually([&] {
      auto r = c.request(v1::Frame(f), milliseconds(5000));
      return r && r.value().has_produce_response();
    }, 30s);
    if (acked) h.resolve(id, attempt_outcome::acknowledged);
    return acked;
  };
  {
    auto lc = connect_to(cluster_->broker(leader).address());
    ASSERT_TRUE(lc);
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(write(*lc, true)) << logs();
    // 10 more stand for the leader's unsynced tail: their outcome is unknown to the checker.
    for (int i = 0; i < 10; ++i) write(*lc, false);
  }
  for (int id = 1; id <= 3; ++id) {
    ASSERT_TRUE(eventually([&] { return end_offset(id) == 30; }, 20s)) << "broker " << id << "\n" << logs();
  }
  cluster_->broker(leader).kill();
  ::setenv("TXMQ_TEST_LOSE_TAIL", "10", 1);
  cluster_->broker(leader).start();
  ::unsetenv("TXMQ_TEST_LOSE_TAIL");
  ASSERT_TRUE(eventually([&] { return end_offset(leader) == 20; }, 20s)) << logs();
  {
    auto lc = connect_to(cluster_->broker(leader).address());
    ASSERT_TRUE(lc);
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(write(*lc, true)) << logs();
  }
  for (int id = 1; id <= 3; ++id) {
    ASSERT_TRUE(eventually([&] { return end_offset(id) == 40; }, 20s)) << "broker " << id << "\n" << logs();
  }
  const auto after = view();
  ASSERT_TRUE(after);
  EXPECT_EQ(after->leader, leader) << "the leader lost its leadership: the restart did not come within its lease\n"
                                   << logs();
  EXPECT_GT(after->epoch, before->epoch) << "the restarted leader led on under its old epoch";
  for (int id = 1; id <= 3; ++id) ASSERT_EQ(cluster_->broker(id).stop(), 0);
  for (int id = 1; id <= 3; ++id) {
    history copy(h);
    read_stopped_log(id, copy);
    const auto verdict = copy.check();
    std::cout << "broker " << id << (id == leader ? " (the leader)" : "") << ": " << verdict.summary() << "\n";
    EXPECT_TRUE(verdict.ok()) << "broker " << id << ": " << verdict.summary();
  }
}

}  // namespace
}  // namespace txmq::test
