// Brokers joining a cluster (DESIGN.md §8, docs/cluster.md "Brokers in a cluster"): three real
// txmq-broker processes with --cluster-etcd against an etcd started here, on free loopback
// ports, stopped by PID. What is asserted is the replicas = 1 behaviour (replication has its
// own test, cluster_replication_test):
//  - the brokers join; a topic's partitions get leaders spread over the three nodes;
//  - --replicas 4 on three nodes is refused;
//  - a producer given one bootstrap address publishes keyed messages to every partition and each
//    lands on its partition's leader (the broker answers NOT_LEADER with the leader's address to a
//    message it does not lead, and the producer follows it); a consumer reading every node gets them all;
//  - a killed leader: its partitions have no leader (their only ISR member is down: no unclean
//    election, and nothing was replicated), keyed sends to them are refused while the other
//    partitions keep taking writes; when the node returns it leads them again, with its data.
// Label `cluster`. Single-node Metadata is checked too (no etcd needed).

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <set>

#include "broker_process.h"
#include "cli_runner.h"
#include "etcd_process.h"
#include "eventually.h"
#include "metadata_reads.h"
#include "txmq/client/admin.h"
#include "txmq/client/connection.h"
#include "txmq/producer/producer.h"
#include "txmq/protocol/partitioner.h"

namespace txmq::test {
namespace {
using std::chrono::milliseconds;
using std::chrono::steady_clock;

// The messages of `topic` stored on one broker, per partition (its local store: DescribeTopic).
std::map<std::uint32_t, std::uint64_t> local_counts(client::connection& c, const std::string& topic) {
  std::map<std::uint32_t, std::uint64_t> out;
  client::admin admin(std::shared_ptr<client::connection>(&c, [](client::connection*) {}));
  auto info = admin.describe_topic(topic);
  if (!info) return out;
  for (const auto& p : info.value().partition_info()) out[p.partition()] = p.end_offset() - p.start_offset();
  return out;
}

class cluster_broker_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
    etcd_.start();
    for (int id = 1; id <= 3; ++id) {
      brokers_[id] = std::make_unique<broker_process>(
          std::vector<std::string>{"--cluster-etcd", etcd_.url(), "--node-id", std::to_string(id)});
      brokers_[id]->start();
    }
  }

  std::string logs() const {
    std::string out;
    for (const auto& [id, b] : brokers_) out += "--- broker " + std::to_string(id) + "\n" + b->log();
    return out;
  }
  std::string address(int id) const { return brokers_.at(id)->address(); }

  // Waits for Metadata (from `c`) with `nodes` live nodes and every partition of `topic` led.
  v1::MetadataResponse wait_metadata(client::connection& c, int nodes, const std::string& topic = {},
                                     milliseconds deadline = std::chrono::seconds(20)) {
    v1::MetadataResponse m;
    const bool ok = eventually([&] {
      auto r = metadata(c);
      if (!r) return false;
      m = r.value();
      if (m.nodes_size() != nodes) return false;
      if (topic.empty()) return true;
      const auto* t = find_topic(m, topic);
      return t != nullptr && t->partition_info_size() == static_cast<int>(t->partitions()) &&
             std::all_of(t->partition_info().begin(), t->partition_info().end(),
                         [](const auto& p) { return p.leader() > 0 && !p.leader_address().empty(); });
    }, deadline);
    EXPECT_TRUE(ok) << m.DebugString() << logs();
    return m;
  }

  etcd_process etcd_;
  std::map<int, std::unique_ptr<broker_process>> brokers_;
};

TEST_F(cluster_broker_test, brokers_join_leaders_spread_keyed_messages_land_on_their_leaders_and_are_all_consumed) {
  auto c1 = connect_or_throw(address(1));
  const auto joined = wait_metadata(*c1, 3);
  EXPECT_TRUE(joined.cluster());
  EXPECT_EQ(joined.node_id(), 1);
  EXPECT_GT(joined.controller(), 0);
  std::set<std::string> advertised;
  for (const auto& n : joined.nodes()) advertised.insert(n.address());
  EXPECT_EQ(advertised, (std::set<std::string>{address(1), address(2), address(3)}));

  client::admin admin(c1);
  // More replicas than nodes: refused.
  auto replicated = admin.create_topic({.name = "orders", .partitions = 6, .replicas = 4});
  ASSERT_FALSE(replicated);
  EXPECT_EQ(replicated.error().code, protocol::errc::invalid_argument);
  EXPECT_NE(replicated.error().message.find("cannot have more replicas than nodes"), std::string::npos)
      << replicated.error();
  ASSERT_TRUE(admin.create_topic({.name = "orders", .partitions = 6, .replicas = 1}));
  const auto m = wait_metadata(*c1, 3, "orders");
  const auto* t = find_topic(m, "orders");
  ASSERT_NE(t, nullptr);
  std::map<std::int64_t, int> led;
  std::map<std::uint32_t, std::int64_t> leader_of;
  std::map<std::int64_t, std::string> address_of;
  for (const auto& p : t->partition_info()) {
    ++led[p.leader()];
    leader_of[p.partition()] = p.leader();
    address_of[p.leader()] = p.leader_address();
    EXPECT_EQ(p.replicas_size(), 1);
    EXPECT_EQ(p.leader_epoch(), 1);
  }
  EXPECT_EQ(led.size(), 3u) << "leaderships spread over the three nodes: " << m.DebugString();

  // The operator's view, through a bootstrap list whose first address is dead (TXMQ_BROKER).
  // Node 2 answers from its own copy of the metadata, which may trail node 1's by a watch event.
  const std::string bootstrap = "127.0.0.1:" + std::to_string(free_port()) + "," + address(2);
  cli_result status;
  EXPECT_TRUE(eventually([&] {
    status = run_txmq({"cluster", "status", "--json"}, "", bootstrap);
    if (status.status != 0) return false;
    const auto objects = status.objects();
    if (objects.size() != 1) return false;
    std::size_t agreeing = 0;
    for (const auto& part : objects[0].at("partitions").as_array()) {
      const auto partition = static_cast<std::uint32_t>(part.at("partition").to_number<std::int64_t>());
      agreeing += part.at("topic").as_string() == "orders" && part.at("leader").to_number<std::int64_t>() == leader_of[partition];
    }
    return agreeing == 6;
  }, 10s)) << status;
  ASSERT_EQ(status.status, 0) << status;
  const auto objects = status.objects();
  ASSERT_EQ(objects.size(), 1u) << status.out;
  EXPECT_EQ(objects[0].at("cluster").as_bool(), true);
  EXPECT_EQ(objects[0].at("nodes").as_array().size(), 3u);
  std::size_t listed = 0;
  for (const auto& part : objects[0].at("partitions").as_array()) {
    if (part.at("topic").as_string() != "orders") continue;
    ++listed;
    const auto partition = static_cast<std::uint32_t>(part.at("partition").to_number<std::int64_t>());
    EXPECT_EQ(part.at("leader").to_number<std::int64_t>(), leader_of[partition]);
    EXPECT_FALSE(part.at("under_replicated").as_bool());
  }
  EXPECT_EQ(listed, 6u) << status.out;
  const auto table = txmq(*brokers_.at(3), {"cluster", "status"});
  EXPECT_EQ(table.status, 0) << table;
  EXPECT_NE(table.out.find("cluster 'txmq', answered by node 3"), std::string::npos) << table.out;

  // 60 keys cover all six partitions (checked below).
  std::vector<std::string> keys;
  for (int i = 0; i < 60; ++i) keys.push_back("customer-" + std::to_string(i));
  std::map<std::uint32_t, std::uint64_t> expected;
  for (const auto& k : keys) ++expected[protocol::partition_for_key(k, 6)];
  ASSERT_EQ(expected.size(), 6u);

  // The broker itself refuses a keyed message whose partition it does not lead, naming the leader.
  std::string foreign_key;
  for (const auto& k : keys) {
    if (leader_of[protocol::partition_for_key(k, 6)] != 1) {
      foreign_key = k;
      break;
    }
  }
  ASSERT_FALSE(foreign_key.empty());
  {
    v1::Frame f;
    auto* req = f.mutable_produce();
    req->set_topic("orders");
    auto* msg = req->add_messages();
    msg->set_id(std::string(protocol::uuid::make_v7().raw()));
    msg->set_key(foreign_key);
    msg->set_body("direct");
    auto r = c1->request(std::move(f));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, protocol::errc::not_leader) << r.error();
    const auto leader = leader_of[protocol::partition_for_key(foreign_key, 6)];
    EXPECT_NE(r.error().message.find(address_of[leader]), std::string::npos) << r.error();
  }

  // A producer that knows one address (after a dead one: the bootstrap list moves on).
  producer::producer_options po;
  po.connection.address = "127.0.0.1:" + std::to_string(free_port()) + "," + address(1);
  po.delivery_timeout = milliseconds(20000);
  std::set<std::string> sent_ids;
  {
    producer::producer p(po);
    std::vector<std::future<client::result<producer::send_result>>> acks;
    for (const auto& k : keys) acks.push_back(p.async_send({.topic = "orders", .key = k, .body = "body of " + k}));
    for (std::size_t i = 0; i < acks.size(); ++i) {
      auto r = acks[i].get();
      ASSERT_TRUE(r) << keys[i] << ": " << r.error() << logs();
      EXPECT_EQ(r.value().partition, protocol::partition_for_key(keys[i], 6)) << keys[i];
      sent_ids.insert(r.value().id.to_string());
    }
  }
  // Each message is stored on its partition's leader, and nowhere else.
  for (int id = 1; id <= 3; ++id) {
    auto c = connect_or_throw(address(id));
    const auto counts = local_counts(*c, "orders");
    for (std::uint32_t p = 0; p < 6; ++p) {
      const auto it = counts.find(p);
      const std::uint64_t here = it == counts.end() ? 0 : it->second;
      EXPECT_EQ(here, leader_of[p] == id ? expected[p] : 0u) << "partition " << p << " on node " << id;
    }
  }

  // A consumer reading every node (groups are per node while partitions have one copy) gets all 60.
  std::set<std::string> consumed;
  std::vector<std::shared_ptr<client::connection>> nodes;
  for (const auto& n : m.nodes()) nodes.push_back(connect_or_throw(n.address()));
  EXPECT_TRUE(eventually([&] {
    for (auto& c : nodes) {
      v1::Frame f;
      auto* fetch = f.mutable_fetch();
      fetch->set_group("readers");
      fetch->add_topics("orders");
      fetch->set_max_messages(100);
      fetch->set_max_wait_ms(100);
      fetch->set_ack_deadline_ms(60000);
      auto r = c->request(std::move(f));
      if (!r || !r.value().has_fetch_response()) continue;
      for (const auto& d : r.value().fetch_response().deliveries()) {
        consumed.insert(protocol::uuid::from_bytes(d.message().id()).value().to_string());
      }
    }
    return consumed.size() >= sent_ids.size();
  }, std::chrono::seconds(20)));
  EXPECT_EQ(consumed, sent_ids);
}

TEST_F(cluster_broker_test, a_killed_leaders_partitions_stay_leaderless_until_it_returns_with_its_data) {
  auto c1 = connect_or_throw(address(1));
  wait_metadata(*c1, 3);
  client::admin admin(c1);
  ASSERT_TRUE(admin.create_topic({.name = "events", .partitions = 3, .replicas = 1}));
  const auto before = wait_metadata(*c1, 3, "events");
  // The node to kill: one that is not node 1 (the test talks through node 1) and leads a partition.
  std::int64_t victim = -1;
  std::set<std::uint32_t> victims_partitions;
  for (const auto& p : find_topic(before, "events")->partition_info()) {
    if (p.leader() != 1 && victim < 0) victim = p.leader();
  }
  ASSERT_GT(victim, 0) << before.DebugString();
  std::map<std::uint32_t, std::int64_t> epoch_before;
  for (const auto& p : find_topic(before, "events")->partition_info()) {
    epoch_before[p.partition()] = p.leader_epoch();
    if (p.leader() == victim) victims_partitions.insert(p.partition());
  }
  // A key for one of the victim's partitions and one for a partition led by another node.
  std::string victim_key, other_key;
  for (int i = 0; i < 100 && (victim_key.empty() || other_key.empty()); ++i) {
    const std::string k = "k" + std::to_string(i);
    (victims_partitions.contains(protocol::partition_for_key(k, 3)) ? victim_key : other_key) = k;
  }
  ASSERT_FALSE(victim_key.empty());
  ASSERT_FALSE(other_key.empty());

  producer::producer_options po;
  po.connection.address = address(1);
  po.delivery_timeout = milliseconds(4000);
  po.request_timeout = milliseconds(1000);
  producer::producer p(po);
  auto stored = p.send({.topic = "events", .key = victim_key, .body = "before the kill"});
  ASSERT_TRUE(stored) << stored.error() << logs();

  const auto killed_at = steady_clock::now();
  brokers_.at(static_cast<int>(victim))->kill();
  // The control plane notices (lease expiry) and marks the victim's partitions leaderless: their
  // only ISR member is down, nothing was replicated, so no other node may lead them.
  v1::MetadataResponse after;
  ASSERT_TRUE(eventually([&] {
    auto r = metadata(*c1);
    if (!r) return false;
    after = r.value();
    for (const auto& part : find_topic(after, "events")->partition_info()) {
      if (victims_partitions.contains(part.partition()) && part.leader() != -1) return false;
    }
    return after.nodes_size() == 2;
  }, std::chrono::seconds(20))) << after.DebugString() << logs();
  const auto noticed_ms = std::chrono::duration_cast<milliseconds>(steady_clock::now() - killed_at).count();
  std::cout << "CLUSTER-FIGURES broker SIGKILLed -> its replicas=1 partitions marked leaderless: " << noticed_ms
            << " ms\n";
  EXPECT_LT(noticed_ms, 10000);
  for (const auto& part : find_topic(after, "events")->partition_info()) {
    if (victims_partitions.contains(part.partition())) {
      EXPECT_EQ(part.leader(), -1);
      EXPECT_EQ(part.leader_epoch(), epoch_before[part.partition()] + 1);
      EXPECT_EQ(std::vector<std::int64_t>(part.isr().begin(), part.isr().end()), std::vector<std::int64_t>{victim})
          << "the ISR is kept: only the victim holds the partition's data";
    }
  }
  // Its partitions take no writes (never acknowledged as stored somewhere else): the broker
  // answers NOT_LEADER naming no leader, and the producer gives up after its delivery timeout...
  {
    v1::Frame f;
    auto* req = f.mutable_produce();
    req->set_topic("events");
    auto* msg = req->add_messages();
    msg->set_id(std::string(protocol::uuid::make_v7().raw()));
    msg->set_key(victim_key);
    msg->set_body("direct, while the leader is down");
    auto r = c1->request(std::move(f));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, protocol::errc::not_leader) << r.error();
    EXPECT_NE(r.error().message.find("has no leader"), std::string::npos) << r.error();
  }
  auto refused = p.send({.topic = "events", .key = victim_key, .body = "while the leader is down"});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, client::errc::delivery_timeout) << refused.error();
  // ...while the others do.
  auto elsewhere = p.send({.topic = "events", .key = other_key, .body = "other partition"});
  EXPECT_TRUE(elsewhere) << elsewhere.error();

  // The node returns: it leads its partitions again (new epoch) and still has their data.
  brokers_.at(static_cast<int>(victim))->start();
  v1::MetadataResponse back;
  ASSERT_TRUE(eventually([&] {
    auto r = metadata(*c1);
    if (!r) return false;
    back = r.value();
    for (const auto& part : find_topic(back, "events")->partition_info()) {
      if (victims_partitions.contains(part.partition()) && part.leader() != victim) return false;
    }
    return true;
  }, std::chrono::seconds(20))) << back.DebugString() << logs();
  for (const auto& part : find_topic(back, "events")->partition_info()) {
    if (victims_partitions.contains(part.partition())) {
      EXPECT_EQ(part.leader_epoch(), epoch_before[part.partition()] + 2);
    }
  }
  auto cv = connect_or_throw(address(static_cast<int>(victim)));
  const auto counts = local_counts(*cv, "events");
  EXPECT_EQ(counts.at(protocol::partition_for_key(victim_key, 3)), 1u) << "the message stored before the kill";
  po.delivery_timeout = milliseconds(20000);
  producer::producer fresh(po);
  auto again = fresh.send({.topic = "events", .key = victim_key, .body = "after the return"});
  EXPECT_TRUE(again) << again.error();
}

// Without --cluster-etcd nothing of the cluster is needed: Metadata says one node leads all.
TEST(cluster_single_node_test, metadata_of_a_single_broker_and_replicas_refused) {
  broker_process b;
  b.start();
  auto c = connect_or_throw(b.address());
  client::admin admin(c);
  ASSERT_TRUE(admin.create_topic({.name = "solo", .partitions = 2}));
  auto refused = admin.create_topic({.name = "copies", .partitions = 2, .replicas = 2});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, protocol::errc::invalid_argument);
  auto m = metadata(*c);
  ASSERT_TRUE(m) << m.error();
  EXPECT_FALSE(m.value().cluster());
  ASSERT_EQ(m.value().nodes_size(), 1);
  EXPECT_EQ(m.value().nodes(0).address(), b.address());
  const auto* t = find_topic(m.value(), "solo");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->partition_info_size(), 2);
  for (const auto& p : t->partition_info()) {
    EXPECT_EQ(p.leader(), 0);
    EXPECT_EQ(p.leader_address(), b.address());
  }
}

}  // namespace
}  // namespace txmq::test
