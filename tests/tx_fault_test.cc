// Transactions through crashes: producers and read-process-write consumers SIGKILLed at
// random points (tx_kill_child), settled by the broker's check-back.

#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "broker_process.h"
#include "child_process.h"
#include "pg_cluster.h"
#include "tx_support.h"
#include "txmq/client/admin.h"
#include "txmq/pg/pg.h"
#include "txmq/protocol/message_id.h"
#include "txmq/producer/pg_checker.h"
#include "txmq/producer/pg_schema.h"
#include "txmq/producer/producer.h"
#include "txmq/producer/transaction.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

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

// Runs `make_child` again and again, SIGKILLing each run after a random 30-400 ms unless it
// killed itself first, until `enough` says so or the deadline passes. Returns the runs.
template <class Make, class Enough>
int kill_loop(Make make_child, Enough enough, std::chrono::seconds deadline, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto until = std::chrono::steady_clock::now() + deadline;
  int runs = 0;
  while (!enough() && std::chrono::steady_clock::now() < until) {
    auto child = make_child(runs++);
    const auto kill_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(30 + rng() % 370);
    while (child->running() && std::chrono::steady_clock::now() < kill_at) {
      std::this_thread::sleep_for(2ms);  // the kill time is random; this only polls for an early exit
    }
    child->kill();
  }
  return runs;
}

TEST(tx_fault, producers_killed_at_random_points_end_exactly_as_their_local_transactions) {
  const int wanted = std::getenv("TXMQ_TX_KILL_TRANSACTIONS") ? std::atoi(std::getenv("TXMQ_TX_KILL_TRANSACTIONS")) : 1000;
  // Checks every 300 ms keep the run short. A check sent to a child that is killed before it
  // answers, or due while no child is connected, counts as undecided (DESIGN.md §3), and with
  // the default 15 a transaction whose checks kept landing on dying children was ABANDONED
  // after 4.5 s on a loaded CI machine (2 of 715 in one run). ABANDONED is the designed end
  // of a transaction nobody answers for; what this test checks is that every answered check
  // decides rightly, so the limit is far beyond the length of the kill loop.
  broker_process b({"--tx-timeout", "300ms", "--tx-check-schedule", "300ms", "--tx-max-checks", "100000"});
  b.start();
  const std::string conninfo = shared_pg_cluster().create_database("tx_kills");
  {
    auto db = pg::connect(conninfo);
    ASSERT_TRUE(db) << db.error();
    ASSERT_TRUE(producer::install_schema(db.value().get()));
    ASSERT_TRUE(pg::exec(db.value().get(), "CREATE TABLE tx_business (txid uuid PRIMARY KEY)"));
  }
  const fs::path out = b.dir() / "children.log";
  auto runs = kill_loop(
      [&](int run) {
        return std::make_unique<child_process>(
            std::vector<std::string>{binary_path("tx_kill_child"), "produce", b.address(), conninfo, "transfers-pg",
                                     "transfers", std::to_string(1000 + run)},
            out);
      },
      [&] { return count_lines(read_file(out), "prepared ") >= static_cast<std::size_t>(wanted); }, 600s, 42);
  const std::string log = read_file(out);
  const auto prepared = count_lines(log, "prepared ");
  std::cout << runs << " producer runs, " << prepared << " transactions prepared; kills after Prepare: "
            << count_lines(log, "kill a") << ", after the local commit: " << count_lines(log, "kill b")
            << ", during EndTx: " << count_lines(log, "kill c") << "\n";
  ASSERT_GE(prepared, static_cast<std::size_t>(wanted));
  EXPECT_GT(count_lines(log, "kill a"), 0u);
  EXPECT_GT(count_lines(log, "kill b"), 0u);
  EXPECT_GT(count_lines(log, "kill c"), 0u);

  // A producer of the group comes back with the database checker: everything gets settled.
  auto checker = std::make_shared<producer::pg_transaction_checker>(producer::pg_checker_options{.conninfo = conninfo});
  producer::transactional_producer settle({.connection = {.address = b.address(), .client_id = "settler",
                                                          .producer_group = "transfers-pg"},
                                           .checker = producer::make_pg_checker(checker)});
  ASSERT_EQ(wait_all_resolved(b.address(), 120s), 0u);
  const auto abandoned = list_txs(b.address(), v1::ABANDONED);
  EXPECT_TRUE(abandoned.empty());
  if (!abandoned.empty()) {
    // What the broker said about each abandoned transaction (why its checks did not decide).
    const std::string broker_log = b.log();
    for (const auto& t : abandoned) {
      auto parsed = protocol::uuid::from_bytes(t.txid());
      const std::string id = parsed ? parsed.value().to_string() : std::string("?");
      std::cout << "abandoned " << id << " after " << t.check_count() << " checks; the broker said:\n";
      std::istringstream in(broker_log);
      for (std::string line; std::getline(in, line);) {
        if (line.find(id) != std::string::npos) std::cout << "  " << line << "\n";
      }
    }
  }

  std::set<std::string> committed_locally;
  {
    auto db = pg::connect(conninfo);
    ASSERT_TRUE(db);
    auto rows = pg::exec(db.value().get(), "SELECT txid::text FROM tx_business");
    ASSERT_TRUE(rows);
    for (int i = 0; i < PQntuples(rows.value().get()); ++i) committed_locally.insert(PQgetvalue(rows.value().get(), i, 0));
  }
  std::map<std::string, int> published;
  for (auto& m : drain_topic(b.address(), "transfers", "verify")) ++published[m.body()];
  std::size_t missing = 0, invented = 0, doubled = 0;
  for (auto& t : committed_locally) missing += published.contains(t) ? 0 : 1;
  for (auto& [t, n] : published) {
    invented += committed_locally.contains(t) ? 0 : 1;
    doubled += n > 1 ? 1 : 0;
  }
  std::cout << committed_locally.size() << " committed locally, " << published.size() << " published\n";
  EXPECT_EQ(missing, 0u) << "committed locally but never published";
  EXPECT_EQ(invented, 0u) << "published without a local commit";
  EXPECT_EQ(doubled, 0u) << "published more than once";
  EXPECT_GT(committed_locally.size(), prepared / 2);
}

std::uint64_t unsettled(client::admin& admin, const std::string& group) {
  auto info = admin.describe_group(group);
  if (!info) return ~std::uint64_t{0};
  std::uint64_t n = 0;
  for (auto& p : info.value().partitions()) n += p.lag();
  return n;
}

TEST(tx_fault, read_process_write_consumers_killed_at_random_points_transform_each_input_once) {
  constexpr int inputs = 400;
  // As above: checks land on children being killed, so the limit is beyond the kill loop.
  broker_process b({"--ack-deadline", "1s", "--tx-timeout", "300ms", "--tx-check-schedule", "300ms",
                    "--tx-max-checks", "100000", "--retry-schedule", "100ms"});
  b.start();
  {
    producer::producer_options o;
    o.connection.address = b.address();
    producer::producer p(o);
    for (int i = 0; i < inputs; ++i) {
      (void)p.async_send({.topic = "in", .key = "k" + std::to_string(i % 8), .body = "in-" + std::to_string(i)});
    }
    ASSERT_TRUE(p.flush(30s));
  }
  auto conn = client::connection::connect({.address = b.address()});
  ASSERT_TRUE(conn) << conn.error();
  client::admin admin(conn.value());
  ASSERT_TRUE(admin.create_group("transform", "in"));

  const fs::path out = b.dir() / "rpw.log";
  const int runs = kill_loop(
      [&](int run) {
        return std::make_unique<child_process>(
            std::vector<std::string>{binary_path("tx_kill_child"), "rpw", b.address(), "in", "out", "transform",
                                     std::to_string(7000 + run)},
            out);
      },
      [&] { return unsettled(admin, "transform") == 0; }, 300s, 7);
  ASSERT_EQ(unsettled(admin, "transform"), 0u) << read_file(out).substr(0, 4000);
  ASSERT_EQ(wait_all_resolved(b.address(), 30s), 0u);
  const std::string log = read_file(out);
  std::cout << runs << " consumer runs; kills after Prepare: " << count_lines(log, "kill a")
            << ", during EndTx: " << count_lines(log, "kill c") << "\n";

  std::map<std::string, int> outputs;
  for (auto& m : drain_topic(b.address(), "out", "verify")) ++outputs[m.body()];
  EXPECT_EQ(outputs.size(), static_cast<std::size_t>(inputs));
  for (int i = 0; i < inputs; ++i) {
    const std::string body = "out:in-" + std::to_string(i);
    EXPECT_EQ(outputs[body], 1) << body;
  }
}

}  // namespace
}  // namespace txmq::test
