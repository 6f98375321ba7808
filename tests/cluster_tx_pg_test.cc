// Transactions with the PostgreSQL barrier checker across leader failovers (issue 14,
// docs/cluster.md "Transactions"): etcd, three brokers and PostgreSQL, a replicas-3 topic of 3
// partitions. Transactional producers (tx_kill_child, as the single-node tx_fault_test) run
// money-transfer-like transactions through a bootstrap list and are SIGKILLed at random points
// (after Prepare, after the local commit, during EndTx, or by the test after 30-400 ms), while
// the test SIGKILLs the leader of a random partition (a home partition: each transaction's one
// message is its home) several times and restarts it. Then a producer of the group comes back
// with the database checker and everything is settled by check-backs. Verdict: committed ⇔
// locally committed (every txid in tx_business published, nothing published without a local
// commit), each once, each in its key's partition. Labels `cluster`, `pg`.

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "child_process.h"
#include "cluster_brokers.h"
#include "eventually.h"
#include "pg_cluster.h"
#include "tx_support.h"
#include "txmq/consumer/consumer.h"
#include "txmq/pg/pg.h"
#include "txmq/producer/pg_checker.h"
#include "txmq/producer/pg_schema.h"
#include "txmq/producer/transaction.h"
#include "txmq/protocol/partitioner.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
namespace fs = std::filesystem;

constexpr std::uint32_t k_partitions = 3;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::size_t count_lines(const std::string& text, const std::string& prefix) {
  std::size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.starts_with(prefix) ? 1 : 0;
  return n;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::max(1, std::atoi(v)) : fallback;
}

TEST(cluster_tx_pg, barrier_checked_producers_end_exactly_as_their_local_transactions_across_leader_kills) {
  if (!etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
  const int wanted = env_int("TXMQ_CLUSTER_TX_TRANSACTIONS", 300);
  const int kills = env_int("TXMQ_CLUSTER_KILLS", 4);
  cluster_brokers cluster;
  cluster.start({"--node-lease-ttl", "3s", "--replica-lag-max", "4s", "--replication-timeout", "10s", "--tx-timeout",
                 "300ms", "--tx-check-schedule", "300ms", "--tx-max-checks", "1000"});
  std::string why;
  ASSERT_TRUE(cluster.create_topic("transfers", k_partitions, 3, why)) << why;
  const std::string conninfo = shared_pg_cluster().create_database("cluster_tx_kills");
  {
    auto db = pg::connect(conninfo);
    ASSERT_TRUE(db) << db.error();
    ASSERT_TRUE(producer::install_schema(db.value().get()));
    ASSERT_TRUE(pg::exec(db.value().get(), "CREATE TABLE tx_business (txid uuid PRIMARY KEY)"));
  }
  const fs::path out = cluster.broker(1).dir() / "cluster-children.log";
  auto prepared = [&] { return count_lines(read_file(out), "prepared "); };

  // The leader killer: after each share of the transactions, the leader of a random partition.
  std::atomic<bool> stop{false};
  std::atomic<int> killed{0};
  std::string killer_error;
  std::vector<std::int64_t> new_leader_ms;
  std::thread killer([&] {
    std::mt19937 rng(2026);
    for (int k = 0; k < kills && !stop; ++k) {
      const auto share = static_cast<std::size_t>(wanted) * static_cast<std::size_t>(k + 1) / static_cast<std::size_t>(kills + 1);
      while (!stop && prepared() < share) std::this_thread::sleep_for(20ms);  // polls the children's log
      if (stop) return;
      const auto p = static_cast<std::int32_t>(rng() % k_partitions);
      auto v = cluster.view("transfers", p);
      if (!v || v->leader <= 0) {
        killer_error = "no leader to kill";
        return;
      }
      const int victim = static_cast<int>(v->leader);
      const auto t0 = std::chrono::steady_clock::now();
      cluster.broker(victim).kill();
      if (!eventually([&] {
            auto n = cluster.view("transfers", p);
            return n && n->leader > 0 && n->leader != victim;
          }, 20s)) {
        killer_error = "no new leader of partition " + std::to_string(p) + " within 20 s";
        return;
      }
      new_leader_ms.push_back(std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0).count());
      cluster.broker(victim).start();
      ++killed;
      if (!eventually([&] {
            for (std::uint32_t q = 0; q < k_partitions; ++q) {
              auto n = cluster.view("transfers", static_cast<std::int32_t>(q));
              if (!n || n->leader <= 0 || n->isr.size() != 3) return false;
            }
            return true;
          }, 30s)) {
        killer_error = "ISR not whole again within 30 s";
        return;
      }
    }
  });

  // Producers, each SIGKILLed after 30-400 ms unless it killed itself first. On a loaded
  // machine a child may not get as far as a Prepare in 400 ms (CI once ran into ctest's 600 s
  // timeout so): after a child that prepared nothing the window doubles, up to 3.2 s, and it
  // goes back to 400 ms once one does. The producers' deadline stays under ctest's timeout so
  // that a stall fails with the cluster's logs rather than being killed.
  std::mt19937_64 rng(42);
  int runs = 0;
  std::uint64_t window_ms = 370;
  const auto until = std::chrono::steady_clock::now() + 420s;
  while ((prepared() < static_cast<std::size_t>(wanted) || killed < kills) && killer_error.empty() &&
         std::chrono::steady_clock::now() < until) {
    const auto prepared_before = prepared();
    auto child = std::make_unique<child_process>(
        std::vector<std::string>{binary_path("tx_kill_child"), "produce", cluster.bootstrap(), conninfo, "transfers-pg",
                                 "transfers", std::to_string(5000 + runs++)},
        out);
    const auto kill_at = std::chrono::steady_clock::now() + milliseconds(30 + rng() % window_ms);
    while (child->running() && std::chrono::steady_clock::now() < kill_at) {
      std::this_thread::sleep_for(2ms);  // the kill time is random; this only polls for an early exit
    }
    child->kill();
    window_ms = prepared() > prepared_before ? 370 : std::min<std::uint64_t>(window_ms * 2, 3170);
  }
  stop = true;
  killer.join();
  ASSERT_TRUE(killer_error.empty()) << killer_error << "\n" << cluster.logs();
  ASSERT_TRUE(prepared() >= static_cast<std::size_t>(wanted) && killed == kills)
      << "the producers did not finish within 420 s: " << prepared() << " of " << wanted << " prepared, " << killed
      << " of " << kills << " leader kills, " << runs << " producer runs\n"
      << cluster.logs();
  const std::string log = read_file(out);
  std::cout << "CLUSTER-FIGURES tx-pg: " << runs << " producer runs, " << prepared() << " prepared; producer kills after "
            << "Prepare " << count_lines(log, "kill a") << ", after the local commit " << count_lines(log, "kill b")
            << ", during EndTx " << count_lines(log, "kill c") << "; leader kills " << killed << ", new leader ms:";
  for (auto ms : new_leader_ms) std::cout << " " << ms;
  std::cout << "\n";

  // A producer of the group comes back with the database checker: every node's records settle
  // (each home leader checks its own; followers hold the replicated outcomes).
  auto checker = std::make_shared<producer::pg_transaction_checker>(producer::pg_checker_options{.conninfo = conninfo});
  producer::transactional_producer settle({.connection = {.address = cluster.bootstrap(), .client_id = "settler",
                                                          .producer_group = "transfers-pg"},
                                           .checker = producer::make_pg_checker(checker)});
  {
    // One Prepare-free request makes it connect to every node (Metadata): a transaction to
    // a fresh txid that is rolled back at once.
    auto tx = settle.begin();
    tx.add({.topic = "transfers", .key = "acct-0", .body = "settler"});
    ASSERT_TRUE(tx.prepare());
    ASSERT_TRUE(tx.rollback());
  }
  for (auto& [id, b] : cluster.all()) {
    EXPECT_EQ(wait_all_resolved(b->address(), 120s), 0u) << "broker " << id << "\n" << cluster.logs();
  }

  std::set<std::string> committed_locally;
  {
    auto db = pg::connect(conninfo);
    ASSERT_TRUE(db);
    auto rows = pg::exec(db.value().get(), "SELECT txid::text FROM tx_business");
    ASSERT_TRUE(rows);
    for (int i = 0; i < PQntuples(rows.value().get()); ++i) committed_locally.insert(PQgetvalue(rows.value().get(), i, 0));
  }
  // Read through consumer-lib (each partition from its leader) until every local commit is in.
  consumer::consumer_options co;
  co.connection.address = cluster.bootstrap();
  co.group = "verify";
  co.topics = {"transfers"};
  co.metadata_refresh = milliseconds(300);
  consumer::consumer reader(co);
  std::map<std::string, std::set<std::pair<std::uint32_t, std::uint64_t>>> published;  // body → positions
  std::size_t wrong_partition = 0;
  auto read_more = [&] {
    auto r = reader.fetch(500, 300ms);
    if (r) {
      std::vector<consumer::delivery_ref> refs;
      for (auto& d : r.value()) {
        published[d.message.body()].insert({d.message.partition(), d.message.offset()});
        if (d.message.has_key() && protocol::partition_for_key(d.message.key(), k_partitions) != d.message.partition()) {
          ++wrong_partition;
        }
        refs.push_back(d.ref());
      }
      if (!refs.empty()) (void)reader.ack(refs);
    }
    for (auto& t : committed_locally) {
      if (!published.contains(t)) return false;
    }
    return true;
  };
  EXPECT_TRUE(eventually(read_more, 60s));
  for (int i = 0; i < 5; ++i) (void)read_more();  // anything that should not be there, late
  std::size_t missing = 0, invented = 0, doubled = 0;
  for (auto& t : committed_locally) missing += published.contains(t) ? 0 : 1;
  for (auto& [t, pos] : published) {
    if (t == "settler") continue;
    invented += committed_locally.contains(t) ? 0 : 1;
    doubled += pos.size() > 1 ? 1 : 0;
  }
  std::cout << "CLUSTER-FIGURES tx-pg: " << committed_locally.size() << " committed locally, " << published.size()
            << " published; missing " << missing << ", invented " << invented << ", doubled " << doubled
            << ", wrong partition " << wrong_partition << "\n";
  EXPECT_EQ(missing, 0u) << "committed locally but never published";
  EXPECT_EQ(invented, 0u) << "published without a local commit (a rolled-back transaction exposed)";
  EXPECT_EQ(doubled, 0u) << "published at two positions";
  EXPECT_EQ(wrong_partition, 0u);
  EXPECT_GT(committed_locally.size(), prepared() / 2);
}

}  // namespace
}  // namespace txmq::test
