// What a broker's Fetch serves in a cluster (issue 14, docs/cluster.md "Consumers"): only the
// partitions it leads, only below the high watermark. etcd and three txmq-broker processes on
// free loopback ports, stopped by PID; faults by SIGKILL and SIGSTOP/SIGCONT; every wait bounded.
//  - a consumer group (consumer-lib) over a replicas-3 topic through all three brokers gets
//    every message once, each from its partition's leader (a follower's copy would be a second
//    first delivery); a fetch naming only topics a node leads nothing of is answered NOT_LEADER;
//    the group's lag is reported by each partition's leader only;
//  - a message above the high watermark is not delivered: both followers of a partition with
//    min ISR 2 SIGSTOPped, writes taken (not acknowledged) by the leader, a fetch from the leader
//    gets none of them; after the leader is SIGKILLed and a follower leads, every message any
//    consumer saw is in the new leader's log (none was truncated away under a consumer).
// Label `cluster`.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "cluster_brokers.h"
#include "eventually.h"
#include "fault_support.h"
#include "txmq/client/admin.h"
#include "history_checker.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/producer.h"

namespace txmq::test {
namespace {
using std::chrono::milliseconds;
using namespace std::chrono_literals;

class cluster_fetch_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
    cluster_ = std::make_unique<cluster_brokers>();
    cluster_->start({"--node-lease-ttl", "3s", "--replica-lag-max", "4s"});
  }
  cluster_brokers& cluster() { return *cluster_; }

  // One Fetch of `group` from broker `id`, every delivery recorded in `h` (and in `seen` as
  // id -> (partition, offset)) and, with `ack`, acked at once (the answer awaited: for a
  // replicated partition it comes once the ISR holds the ack, docs/cluster.md "Consumer
  // groups"). Returns the deliveries, or the error.
  client::result<std::vector<v1::Message>> fetch_once(int id, const std::string& group, const std::string& topic,
                                                      milliseconds wait, history& h, bool ack_them = true) {
    auto c = connect_to(cluster().broker(id).address());
    if (!c) return client::error(client::errc::not_connected, "cannot connect to broker " + std::to_string(id));
    v1::Frame f;
    auto* fetch = f.mutable_fetch();
    fetch->set_group(group);
    fetch->add_topics(topic);
    fetch->set_max_messages(2000);
    fetch->set_max_wait_ms(static_cast<std::uint32_t>(wait.count()));
    fetch->set_ack_deadline_ms(600000);
    auto r = c->request(std::move(f), wait + 5000ms);
    if (!r) return r.error();
    if (!r.value().has_fetch_response()) {
      return client::error(client::errc::unexpected_response, r.value().DebugString());
    }
    std::vector<v1::Message> out;
    v1::Frame ack;
    ack.mutable_ack()->set_group(group);
    for (const auto& d : r.value().fetch_response().deliveries()) {
      const auto& m = d.message();
      h.consumed(m.id(), m.key(), m.body(), m.partition(), m.offset());
      seen_[m.id()] = {m.partition(), m.offset()};
      auto* ref = ack.mutable_ack()->add_refs();
      ref->set_topic(m.topic());
      ref->set_partition(m.partition());
      ref->set_offset(m.offset());
      out.push_back(m);
    }
    if (ack_them && ack.ack().refs_size() > 0) (void)c->request(std::move(ack), 5000ms);
    return out;
  }

  // A Produce of one message with `key` to broker `id` with a fresh id, recorded as an attempt.
  // Returns the id; `acked` says whether it was acknowledged within `timeout`.
  std::string produce_once(int id, const std::string& topic, const std::string& key, const std::string& body,
                           std::uint64_t seq, history& h, milliseconds timeout, bool& acked) {
    auto c = connect_to(cluster().broker(id).address(), timeout);
    const auto mid = protocol::uuid::make_v7();
    const std::string raw(mid.raw());
    h.attempt(raw, key, body, seq);
    acked = false;
    if (!c) return raw;
    v1::Frame f;
    f.mutable_produce()->set_topic(topic);
    auto* m = f.mutable_produce()->add_messages();
    m->set_id(raw);
    m->set_key(key);
    m->set_body(body);
    auto r = c->request(std::move(f), timeout);
    acked = r && r.value().has_produce_response();
    if (acked) h.resolve(raw, attempt_outcome::acknowledged);
    return raw;
  }

  std::unique_ptr<cluster_brokers> cluster_;
  std::map<std::string, std::pair<std::uint32_t, std::uint64_t>> seen_;  // id -> (partition, offset)
};

// What a consumer-lib consumer saw: per id, each delivery's attempt and the node that made it.
struct deliveries {
  std::mutex mutex;
  std::map<std::string, std::vector<std::tuple<std::uint32_t, std::string, std::uint32_t>>> by_id;  // attempt, node, partition
  void add(const consumer::delivery& d) {
    std::lock_guard lock(mutex);
    by_id[d.id().to_string()].emplace_back(d.attempt(), d.node, d.message.partition());
  }
  bool has_all(const std::set<std::string>& ids) {
    std::lock_guard lock(mutex);
    return std::all_of(ids.begin(), ids.end(), [&](const auto& id) { return by_id.contains(id); });
  }
};

TEST_F(cluster_fetch_test, a_group_over_a_replicated_topic_reads_each_message_once_from_its_leader) {
  std::string why;
  ASSERT_TRUE(cluster().create_topic("feed", 3, 3, why)) << why;
  std::map<std::uint32_t, std::string> leader_of;  // partition -> leader's address
  std::set<std::int64_t> leaders;
  for (std::uint32_t p = 0; p < 3; ++p) {
    auto v = cluster().view("feed", static_cast<std::int32_t>(p));
    ASSERT_TRUE(v);
    leader_of[p] = v->leader_address;
    leaders.insert(v->leader);
  }
  // Each node leads one partition and follows the other two: without the limit each would hand
  // out its copies of all three.
  ASSERT_EQ(leaders.size(), 3u) << "leaderships not spread\n" << cluster().logs();

  producer::producer_options po;
  po.connection.address = cluster().bootstrap();
  po.delivery_timeout = 30000ms;
  std::set<std::string> ids;
  {
    producer::producer p(po);
    std::vector<std::future<client::result<producer::send_result>>> acks;
    for (int i = 0; i < 90; ++i) {
      acks.push_back(p.async_send({.topic = "feed", .key = "key-" + std::to_string(i % 9), .body = std::to_string(i)}));
    }
    for (auto& a : acks) {
      auto r = a.get();
      ASSERT_TRUE(r) << r.error() << cluster().logs();
      ids.insert(r.value().id.to_string());
    }
  }
  // Acknowledged = every ISR member fsynced it: each node now holds all 90.
  for (int id = 1; id <= 3; ++id) {
    std::uint64_t total = 0;
    for (std::uint32_t p = 0; p < 3; ++p) total += cluster().end_offset(id, "feed", p);
    EXPECT_EQ(total, 90u) << "broker " << id;
  }

  deliveries got;
  consumer::consumer_options co;
  co.connection.address = cluster().bootstrap();
  co.connection.request_timeout = 5000ms;
  co.group = "readers";
  co.topics = {"feed"};
  co.concurrency = 4;
  co.max_wait = 300ms;
  co.ack_deadline = 60000ms;  // no redelivery in this test: a second delivery is a duplicate
  co.metadata_refresh = 500ms;
  consumer::consumer reader(co);
  std::jthread running([&](std::stop_token stop) {
    auto r = reader.run([&](const consumer::delivery& d) -> consumer::handler_result {
      got.add(d);
      return outcome::success();
    }, stop);
    EXPECT_TRUE(r) << r.error();
  });
  ASSERT_TRUE(eventually([&] { return got.has_all(ids); }, 30s)) << cluster().logs();
  // Every node's group has nothing in flight (all acks applied): no delivery still to come.
  ASSERT_TRUE(eventually([&] {
    for (int id = 1; id <= 3; ++id) {
      client::admin a(connect_to(cluster().broker(id).address()));
      auto g = a.describe_group("readers");
      if (!g) return false;
      for (const auto& p : g.value().partitions()) {
        if (p.in_flight() != 0) return false;
      }
    }
    return true;
  }, 20s)) << cluster().logs();
  running.request_stop();
  running.join();

  std::size_t from_follower = 0, duplicated = 0;
  {
    std::lock_guard lock(got.mutex);
    EXPECT_EQ(got.by_id.size(), 90u);
    for (const auto& [id, ds] : got.by_id) {
      if (ds.size() > 1) ++duplicated;
      for (const auto& [attempt, node, partition] : ds) {
        if (node != leader_of[partition]) ++from_follower;
      }
    }
  }
  EXPECT_EQ(duplicated, 0u) << "messages delivered more than once (follower copies)";
  EXPECT_EQ(from_follower, 0u) << "deliveries made by a node that does not lead the partition";

  // 30 more, not consumed: the group's lag is counted once, by each partition's leader.
  {
    producer::producer p(po);
    for (int i = 0; i < 30; ++i) {
      auto r = p.send({.topic = "feed", .key = "key-" + std::to_string(i % 9), .body = "more"});
      ASSERT_TRUE(r) << r.error();
    }
  }
  std::uint64_t lag = 0;
  for (int id = 1; id <= 3; ++id) {
    client::admin a(connect_to(cluster().broker(id).address()));
    auto g = a.describe_group("readers");
    ASSERT_TRUE(g) << g.error();
    for (const auto& p : g.value().partitions()) lag += p.lag();
  }
  EXPECT_EQ(lag, 30u) << "the sum of the three nodes' lags counts each partition once";

  // A fetch naming a topic of which the node leads nothing: NOT_LEADER, which consumer-lib
  // takes as stale metadata.
  ASSERT_TRUE(cluster().create_topic("solo", 1, 3, why)) << why;
  const auto solo = cluster().view("solo");
  ASSERT_TRUE(solo);
  const int follower = static_cast<int>(solo->leader % 3 + 1);
  history h;
  auto r = fetch_once(follower, "solo-readers", "solo", 0ms, h);
  ASSERT_FALSE(r) << "a follower served a fetch of a topic it leads nothing of";
  EXPECT_TRUE(r.error().is(protocol::errc::not_leader)) << r.error();
}

TEST_F(cluster_fetch_test, a_message_above_the_high_watermark_is_never_delivered) {
  std::string why;
  ASSERT_TRUE(cluster().create_topic("stream", 1, 3, why)) << why;
  const auto before = cluster().view("stream");
  ASSERT_TRUE(before);
  const int leader = static_cast<int>(before->leader);
  history h;
  // Ten acknowledged writes of ten keys (retried while the new leader records its epoch), read
  // by a group.
  for (std::uint64_t i = 0; i < 10; ++i) {
    bool acked = false;
    ASSERT_TRUE(eventually([&] {
      (void)produce_once(leader, "stream", "k" + std::to_string(i), "ok", 0, h, 5000ms, acked);
      return acked;
    }, 20s)) << cluster().logs();
  }
  std::size_t read = 0;
  ASSERT_TRUE(eventually([&] {
    auto r = fetch_once(leader, "g", "stream", 100ms, h);
    if (r) read += r.value().size();
    return read == 10;
  }, 20s)) << read << " of 10\n" << cluster().logs();

  // Both followers paused (well within the lease TTL and replica_lag_max: they stay in the ISR,
  // so |ISR| >= min_insync and nothing new is acknowledged without them). The first write after
  // the pause may still reach a follower (its parked ReplicaFetch is answered into its socket);
  // the second cannot: no follower fetches again while paused.
  std::vector<int> followers;
  for (int id = 1; id <= 3; ++id) {
    if (id != leader) followers.push_back(id);
  }
  for (int id : followers) ::kill(cluster().broker(id).pid(), SIGSTOP);
  for (int id : followers) ASSERT_TRUE(wait_stopped(cluster().broker(id).pid())) << "broker " << id << " did not stop";
  bool acked = true;
  const auto maybe = produce_once(leader, "stream", "m", "maybe", 0, h, 300ms, acked);
  EXPECT_FALSE(acked) << "acknowledged with both followers paused";
  const auto doomed = produce_once(leader, "stream", "d", "doomed", 0, h, 300ms, acked);
  EXPECT_FALSE(acked) << "acknowledged with both followers paused";
  const bool stored = eventually([&] { return cluster().end_offset(leader, "stream") == 12; }, 5s);
  // Not acked: with both followers paused an ack is answered only when the ISR holds it (after
  // the ISR shrinks, replica_lag_max later), and the pause must stay short of that.
  auto above = fetch_once(leader, "g", "stream", 300ms, h, false);
  auto fresh = fetch_once(leader, "fresh", "stream", 300ms, h, false);
  cluster().broker(leader).kill();
  for (int id : followers) ::kill(cluster().broker(id).pid(), SIGCONT);
  ASSERT_TRUE(stored) << "the leader did not store the two writes\n" << cluster().logs();
  ASSERT_TRUE(above) << above.error();
  EXPECT_TRUE(above.value().empty()) << above.value().size() << " message(s) above the high watermark delivered";
  ASSERT_TRUE(fresh) << fresh.error();
  EXPECT_EQ(fresh.value().size(), 10u) << "a new group reads up to the high watermark, not beyond";

  // A follower leads; the old leader returns, truncates and follows.
  int successor = 0;
  ASSERT_TRUE(eventually([&] {
    auto v = cluster().view("stream");
    if (v && v->leader > 0 && v->leader != leader && v->epoch > before->epoch) successor = static_cast<int>(v->leader);
    return successor != 0;
  }, 20s)) << cluster().logs();
  cluster().broker(leader).start();
  ASSERT_TRUE(eventually([&] {
    auto v = cluster().view("stream");
    return v && v->isr.size() == 3 && cluster().end_offset(leader, "stream") == cluster().end_offset(successor, "stream");
  }, 30s)) << cluster().logs();

  // The new leader's whole log, by a group of its own.
  const auto end = cluster().end_offset(successor, "stream");
  auto before_final = seen_;
  seen_.clear();
  history final_log;
  std::size_t n = 0;
  ASSERT_TRUE(eventually([&] {
    auto r = fetch_once(successor, "final", "stream", 100ms, final_log);
    if (r) n += r.value().size();
    return n >= end;
  }, 20s)) << n << " of " << end << "\n" << cluster().logs();
  EXPECT_FALSE(seen_.contains(doomed)) << "the write no follower received survived the failover";
  for (const auto& [id, pos] : before_final) {
    auto it = seen_.find(id);
    EXPECT_TRUE(it != seen_.end() && it->second == pos)
        << "a consumer saw a message (partition " << pos.first << ", offset " << pos.second
        << ") that the failover truncated";
  }
  EXPECT_EQ(h.times_consumed(doomed), 0u);
  std::cout << "the first write after the pause " << (seen_.contains(maybe) ? "reached" : "did not reach")
            << " a follower\n";
  const auto verdict = h.check();
  std::cout << verdict.summary() << "\n";
  EXPECT_TRUE(verdict.ok()) << verdict.summary();
}

}  // namespace
}  // namespace txmq::test
