// Clients that follow leaders in a cluster (docs/cluster.md "Consumers", "Transactions",
// "Operators"): etcd and three real txmq-broker processes on free loopback ports, stopped by
// PID. What is asserted:
//  - a consumer group (consumer-lib's run()) given a bootstrap list whose first address is dead
//    reads every partition from its leader and gets each message once per delivery (a message
//    twice only as a redelivery, attempt > 1); a leader SIGKILLed and restarted: the group keeps
//    reading the other partitions meanwhile, and the victim's partitions' messages (stored after
//    its return) arrive once it is back; the CLI `consume` reads through the bootstrap list too;
//  - transactions in a cluster (docs/cluster.md "Transactions"), through the transactional
//    producer and a bootstrap list: a committed one's message lands in its key's partition (on
//    its leader), a rolled-back one's nowhere;
//  - `topic describe` shows each partition's leader, epoch, replicas and ISR with the leader's
//    offsets; /metrics has the cluster families, and the controller counted the elections of
//    the kill and the return.
// Label `cluster`.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "broker_process.h"
#include "cli_runner.h"
#include "etcd_process.h"
#include "eventually.h"
#include "metadata_reads.h"
#include "txmq/client/admin.h"
#include "txmq/client/connection.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/producer.h"
#include "txmq/producer/transaction.h"
#include "txmq/protocol/partitioner.h"

namespace txmq::test {
namespace {
using std::chrono::milliseconds;
using std::chrono::steady_clock;

// The value of an unlabelled series in a /metrics page; -1 when absent.
double metric(const std::string& page, const std::string& name) {
  const auto at = page.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(page.substr(at + name.size() + 2));
}

// What a consumer saw: every delivery (id, attempt), in arrival order.
struct seen {
  std::mutex mutex;
  std::map<std::string, std::vector<std::uint32_t>> attempts;  // id -> attempts delivered
  // Per key, the sequence numbers ("PREFIX#N" bodies) of first deliveries, in handling order.
  std::map<std::string, std::vector<int>> first_by_key;

  void add(const consumer::delivery& d) {
    std::lock_guard lock(mutex);
    const auto id = d.id().to_string();
    attempts[id].push_back(d.attempt());
    const auto& body = d.message.body();
    if (d.attempt() == 1 && body.find('#') != std::string::npos) {
      first_by_key[d.message.key()].push_back(std::stoi(body.substr(body.find('#') + 1)));
    }
  }
  std::size_t distinct() {
    std::lock_guard lock(mutex);
    return attempts.size();
  }
  bool has_all(const std::set<std::string>& ids) {
    std::lock_guard lock(mutex);
    for (const auto& id : ids) {
      if (!attempts.contains(id)) return false;
    }
    return true;
  }
};

class cluster_clients_test : public ::testing::Test {
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
  // A bootstrap list whose first address has nothing behind it.
  std::string bootstrap() const { return "127.0.0.1:" + std::to_string(free_port()) + "," + address(1); }

  // Waits until `c` reports all three nodes live: a topic made before would be spread over fewer.
  void wait_three_nodes(client::connection& c) {
    ASSERT_TRUE(eventually([&] {
      auto r = metadata(c);
      return r && r.value().nodes_size() == 3;
    }, std::chrono::seconds(20))) << logs();
  }

  // Waits for Metadata (from `c`) with `nodes` live nodes and every partition of `topic` led.
  v1::MetadataResponse wait_led(client::connection& c, int nodes, const std::string& topic) {
    v1::MetadataResponse m;
    const bool ok = eventually([&] {
      auto r = metadata(c);
      if (!r) return false;
      m = r.value();
      const auto* t = find_topic(m, topic);
      return m.nodes_size() == nodes && t != nullptr && t->partition_info_size() == static_cast<int>(t->partitions()) &&
             std::all_of(t->partition_info().begin(), t->partition_info().end(),
                         [](const auto& p) { return p.leader() > 0 && !p.leader_address().empty(); });
    }, std::chrono::seconds(20));
    EXPECT_TRUE(ok) << m.DebugString() << logs();
    return m;
  }

  // Sends keyed messages "<prefix>-<i>" and returns their ids (every send must be acknowledged).
  // `distinct_keys` > 0: keys PREFIX-(i mod distinct_keys), bodies PREFIX#i (per-key order is
  // checkable); 0: one key per message.
  std::set<std::string> publish(const std::string& topic, const std::string& prefix, int n,
                                std::vector<std::string>* keys_out = nullptr, int distinct_keys = 0) {
    producer::producer_options po;
    po.connection.address = bootstrap();
    po.delivery_timeout = milliseconds(30000);
    producer::producer p(po);
    std::vector<std::future<client::result<producer::send_result>>> acks;
    for (int i = 0; i < n; ++i) {
      const auto key = prefix + "-" + std::to_string(distinct_keys > 0 ? i % distinct_keys : i);
      if (keys_out) keys_out->push_back(key);
      const auto body = distinct_keys > 0 ? prefix + "#" + std::to_string(i) : "body of " + key;
      acks.push_back(p.async_send({.topic = topic, .key = key, .body = body}));
    }
    std::set<std::string> ids;
    for (auto& a : acks) {
      auto r = a.get();
      EXPECT_TRUE(r) << r.error() << logs();
      if (r) ids.insert(r.value().id.to_string());
    }
    return ids;
  }

  etcd_process etcd_;
  std::map<int, std::unique_ptr<broker_process>> brokers_;
};

TEST_F(cluster_clients_test, a_group_reads_every_leader_through_a_bootstrap_list_and_keeps_going_across_a_sigkill) {
  auto c1 = connect_or_throw(address(1));
  wait_three_nodes(*c1);
  client::admin admin(c1);
  // replicas 1: the victim's partitions must stay leaderless while it is down (with more
  // replicas they would move: cluster_replication_test); a group over a replicated topic is
  // cluster_fetch_test's.
  ASSERT_TRUE(admin.create_topic({.name = "feed", .partitions = 6, .replicas = 1}));
  const auto before = wait_led(*c1, 3, "feed");
  std::set<std::int64_t> leaders;
  for (const auto& p : find_topic(before, "feed")->partition_info()) leaders.insert(p.leader());
  ASSERT_EQ(leaders.size(), 3u) << "leaderships spread: " << before.DebugString();

  auto first = publish("feed", "first", 60, nullptr, 12);
  ASSERT_EQ(first.size(), 60u);

  seen got;
  std::atomic<int> log_lines{0};
  consumer::consumer_options co;
  co.connection.address = bootstrap();
  co.connection.request_timeout = milliseconds(5000);
  co.connection.reconnect_backoff_max = milliseconds(500);
  co.group = "readers";
  co.topics = {"feed"};
  co.concurrency = 4;
  co.max_wait = milliseconds(300);
  // A fetch answer lost to a client timeout leaves its deliveries leased to this live consumer
  // until the deadline: keep that within the waits below (they come back as attempt 2).
  co.ack_deadline = milliseconds(10000);
  co.metadata_refresh = milliseconds(500);
  co.log = [&](std::string_view text) {
    if (log_lines++ < 20) std::cerr << "consumer: " << text << "\n";
  };
  consumer::consumer reader(co);
  std::jthread running([&](std::stop_token stop) {
    auto r = reader.run([&](const consumer::delivery& d) -> consumer::handler_result {
      got.add(d);
      return outcome::success();
    }, stop);
    EXPECT_TRUE(r) << r.error();
  });
  ASSERT_TRUE(eventually([&] { return got.has_all(first); }, std::chrono::seconds(20)))
      << got.distinct() << " of 60 consumed" << logs();

  // Every ack of the first round applied (nothing in flight on any node), so that the kill below
  // cannot lose one: only the second round's messages are in question.
  ASSERT_TRUE(eventually([&] {
    for (int id = 1; id <= 3; ++id) {
      client::admin a(connect_or_throw(address(id)));
      auto g = a.describe_group("readers");
      if (!g) return false;
      for (const auto& p : g.value().partitions()) {
        if (p.in_flight() != 0 || p.acked() != p.end_offset()) return false;
      }
    }
    return true;
  }, std::chrono::seconds(20))) << logs();

  // A leader that is neither node 1 (the bootstrap list's live entry) nor the controller (whose
  // metrics are checked below) is SIGKILLed.
  std::int64_t victim = -1;
  for (auto id : leaders) {
    if (id != 1 && id != before.controller()) victim = id;
  }
  ASSERT_GT(victim, 0) << before.DebugString();
  std::set<std::uint32_t> victims;
  for (const auto& p : find_topic(before, "feed")->partition_info()) {
    if (p.leader() == victim) victims.insert(p.partition());
  }
  brokers_.at(static_cast<int>(victim))->kill();
  ASSERT_TRUE(eventually([&] {
    auto r = metadata(*c1);
    if (!r) return false;
    for (const auto& p : find_topic(r.value(), "feed")->partition_info()) {
      if (victims.contains(p.partition()) && p.leader() != -1) return false;
    }
    return true;
  }, std::chrono::seconds(20))) << logs();

  // Published while the victim is down: the other partitions' messages are read meanwhile; the
  // victim's wait in the producer (NOT_LEADER) and are stored when it leads again.
  std::vector<std::string> keys;
  std::set<std::string> second;
  std::set<std::string> second_on_victim_keys;
  std::thread publisher([&] { second = publish("feed", "second", 60, &keys, 12); });
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(got.mutex);
    return got.attempts.size() >= 60 + 20;  // some of the others' partitions' messages arrived
  }, std::chrono::seconds(20))) << got.distinct() << logs();
  brokers_.at(static_cast<int>(victim))->start();
  publisher.join();
  ASSERT_EQ(second.size(), 60u);
  ASSERT_TRUE(eventually([&] { return got.has_all(second); }, std::chrono::seconds(30)))
      << got.distinct() << " of 120 consumed" << logs();
  running.request_stop();
  running.join();

  // Each message once per delivery: a second delivery of a message only as a redelivery.
  std::size_t redelivered = 0;
  std::size_t victim_second = 0;
  {
    std::lock_guard lock(got.mutex);
    for (const auto& [id, attempts] : got.attempts) {
      std::set<std::uint32_t> distinct(attempts.begin(), attempts.end());
      EXPECT_EQ(distinct.size(), attempts.size()) << id << " delivered twice in the same attempt";
      if (attempts.size() > 1) ++redelivered;
    }
    // Per-key order: each key's first deliveries in the order they were published.
    for (const auto& [key, seq] : got.first_by_key) {
      EXPECT_TRUE(std::is_sorted(seq.begin(), seq.end())) << "key " << key << " handled out of order";
    }
    EXPECT_EQ(got.first_by_key.size(), 24u);
    // The victim's partitions' second-round messages arrived after it was back.
    for (const auto& k : keys) {
      if (victims.contains(protocol::partition_for_key(k, 6))) ++victim_second;
    }
  }
  EXPECT_GT(victim_second, 0u);
  std::cout << "CLUSTER-FIGURES consumer across a SIGKILL: 120 messages, " << redelivered << " redelivered, "
            << victim_second << " on the victim's partitions stored after its restart\n";
  EXPECT_EQ(got.distinct(), 120u);

  // The CLI reads through the bootstrap list (a group of its own: all 120, from every leader).
  ASSERT_TRUE(eventually([&] {
    auto r = metadata(*c1);
    return r && r.value().nodes_size() == 3;
  }, std::chrono::seconds(20)));
  const auto cli = run_txmq({"--json", "consume", "feed", "--group", "cli", "--max", "120", "--wait", "2000"}, "",
                            bootstrap());
  ASSERT_EQ(cli.status, 0) << cli;
  std::set<std::string> cli_ids;
  for (const auto& o : cli.objects()) cli_ids.insert(std::string(o.at("id").as_string()));
  EXPECT_EQ(cli_ids.size(), 120u) << cli.out;

  // The controller wrote the victim's partitions to no leader and back: its elections count.
  const auto controller = metadata(*c1).value().controller();
  ASSERT_GT(controller, 0);
  const auto page = http_get(brokers_.at(static_cast<int>(controller))->http_port(), "/metrics");
  EXPECT_GE(metric(page, "txmq_leader_elections_total"), 2.0 * static_cast<double>(victims.size())) << page;
  EXPECT_EQ(metric(page, "txmq_under_replicated_partitions"), 0.0) << page;
  EXPECT_EQ(metric(page, "txmq_isr_shrinks_total"), 0.0) << page;
  EXPECT_EQ(metric(page, "txmq_isr_expands_total"), 0.0) << page;
}

TEST_F(cluster_clients_test, transactions_commit_into_key_partitions_and_topic_describe_shows_leaders_epochs_and_isr) {
  auto c1 = connect_or_throw(address(1));
  wait_three_nodes(*c1);
  client::admin admin(c1);
  ASSERT_TRUE(admin.create_topic({.name = "ledger", .partitions = 3, .replicas = 1}));
  const auto m = wait_led(*c1, 3, "ledger");
  const auto ids = publish("ledger", "entry", 30);
  ASSERT_EQ(ids.size(), 30u);

  // Transactions: served by the home partition's leader (the producer follows it), a commit's
  // messages copied into their key's partitions (two keys: often two leaders), a rollback's
  // nowhere.
  producer::transactional_producer_options to;
  to.connection.address = bootstrap();
  to.connection.producer_group = "payments";
  to.request_timeout = milliseconds(5000);
  producer::transactional_producer tp(to);
  {
    auto tx = tp.begin();
    tx.add({.topic = "ledger", .key = "entry-0", .body = "in a transaction"});
    tx.add({.topic = "ledger", .key = "entry-1", .body = "in a transaction too"});
    auto prepared = tx.prepare();
    ASSERT_TRUE(prepared) << prepared.error();
    auto committed = tx.commit();
    ASSERT_TRUE(committed) << committed.error();
    auto dropped = tp.begin();
    dropped.add({.topic = "ledger", .key = "entry-2", .body = "rolled back"});
    ASSERT_TRUE(dropped.prepare());
    ASSERT_TRUE(dropped.rollback());
  }

  // topic describe: every partition with its leader, epoch, replicas and ISR, and the leader's
  // offsets (the committed transaction's two messages included once copied).
  cli_result json;
  ASSERT_TRUE(eventually([&] {
    json = run_txmq({"--json", "topic", "describe", "ledger"}, "", bootstrap());
    auto o = json.status == 0 ? json.objects() : decltype(json.objects()){};
    return o.size() == 1 && o[0].at("messages").to_number<std::int64_t>() == 32;
  })) << json.out << logs();
  const auto objects = json.objects();
  ASSERT_EQ(objects.size(), 1u) << json.out;
  EXPECT_EQ(objects[0].at("messages").to_number<std::int64_t>(), 32) << json.out;
  const auto& parts = objects[0].at("partition_info").as_array();
  ASSERT_EQ(parts.size(), 3u) << json.out;
  std::map<std::uint32_t, std::uint64_t> expected;
  for (int i = 0; i < 30; ++i) ++expected[protocol::partition_for_key("entry-" + std::to_string(i), 3)];
  // The committed transaction's two messages, each in its key's partition (entry-2's rolled back: nowhere).
  for (const char* k : {"entry-0", "entry-1"}) ++expected[protocol::partition_for_key(k, 3)];
  for (const auto& v : parts) {
    const auto& p = v.as_object();
    const auto partition = static_cast<std::uint32_t>(p.at("partition").to_number<std::int64_t>());
    const auto& meta = find_topic(m, "ledger")->partition_info(static_cast<int>(partition));
    EXPECT_EQ(p.at("leader").to_number<std::int64_t>(), meta.leader());
    EXPECT_EQ(p.at("leader_epoch").to_number<std::int64_t>(), meta.leader_epoch());
    EXPECT_EQ(p.at("isr").as_array().size(), 1u);
    EXPECT_EQ(p.at("replicas").as_array().size(), 1u);
    EXPECT_EQ(static_cast<std::uint64_t>(p.at("messages").to_number<std::int64_t>()), expected[partition]) << json.out;
  }
  const auto table = txmq(*brokers_.at(2), {"topic", "describe", "ledger"});
  ASSERT_EQ(table.status, 0) << table;
  EXPECT_NE(table.out.find("LEADER"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("ISR"), std::string::npos) << table.out;

  // Every node serves the cluster families.
  for (int id = 1; id <= 3; ++id) {
    const auto page = http_get(brokers_.at(id)->http_port(), "/metrics");
    for (const char* family : {"txmq_under_replicated_partitions", "txmq_leader_elections_total",
                               "txmq_isr_shrinks_total", "txmq_isr_expands_total"}) {
      EXPECT_GE(metric(page, family), 0.0) << "node " << id << " lacks " << family;
    }
  }
}

}  // namespace
}  // namespace txmq::test
