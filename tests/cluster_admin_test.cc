// The dead-letter queue through a cluster's leaders (issue 14, docs/cluster.md "Dead letters
// and admin reads"): etcd and three txmq-broker processes on free loopback ports, stopped by
// PID. A replicas-3 topic of 3 partitions (leaders spread over the nodes); a group reads it
// through consumer-lib, acking all but the poison messages, which it nacks until they are dead
// letters (max_attempts 2). Then:
//  - a leader of a partition with dead letters is SIGKILLed; `txmq dlq list` pointed at a node
//    that does not lead that partition lists every dead letter of every partition (the CLI asks
//    each partition's leader, client/cluster_admin.h), and `txmq group describe` counts each
//    once;
//  - the node restarted and back in the ISR, `txmq dlq redrive` through a follower's address
//    redrives every dead letter once (the count); the leader of that partition is SIGKILLed
//    again: the new leader lists none, a second redrive redrives none, and the group gets each
//    redriven message again.
// Label `cluster`.

#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "broker_process.h"
#include "cli_runner.h"
#include "cluster_brokers.h"
#include "etcd_process.h"
#include "eventually.h"
#include "txmq/client/admin.h"
#include "txmq/client/cluster_admin.h"
#include "txmq/protocol/message_id.h"
#include "txmq/protocol/partitioner.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/producer.h"

namespace txmq::test {
namespace {
using std::chrono::milliseconds;
using namespace std::chrono_literals;

constexpr const char* k_topic = "jobs";
constexpr const char* k_group = "workers";
constexpr int k_messages = 60;
constexpr int k_partitions = 3;

bool poison(const std::string& body) { return body.rfind("poison", 0) == 0; }

class cluster_admin_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
    cluster_ = std::make_unique<cluster_brokers>();
    cluster_->start({"--node-lease-ttl", "3s", "--replica-lag-max", "4s", "--replication-timeout", "10s",
                     "--max-attempts", "2", "--retry-schedule", "100ms", "--ack-deadline", "20s"});
  }

  std::string logs() const { return cluster_->logs(); }
  // Every partition led by a live node with a whole ISR.
  bool whole() {
    for (int p = 0; p < k_partitions; ++p) {
      auto v = cluster_->view(k_topic, p);
      if (!v || v->leader <= 0 || v->isr.size() != 3) return false;
    }
    return true;
  }
  // Waits until partition p has a leader other than `old`; returns it (0 on timeout).
  int new_leader_of(int p, int old) {
    int out = 0;
    (void)eventually([&] {
      auto v = cluster_->view(k_topic, p);
      if (v && v->leader > 0 && v->leader != old) out = static_cast<int>(v->leader);
      return out != 0;
    }, 20s);
    return out;
  }
  // The ids of `txmq --json dlq list` through `address`, or nullopt when it failed.
  std::optional<std::set<std::string>> cli_dead_ids(int node, std::string* why = nullptr) {
    auto r = txmq(cluster_->broker(node), {"--json", "dlq", "list", k_group, "--limit", "1000"});
    if (r.status != 0) {
      if (why) *why = r.err;
      return std::nullopt;
    }
    std::set<std::string> out;
    for (const auto& o : r.objects()) out.insert(std::string(o.at("id").as_string()));
    return out;
  }

  std::unique_ptr<cluster_brokers> cluster_;
};

TEST_F(cluster_admin_test, dead_letters_are_listed_and_redriven_through_any_node_across_leader_kills) {
  std::string why;
  ASSERT_TRUE(cluster_->create_topic(k_topic, k_partitions, 3, why)) << why;

  // Fill it: keyed messages over the 3 partitions, a quarter of them poison.
  std::set<std::string> poison_ids;      // as the CLI prints them (id_text)
  std::map<std::string, int> partition_of;  // CLI id → partition
  {
    producer::producer_options o;
    o.connection.address = cluster_->bootstrap();
    o.delivery_timeout = 30000ms;
    o.linger = 1ms;
    producer::producer p(o);
    std::atomic<int> acked{0};
    for (int i = 0; i < k_messages; ++i) {
      producer::outgoing_message m;
      m.topic = k_topic;
      m.key = "k" + std::to_string(i % 12);
      m.body = (i % 4 == 1 ? "poison" : "job") + std::to_string(i);
      p.async_send(std::move(m), [&acked](client::result<producer::send_result> r) {
        if (r) acked.fetch_add(1);
      });
    }
    ASSERT_TRUE(p.flush(30s)) << logs();
    p.close();
    ASSERT_EQ(acked.load(), k_messages) << logs();
  }

  // The group: acks the good ones, nacks the poison ones until they are dead (2 attempts).
  consumer::consumer_options co;
  co.connection.address = cluster_->bootstrap();
  co.connection.request_timeout = 10000ms;
  co.group = k_group;
  co.topics = {k_topic};
  co.metadata_refresh = 300ms;
  std::set<std::string> acked_ids;
  std::map<std::string, std::uint32_t> nacked;  // poison message id → attempts nacked
  {
    consumer::consumer reader(co);
    ASSERT_TRUE(eventually([&] {
      auto r = reader.fetch(50, 300ms);
      if (!r) return false;
      std::vector<consumer::delivery_ref> acks, nacks;
      for (const auto& d : r.value()) {
        (poison(d.message.body()) ? nacks : acks).push_back(d.ref());
        if (poison(d.message.body())) {
          nacked[d.message.id()] = std::max(nacked[d.message.id()], d.message.attempt());
        } else {
          acked_ids.insert(d.message.id());
        }
      }
      if (!acks.empty()) (void)reader.ack(acks);
      if (!nacks.empty()) (void)reader.nack(nacks, 0ms);
      std::size_t dead = 0;
      for (auto& [id, a] : nacked) dead += a >= 2 ? 1 : 0;
      return acked_ids.size() == k_messages - k_messages / 4 && dead == static_cast<std::size_t>(k_messages / 4);
    }, 60s)) << acked_ids.size() << " acked, " << nacked.size() << " poison seen\n" << logs();
  }

  // Every dead letter, through the client library (the CLI's path), with their partitions.
  ASSERT_TRUE(eventually([&] {
    auto l = client::dlq_list_all(cluster_->connect(cluster_->broker(1).address()), k_group, 1000);
    if (!l || l.value().dead_letters.size() != static_cast<std::size_t>(k_messages / 4)) return false;
    poison_ids.clear();
    partition_of.clear();
    for (const auto& d : l.value().dead_letters) {
      const auto id = std::string(protocol::uuid::from_bytes(d.message().id()).value().to_string());
      poison_ids.insert(id);
      partition_of[id] = static_cast<int>(d.message().partition());
    }
    return true;
  }, 20s)) << logs();
  std::set<int> dead_partitions;
  for (auto& [id, p] : partition_of) dead_partitions.insert(p);
  ASSERT_FALSE(dead_partitions.empty());
  const int p0 = *dead_partitions.begin();

  // 1. The leader of a partition with dead letters SIGKILLed: the list through the node that
  //    does not lead it now is whole.
  const int killed = static_cast<int>(cluster_->view(k_topic, p0)->leader);
  cluster_->broker(killed).kill();
  const int successor = new_leader_of(p0, killed);
  ASSERT_NE(successor, 0) << logs();
  const int other = 6 - killed - successor;
  std::optional<std::set<std::string>> listed;
  EXPECT_TRUE(eventually([&] { return (listed = cli_dead_ids(other, &why)) && *listed == poison_ids; }, 20s))
      << "listed through node " << other << ": " << (listed ? listed->size() : 0) << " of " << poison_ids.size() << " " << why
      << "\n" << logs();

  // The group's figures through the same node: each partition's row from its leader, so the
  // dead letters counted once each (a follower's copy is not counted).
  std::uint64_t described = 0;
  EXPECT_TRUE(eventually([&] {
    auto d = txmq(cluster_->broker(other), {"--json", "group", "describe", k_group});
    if (d.status != 0 || d.objects().size() != 1) return false;
    described = d.objects()[0].at("dead_letters").to_number<std::uint64_t>();
    return described == poison_ids.size() && d.objects()[0].at("partitions").as_array().size() == k_partitions;
  }, 20s)) << described << " dead letters described\n" << logs();

  // 2. Back to three nodes; redrive through a node that does not lead p0.
  cluster_->broker(killed).start();
  ASSERT_TRUE(eventually([&] { return whole(); }, 40s)) << logs();
  const int leader = static_cast<int>(cluster_->view(k_topic, p0)->leader);
  const int follower = leader == 1 ? 2 : 1;
  auto r = txmq(cluster_->broker(follower), {"--json", "dlq", "redrive", k_group});
  ASSERT_EQ(r.status, 0) << r << logs();
  ASSERT_EQ(r.objects().size(), 1u) << r;
  EXPECT_EQ(r.objects()[0].at("redriven").to_number<std::uint64_t>(), poison_ids.size()) << r;

  // 3. The leader of p0 SIGKILLed after the redrive was answered: the redrive holds.
  cluster_->broker(leader).kill();
  const int next = new_leader_of(p0, leader);
  ASSERT_NE(next, 0) << logs();
  EXPECT_TRUE(eventually([&] { return (listed = cli_dead_ids(next, &why)) && listed->empty(); }, 20s))
      << (listed ? std::to_string(listed->size()) : why) << " dead letters after the kill\n" << logs();
  auto again = run_txmq({"--json", "--broker", cluster_->bootstrap(), "dlq", "redrive", k_group});
  ASSERT_EQ(again.status, 0) << again << logs();
  EXPECT_EQ(again.objects().at(0).at("redriven").to_number<std::uint64_t>(), 0u) << again;

  // The group gets every redriven message again (acked now).
  std::set<std::string> back;
  {
    consumer::consumer reader(co);
    EXPECT_TRUE(eventually([&] {
      auto f = reader.fetch(50, 300ms);
      if (!f) return false;
      std::vector<consumer::delivery_ref> acks;
      for (const auto& d : f.value()) {
        acks.push_back(d.ref());
        if (poison(d.message.body())) back.insert(std::string(protocol::uuid::from_bytes(d.message.id()).value().to_string()));
      }
      if (!acks.empty()) (void)reader.ack(acks);
      return back == poison_ids;
    }, 40s)) << back.size() << " of " << poison_ids.size() << " redriven messages delivered again\n" << logs();
  }
  std::cout << "CLUSTER-FIGURES dlq: " << poison_ids.size() << " dead letters over " << dead_partitions.size()
            << " partitions; listed whole through node " << other << " after killing node " << killed
            << "; redriven " << poison_ids.size() << " through node " << follower << ", 0 after killing node "
            << leader << "\n";
}

// An operator's `txmq tx commit` and `tx show` through a node that does not lead the
// transaction's home partition: the CLI finds the record, and sends both to the home leader
// (before, TxResolve was answered NOT_LEADER there).
TEST_F(cluster_admin_test, tx_commit_and_show_reach_the_home_leader_through_any_node) {
  std::string why;
  ASSERT_TRUE(cluster_->create_topic(k_topic, k_partitions, 3, why)) << why;
  const std::string key = "tk";
  const auto home = static_cast<std::int32_t>(protocol::partition_for_key(key, k_partitions));
  const int leader = static_cast<int>(cluster_->view(k_topic, home)->leader);
  const int other = leader == 1 ? 2 : 1;
  cli_result p;
  // The leader takes a Prepare once it recorded its epoch (NOT_LEADER "not yet" until then).
  ASSERT_TRUE(eventually([&] {
    p = txmq(cluster_->broker(leader), {"--json", "tx", "prepare", k_topic, "body", "--group", "pg", "--key", key});
    return p.status == 0;
  }, 10s)) << p << logs();
  const std::string txid(p.objects().at(0).at("txid").as_string());
  auto c = txmq(cluster_->broker(other), {"--json", "tx", "commit", txid});
  ASSERT_EQ(c.status, 0) << c << logs();
  EXPECT_EQ(c.objects().at(0).at("state").as_string(), "COMMITTED") << c;
  const int third = 6 - leader - other;
  EXPECT_TRUE(eventually([&] {
    auto sh = txmq(cluster_->broker(third), {"--json", "tx", "show", txid});
    return sh.status == 0 && sh.objects().size() == 1 && sh.objects()[0].at("state").as_string() == "COMMITTED";
  }, 10s)) << logs();
}

// Per-topic settings kept in etcd with the topic (docs/cluster.md "Topic settings"):
// min_insync_replicas validated against replicas by the broker, shown by `topic describe`
// through another node, applied by the leader (a write with one of three replicas gone is
// refused when the topic asks for 3 in sync, acknowledged when it asks for the default 2);
// retention_bytes applied by every node's local copy.
TEST_F(cluster_admin_test, min_insync_and_retention_are_kept_in_etcd_and_applied_by_every_node) {
  // First a default topic: the helper waits for all three nodes to be live.
  std::string why;
  ASSERT_TRUE(cluster_->create_topic("loose", 1, 3, why)) << why;
  {
    client::admin admin(cluster_->connect(cluster_->broker(1).address()));
    auto bad = admin.create_topic({.name = "bad", .partitions = 1, .replicas = 2, .min_insync = 3});
    ASSERT_FALSE(bad);
    EXPECT_TRUE(bad.error().is(protocol::errc::invalid_argument)) << bad.error().to_string();
    EXPECT_NE(bad.error().message.find("min_insync_replicas"), std::string::npos) << bad.error().to_string();
  }
  auto made = txmq(cluster_->broker(1), {"--json", "topic", "create", "strict", "--partitions", "1", "--replicas", "3",
                                         "--min-insync", "3", "--retention-bytes", "65536"});
  ASSERT_EQ(made.status, 0) << made << logs();
  ASSERT_TRUE(eventually([&] {
    auto v = cluster_->view("strict", 0);
    return v && v->leader > 0 && v->isr.size() == 3;
  }, 30s)) << logs();
  auto described = txmq(cluster_->broker(2), {"--json", "topic", "describe", "strict"});
  ASSERT_EQ(described.status, 0) << described;
  ASSERT_EQ(described.objects().size(), 1u) << described;
  EXPECT_EQ(described.objects()[0].at("min_insync_replicas").to_number<std::uint32_t>(), 3u) << described;
  EXPECT_EQ(described.objects()[0].at("retention_bytes").to_number<std::uint64_t>(), 65536u) << described;

  auto produce = [&](int node, const std::string& topic, std::chrono::milliseconds timeout) -> client::result<v1::Frame> {
    auto c = cluster_->connect(cluster_->broker(node).address(), timeout + 5s);
    if (!c) return client::error(client::errc::not_connected, "no connection");
    v1::Frame f;
    f.mutable_produce()->set_topic(topic);
    auto* m = f.mutable_produce()->add_messages();
    m->set_id(std::string(protocol::uuid::make_v7().raw()));
    m->set_key("k");
    m->set_body("b");
    return c->request(std::move(f), timeout + 5s);
  };
  // Both take writes with every replica in sync (once the leader recorded its epoch).
  const int strict_leader = static_cast<int>(cluster_->view("strict", 0)->leader);
  client::result<v1::Frame> w = client::error(client::errc::not_connected, "not sent");
  ASSERT_TRUE(eventually([&] { return (w = produce(strict_leader, "strict", 10s)) && w.value().has_produce_response(); }, 15s))
      << (w ? w.value().ShortDebugString() : w.error().to_string()) << logs();

  // Every node's local copy has the topic's retention (the leader's and both followers').
  for (int n = 1; n <= 3; ++n) {
    std::uint64_t retention = 0;
    EXPECT_TRUE(eventually([&] {
      auto c = cluster_->connect(cluster_->broker(n).address());
      if (!c) return false;
      auto r = client::admin(c).describe_topic("strict");
      retention = r ? r.value().retention_bytes() : 0;
      return retention == 65536;
    }, 10s)) << "node " << n << " keeps retention_bytes " << retention;
  }

  // A follower of both SIGKILLed (not a leader of either): the controller drops it from the ISRs.
  int victim = 0;
  for (int n = 1; n <= 3 && victim == 0; ++n) {
    if (n != strict_leader && n != cluster_->view("loose", 0)->leader) victim = n;
  }
  ASSERT_NE(victim, 0) << "both topics led by different nodes: no common follower";
  cluster_->broker(victim).kill();
  ASSERT_TRUE(eventually([&] {
    auto a = cluster_->view("strict", 0, strict_leader);
    auto b = cluster_->view("loose", 0, strict_leader);
    return a && b && a->isr.size() == 2 && b->isr.size() == 2;
  }, 20s)) << logs();
  // strict (3 in sync needed): refused after replication_timeout (10 s here); loose: acknowledged.
  const auto loose_leader = static_cast<int>(cluster_->view("loose", 0)->leader);
  auto ok = produce(loose_leader, "loose", 10s);
  ASSERT_TRUE(ok) << ok.error().to_string();
  EXPECT_TRUE(ok.value().has_produce_response()) << ok.value().ShortDebugString();
  const auto started = std::chrono::steady_clock::now();
  auto refused = produce(strict_leader, "strict", 12s);
  const auto waited = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - started);
  ASSERT_FALSE(refused) << "acknowledged with 2 of the 3 in-sync replicas it asks for: " << refused.value().ShortDebugString();
  EXPECT_TRUE(refused.error().is(protocol::errc::not_enough_replicas)) << refused.error().to_string();
  std::cout << "CLUSTER-FIGURES topic settings: min-insync 3 with 2 in sync refused after " << waited.count()
            << " ms; min-insync 2 acknowledged\n";
}

// `topic alter` in a cluster (docs/cluster.md "Topic settings"): the topic's etcd record is
// rewritten (compared on its revision) and every node applies it without a restart. Retention
// runs every second here and the replication timeout is 3 s.
class cluster_topic_alter_test : public cluster_admin_test {
 protected:
  void SetUp() override {
    if (!etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
    cluster_ = std::make_unique<cluster_brokers>();
    cluster_->start({"--node-lease-ttl", "3s", "--replica-lag-max", "4s", "--replication-timeout", "3s",
                     "--retention-interval", "1s"});
  }
};

// min_insync_replicas raised to 3 with a follower down refuses writes (NOT_ENOUGH_REPLICAS),
// lowered back to 2 acknowledges them; retention_bytes shrunk trims every node's local copy;
// more than the replicas, an unknown topic and nothing to change are refused; two alters at
// once (each of another setting) both land.
TEST_F(cluster_topic_alter_test, alter_changes_min_insync_and_retention_on_every_node_without_restart) {
  std::string why;
  ASSERT_TRUE(cluster_->create_topic("alt", 1, 3, why)) << why;
  const int leader = static_cast<int>(cluster_->view("alt", 0)->leader);
  const int follower = leader % 3 + 1;
  const int third = 6 - leader - follower;

  auto produce = [&](int node, int count, std::chrono::milliseconds timeout) -> client::result<v1::Frame> {
    auto c = cluster_->connect(cluster_->broker(node).address(), timeout + 5s);
    if (!c) return client::error(client::errc::not_connected, "no connection");
    client::result<v1::Frame> last = client::error(client::errc::not_connected, "not sent");
    for (int i = 0; i < count; ++i) {  // one request each: one stored batch each
      v1::Frame f;
      f.mutable_produce()->set_topic("alt");
      auto* m = f.mutable_produce()->add_messages();
      m->set_id(std::string(protocol::uuid::make_v7().raw()));
      m->set_key("k");
      m->set_body(std::string(1000, 'x'));
      last = c->request(std::move(f), timeout + 5s);
      if (!last || !last.value().has_produce_response()) return last;
    }
    return last;
  };
  client::result<v1::Frame> w = client::error(client::errc::not_connected, "not sent");
  ASSERT_TRUE(eventually([&] { return (w = produce(leader, 1, 5s)) && w.value().has_produce_response(); }, 15s))
      << (w ? w.value().ShortDebugString() : w.error().to_string()) << logs();
  w = produce(leader, 39, 5s);
  ASSERT_TRUE(w && w.value().has_produce_response()) << (w ? w.value().ShortDebugString() : w.error().to_string());
  for (int n = 1; n <= 3; ++n) {
    EXPECT_TRUE(eventually([&] { return cluster_->end_offset(n, "alt") == 40; }, 15s)) << "node " << n;
    EXPECT_EQ(cluster_->start_offset(n, "alt"), 0u) << "node " << n;
  }

  // Refused: more in sync than replicas, an unknown topic, nothing to change (the CLI's usage).
  auto too_many = txmq(cluster_->broker(follower), {"topic", "alter", "alt", "--min-insync", "4"});
  EXPECT_EQ(too_many.status, 1) << too_many;
  EXPECT_NE(too_many.err.find("min_insync_replicas 4 is more than the 3 replicas"), std::string::npos) << too_many;
  auto unknown = txmq(cluster_->broker(follower), {"topic", "alter", "nosuch", "--retention-bytes", "1"});
  EXPECT_EQ(unknown.status, 1) << unknown;
  EXPECT_NE(unknown.err.find("no topic 'nosuch'"), std::string::npos) << unknown;
  auto nothing = txmq(cluster_->broker(follower), {"topic", "alter", "alt"});
  EXPECT_EQ(nothing.status, 2) << nothing;

  // Retention shrunk through a follower: every node's local copy takes it and trims its log.
  auto shrunk = txmq(cluster_->broker(follower), {"--json", "topic", "alter", "alt", "--retention-bytes", "8192"});
  ASSERT_EQ(shrunk.status, 0) << shrunk << logs();
  ASSERT_EQ(shrunk.objects().size(), 1u) << shrunk;
  EXPECT_EQ(shrunk.objects()[0].at("retention_bytes").to_number<std::uint64_t>(), 8192u) << shrunk;
  for (int n = 1; n <= 3; ++n) {
    std::uint64_t retention = 0;
    EXPECT_TRUE(eventually([&] {
      auto c = cluster_->connect(cluster_->broker(n).address());
      auto r = c ? client::admin(c).describe_topic("alt") : client::result<v1::TopicInfo>(client::error(client::errc::not_connected, ""));
      retention = r ? r.value().retention_bytes() : 0;
      return retention == 8192;
    }, 10s)) << "node " << n << " keeps retention_bytes " << retention << logs();
    EXPECT_TRUE(eventually([&] { return cluster_->start_offset(n, "alt") >= 30; }, 15s))
        << "node " << n << " still starts at " << cluster_->start_offset(n, "alt") << logs();
  }
  auto described = txmq(cluster_->broker(third), {"--json", "topic", "describe", "alt"});
  ASSERT_EQ(described.status, 0) << described;
  EXPECT_EQ(described.objects().at(0).at("retention_bytes").to_number<std::uint64_t>(), 8192u) << described;
  EXPECT_EQ(described.objects().at(0).at("min_insync_replicas").to_number<std::uint32_t>(), 2u) << described;

  // Two alters at once through two nodes, each changing another setting: both land (the
  // second's compare fails, it reads again and applies its change to the first's record).
  {
    auto a = cluster_->connect(cluster_->broker(follower).address());
    auto b = cluster_->connect(cluster_->broker(third).address());
    ASSERT_TRUE(a && b);
    v1::AlterTopicRequest ra, rb;
    ra.set_name("alt");
    ra.set_retention_ms(3'600'000);
    rb.set_name("alt");
    rb.set_min_insync_replicas(3);
    client::result<v1::TopicInfo> got_a = client::error(client::errc::not_connected, "");
    std::thread t([&] { got_a = client::admin(a).alter_topic(ra); });
    auto got_b = client::admin(b).alter_topic(rb);
    t.join();
    ASSERT_TRUE(got_a) << got_a.error().to_string();
    ASSERT_TRUE(got_b) << got_b.error().to_string();
    auto d = txmq(cluster_->broker(leader), {"--json", "topic", "describe", "alt"});
    ASSERT_EQ(d.status, 0) << d;
    EXPECT_TRUE(eventually([&] {
      d = txmq(cluster_->broker(leader), {"--json", "topic", "describe", "alt"});
      if (d.status != 0 || d.objects().empty()) return false;
      const auto o = d.objects().front();
      return o.contains("retention_ms") && o.at("retention_ms").to_number<std::int64_t>() == 3'600'000 &&
             o.at("min_insync_replicas").to_number<std::uint32_t>() == 3u &&
             o.at("retention_bytes").to_number<std::uint64_t>() == 8192u;
    }, 10s)) << d;
  }

  // min-insync 3 (set above) with a follower down: the leader refuses writes...
  cluster_->broker(follower).kill();
  ASSERT_TRUE(eventually([&] {
    auto v = cluster_->view("alt", 0, leader);
    return v && v->isr.size() == 2;
  }, 20s)) << logs();
  auto refused = produce(leader, 1, 3s);
  ASSERT_FALSE(refused && refused.value().has_produce_response())
      << "acknowledged with 2 in sync of the 3 asked: " << refused.value().ShortDebugString();
  if (refused) {
    EXPECT_EQ(refused.value().error().code(), v1::NOT_ENOUGH_REPLICAS) << refused.value().ShortDebugString();
  } else {
    EXPECT_TRUE(refused.error().is(protocol::errc::not_enough_replicas)) << refused.error().to_string();
  }
  // ...and acknowledges them again once it is lowered to 2 (through the third node, no restart).
  auto lowered = txmq(cluster_->broker(third), {"topic", "alter", "alt", "--min-insync", "2"});
  ASSERT_EQ(lowered.status, 0) << lowered << logs();
  client::result<v1::Frame> ok = client::error(client::errc::not_connected, "not sent");
  EXPECT_TRUE(eventually([&] { return (ok = produce(leader, 1, 3s)) && ok.value().has_produce_response(); }, 15s))
      << (ok ? ok.value().ShortDebugString() : ok.error().to_string()) << logs();
}

}  // namespace
}  // namespace txmq::test
