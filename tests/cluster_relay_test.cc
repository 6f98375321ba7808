// txmq-relay against a cluster (docs/cluster.md "The relay"): a real PostgreSQL, etcd and three
// txmq-broker processes on free loopback ports, a real txmq-relay given a bootstrap list whose
// first address is dead. The relay publishes through the producer, which follows partition
// leaders (NOT_LEADER → Metadata → the leader, same ids); a consumer group that reads every
// leader gets each outbox row exactly once, by id, and the outbox drains.
// Label `cluster` (and it needs PostgreSQL: tests/support/pg_cluster.h).

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "broker_process.h"
#include "etcd_process.h"
#include "eventually.h"
#include "outbox_support.h"
#include "pg_cluster.h"
#include "relay_process.h"
#include "txmq/client/admin.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/pg_schema.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;

TEST(cluster_relay, outbox_rows_reach_a_three_broker_cluster_through_a_bootstrap_list_once_each) {
  if (!etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
  etcd_process etcd;
  etcd.start();
  std::map<int, std::unique_ptr<broker_process>> brokers;
  for (int id = 1; id <= 3; ++id) {
    brokers[id] = std::make_unique<broker_process>(
        std::vector<std::string>{"--cluster-etcd", etcd.url(), "--node-id", std::to_string(id)});
    brokers[id]->start();
  }
  const auto logs = [&] {
    std::string out;
    for (const auto& [id, b] : brokers) out += "--- broker " + std::to_string(id) + "\n" + b->log();
    return out;
  };
  const std::string bootstrap = "127.0.0.1:" + std::to_string(free_port()) + "," + brokers[2]->address() + "," +
                                brokers[3]->address();

  client::connection_options o;
  o.address = brokers[1]->address();
  auto conn = client::connection::connect(o);
  ASSERT_TRUE(conn) << conn.error();
  client::admin admin(conn.value());
  ASSERT_TRUE(eventually([&] {
    v1::Frame f;
    f.mutable_metadata();
    auto r = conn.value()->request(std::move(f));
    return r && r.value().metadata_response().nodes_size() == 3;
  }, 20s)) << logs();
  // Replicated (3 copies): each row is read once, from its partition's leader only.
  ASSERT_TRUE(admin.create_topic({.name = "outbox-feed", .partitions = 6, .replicas = 3}));
  // Every partition led before the relay starts (it would follow them anyway, after a retry).
  std::set<std::string> leader_addresses;
  ASSERT_TRUE(eventually([&] {
    v1::Frame f;
    f.mutable_metadata();
    auto r = conn.value()->request(std::move(f));
    if (!r) return false;
    leader_addresses.clear();
    for (const auto& t : r.value().metadata_response().topics()) {
      if (t.name() != "outbox-feed" || t.partition_info_size() != 6) continue;
      for (const auto& p : t.partition_info()) {
        if (p.leader_address().empty()) return false;
        leader_addresses.insert(p.leader_address());
      }
      return true;
    }
    return false;
  }, 20s)) << logs();
  EXPECT_EQ(leader_addresses.size(), 3u) << "leaderships spread over the three nodes";

  const auto db = shared_pg_cluster().create_database("cluster_relay");
  auto pg_conn = connect_to(db);
  auto schema = producer::install_schema(pg_conn.get(), 4);
  ASSERT_TRUE(schema) << schema.error().message;
  relay_process relay({"--pg", db, "--broker", bootstrap, "--relay-id", "cluster-1", "--poll-interval", "200ms",
                       "--publish-timeout", "10s"});
  relay.start();
  ASSERT_TRUE(eventually([&] { return shards_held(db) == 4; }, 20s)) << relay.log();

  // Keys spread over every partition, so the relay's batches span the three leaders.
  // The ids come back from the INSERT: the relay may publish and delete the rows before a later SELECT.
  auto rows = pg::exec(pg_conn.get(),
                       "INSERT INTO txmq_outbox (topic, key, headers, payload) SELECT 'outbox-feed', 'k' || (i % 24), "
                       "jsonb_build_object('n', i::text), convert_to('row-' || i, 'UTF8') FROM generate_series(1, 150) i "
                       "RETURNING id");
  ASSERT_TRUE(rows) << rows.error().message;
  std::set<std::string> ids;
  for (int i = 0; i < PQntuples(rows.value().get()); ++i) ids.insert(PQgetvalue(rows.value().get(), i, 0));
  ASSERT_EQ(ids.size(), 150u);

  consumer::consumer_options co;
  co.connection.address = bootstrap;
  co.group = "outbox-readers";
  co.topics = {"outbox-feed"};
  consumer::consumer c(co);
  std::map<std::string, int> seen;
  std::set<std::string> nodes;
  const auto until = std::chrono::steady_clock::now() + 40s;
  std::size_t distinct = 0;
  while (distinct < ids.size() && std::chrono::steady_clock::now() < until) {
    auto got = c.fetch(100, 500ms);
    ASSERT_TRUE(got) << got.error();
    std::vector<consumer::delivery_ref> refs;
    for (const auto& d : got.value()) {
      if (seen[d.id().to_string()]++ == 0) ++distinct;
      EXPECT_EQ(d.message.body(), "row-" + d.message.headers().at("n"));
      nodes.insert(d.node);
      refs.push_back(d.ref());
    }
    if (!refs.empty()) {
      auto acked = c.ack(refs);
      ASSERT_TRUE(acked) << acked.error();
      for (const auto& r : acked.value()) EXPECT_TRUE(r) << r.error();
    }
  }
  // A last look: nothing more (no duplicate) arrives once everything was acked.
  auto more = c.fetch(100, 1000ms);
  ASSERT_TRUE(more) << more.error();
  for (const auto& d : more.value()) ++seen[d.id().to_string()];

  std::set<std::string> got_ids;
  for (const auto& [id, n] : seen) {
    got_ids.insert(id);
    EXPECT_EQ(n, 1) << id << " consumed " << n << " times";
  }
  EXPECT_EQ(got_ids, ids) << relay.log() << logs();
  EXPECT_EQ(nodes.size(), 3u) << "delivered by each of the three leaders";
  EXPECT_TRUE(eventually([&] { return scalar(db, "SELECT count(*) FROM txmq_outbox") == "0"; }, 20s)) << relay.log();
  EXPECT_EQ(relay.stop(), 0) << relay.log();
}

}  // namespace
}  // namespace txmq::test
