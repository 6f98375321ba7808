// producer-lib's transactional API and PgTransactionChecker against the real broker and a
// real PostgreSQL server.

#include <atomic>
#include <future>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "broker_process.h"
#include "child_process.h"
#include "pg_cluster.h"
#include "tx_support.h"
#include "txmq/pg/pg.h"
#include "txmq/producer/pg_checker.h"
#include "txmq/producer/pg_schema.h"
#include "txmq/producer/transaction.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;
using producer::tx_decision;

producer::transactional_producer_options tx_options(const broker_process& b, producer::transaction_checker checker = {}) {
  producer::transactional_producer_options o;
  o.connection.address = b.address();
  o.connection.client_id = "tx-test";
  o.connection.producer_group = "payments";
  o.checker = std::move(checker);
  return o;
}

std::multiset<std::string> bodies(const std::vector<v1::Message>& messages) {
  std::multiset<std::string> out;
  for (auto& m : messages) out.insert(m.body());
  return out;
}

pg::connection_ptr database(const std::string& name) {
  auto conninfo = shared_pg_cluster().create_database(name);
  auto conn = pg::connect(conninfo);
  if (!conn) throw std::runtime_error(conn.error().to_string());
  if (auto r = producer::install_schema(conn.value().get()); !r) throw std::runtime_error(r.error().to_string());
  return std::move(conn).value();
}

TEST(tx_producer, commit_publishes_every_message_and_rollback_none) {
  broker_process b;
  b.start();
  producer::transactional_producer p(tx_options(b));
  auto tx = p.begin();
  tx.add({.topic = "transfers", .key = "a", .body = "t1-a"}).add({.topic = "audit", .body = "t1-audit"});
  ASSERT_TRUE(tx.prepare());
  EXPECT_TRUE(drain_topic(b.address(), "transfers", "before-commit", 100ms).empty());
  auto committed = tx.commit();
  ASSERT_TRUE(committed) << committed.error();
  ASSERT_EQ(committed.value().positions.size(), 2u);
  EXPECT_FALSE(committed.value().already_resolved);
  EXPECT_EQ(tx.current_state(), producer::transaction::state::committed);

  auto dropped = p.begin();
  // Time-ordered txids (UUIDv7, increasing within the process): the broker files each new
  // transaction record beside the previous one instead of at a random key (issue #15).
  EXPECT_EQ(tx.id().version(), 7);
  EXPECT_EQ(dropped.id().version(), 7);
  EXPECT_LT(tx.id(), dropped.id());
  dropped.add({.topic = "transfers", .key = "a", .body = "t2-a"});
  ASSERT_TRUE(dropped.prepare());
  ASSERT_TRUE(dropped.rollback());
  EXPECT_EQ(bodies(drain_topic(b.address(), "transfers", "g")), (std::multiset<std::string>{"t1-a"}));
  EXPECT_EQ(bodies(drain_topic(b.address(), "audit", "g")), (std::multiset<std::string>{"t1-audit"}));

  // The library refuses a second end of a transaction it already ended (the broker's own
  // TX_ALREADY_RESOLVED for a contrary EndTx is covered in broker_tx_test).
  auto contrary = dropped.commit();
  ASSERT_FALSE(contrary);
  EXPECT_NE(contrary.error().message.find("not prepared"), std::string::npos) << contrary.error();
}

TEST(tx_producer, send_in_transaction_follows_the_local_outcome) {
  broker_process b;
  b.start();
  producer::transactional_producer p(tx_options(b));
  auto committed = p.send_in_transaction({{.topic = "orders", .body = "yes"}}, [](const producer::transaction&) {
    return tx_decision::commit;
  });
  ASSERT_TRUE(committed) << committed.error();
  EXPECT_EQ(committed.value().decision, tx_decision::commit);
  EXPECT_EQ(committed.value().committed.positions.size(), 1u);

  auto rolled = p.send_in_transaction({{.topic = "orders", .body = "no"}},
                                      [](const producer::transaction&) { return tx_decision::rollback; });
  ASSERT_TRUE(rolled) << rolled.error();

  EXPECT_THROW((void)p.send_in_transaction({{.topic = "orders", .body = "thrown"}},
                                           [](const producer::transaction&) -> tx_decision { throw std::runtime_error("boom"); }),
               std::runtime_error);
  EXPECT_EQ(bodies(drain_topic(b.address(), "orders", "g")), (std::multiset<std::string>{"yes"}));
  EXPECT_TRUE(list_txs(b.address()).empty());
}

TEST(tx_producer, unknown_local_outcome_is_settled_by_the_checker) {
  broker_process b({"--tx-timeout", "200ms", "--tx-check-schedule", "200ms"});
  b.start();
  std::atomic<int> asked{0};
  producer::transactional_producer p(tx_options(b, [&](const producer::tx_check& c) {
    ++asked;
    EXPECT_EQ(c.producer_group, "payments");
    EXPECT_EQ(c.messages.size(), 1u);
    return c.messages.at(0).body() == "commit-me" ? tx_decision::commit : tx_decision::rollback;
  }));
  auto unknown = [](const producer::transaction&) { return tx_decision::unknown; };
  ASSERT_TRUE(p.send_in_transaction({{.topic = "t", .body = "commit-me"}}, unknown));
  ASSERT_TRUE(p.send_in_transaction({{.topic = "t", .body = "drop-me"}}, unknown));
  EXPECT_EQ(wait_all_resolved(b.address(), 20s), 0u);
  EXPECT_EQ(asked.load(), 2);
  EXPECT_EQ(p.checks_answered().commit, 1u);
  EXPECT_EQ(p.checks_answered().rollback, 1u);
  EXPECT_EQ(bodies(drain_topic(b.address(), "t", "g")), (std::multiset<std::string>{"commit-me"}));
}

TEST(tx_producer, bad_transactions_are_refused_before_sending) {
  broker_process b;
  b.start();
  auto o = tx_options(b);
  o.connection.producer_group.clear();
  producer::transactional_producer p(o);
  auto tx = p.begin();
  tx.add({.topic = "t", .body = "x"});
  auto r = tx.prepare();
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(client::errc::invalid_argument)) << r.error();

  producer::transactional_producer grouped(tx_options(b));
  auto mixed = grouped.begin();
  mixed.add({.topic = "t", .body = "x"}).add_ack("g1", {"in", 0, 0}).add_ack("g2", {"in", 0, 1});
  auto refused = mixed.prepare();
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().is(client::errc::invalid_argument)) << refused.error();
  EXPECT_NE(refused.error().message.find("more than one consumer group"), std::string::npos) << refused.error();
}

TEST(pg_checker, answers_from_the_barrier_row) {
  auto db = database("checker_answers");
  producer::pg_transaction_checker checker({.conninfo = shared_pg_cluster().conninfo("checker_answers")});

  // Committed business transaction → COMMIT.
  const auto committed = protocol::uuid::make_v4();
  ASSERT_TRUE(pg::in_transaction(db.get(), [&](PGconn* c) { return producer::record_commit(c, committed); }));
  EXPECT_EQ(checker.check(committed), tx_decision::commit);

  // Rolled back → ROLLBACK (the checker's own row), and asking again says the same.
  const auto rolled_back = protocol::uuid::make_v4();
  ASSERT_TRUE(pg::exec(db.get(), "BEGIN"));
  ASSERT_TRUE(producer::record_commit(db.get(), rolled_back));
  ASSERT_TRUE(pg::exec(db.get(), "ROLLBACK"));
  EXPECT_EQ(checker.check(rolled_back), tx_decision::rollback);
  EXPECT_EQ(checker.check(rolled_back), tx_decision::rollback);

  // A business transaction that comes after a ROLLBACK answer fails instead of diverging.
  const auto late = protocol::uuid::make_v4();
  EXPECT_EQ(checker.check(late), tx_decision::rollback);
  auto refused = pg::in_transaction(db.get(), [&](PGconn* c) { return producer::record_commit(c, late); });
  ASSERT_FALSE(refused);
  EXPECT_EQ(pg::sqlstate(refused.error()), pg::unique_violation) << refused.error();
}

TEST(pg_checker, waits_for_an_open_business_transaction) {
  auto db = database("checker_waits");
  producer::pg_transaction_checker checker({.conninfo = shared_pg_cluster().conninfo("checker_waits")});
  for (const bool commit : {true, false}) {
    const auto txid = protocol::uuid::make_v4();
    ASSERT_TRUE(pg::exec(db.get(), "BEGIN"));
    ASSERT_TRUE(producer::record_commit(db.get(), txid));
    auto answer = std::async(std::launch::async, [&] { return checker.check(txid); });
    // The check is blocked on the row lock until the business transaction ends.
    EXPECT_EQ(answer.wait_for(300ms), std::future_status::timeout);
    ASSERT_TRUE(pg::exec(db.get(), commit ? "COMMIT" : "ROLLBACK"));
    EXPECT_EQ(answer.get(), commit ? tx_decision::commit : tx_decision::rollback);
  }
}

TEST(pg_checker, says_unknown_when_the_business_transaction_stays_open_past_lock_timeout) {
  auto db = database("checker_timeout");
  producer::pg_transaction_checker checker(
      {.conninfo = shared_pg_cluster().conninfo("checker_timeout"), .lock_timeout = 200ms});
  const auto txid = protocol::uuid::make_v4();
  ASSERT_TRUE(pg::exec(db.get(), "BEGIN"));
  ASSERT_TRUE(producer::record_commit(db.get(), txid));
  EXPECT_EQ(checker.check(txid), tx_decision::unknown);
  ASSERT_TRUE(pg::exec(db.get(), "COMMIT"));
  EXPECT_EQ(checker.check(txid), tx_decision::commit);
  auto gone = checker.cleanup(0s);
  ASSERT_TRUE(gone) << gone.error();
  EXPECT_GE(gone.value(), 1u);
}

TEST(pg_checker, settles_transactions_whose_producer_vanished) {
  // With the default 15 checks, 200 ms apart, a transaction nobody answers for is ABANDONED ~3 s
  // after its Prepare: on a loaded machine, before the 20 Prepares and local commits below and the
  // checker's connection are done. This test is about checks answered from the barrier.
  broker_process b({"--tx-timeout", "200ms", "--tx-check-schedule", "200ms", "--tx-max-checks", "100000"});
  b.start();
  auto db = database("checker_orphans");
  const std::string conninfo = shared_pg_cluster().conninfo("checker_orphans");
  std::set<std::string> expected;
  {
    // No checker (its checks count as undecided): this producer prepares, commits locally 1
    // in 2, and never ends anything before it goes away.
    producer::transactional_producer quiet(tx_options(b));
    for (int i = 0; i < 20; ++i) {
      auto tx = quiet.begin();
      tx.add({.topic = "transfers", .body = "t" + std::to_string(i)});
      ASSERT_TRUE(tx.prepare());
      ASSERT_TRUE(pg::exec(db.get(), "BEGIN"));
      ASSERT_TRUE(producer::record_commit(db.get(), tx.id()));
      ASSERT_TRUE(pg::exec(db.get(), i % 2 == 0 ? "COMMIT" : "ROLLBACK"));
      if (i % 2 == 0) expected.insert("t" + std::to_string(i));
    }
  }
  EXPECT_EQ(list_txs(b.address(), v1::PREPARED).size(), 20u);
  // A new producer of the group with the database checker answers the broker's checks from
  // the barrier.
  auto checker = std::make_shared<producer::pg_transaction_checker>(producer::pg_checker_options{.conninfo = conninfo});
  producer::transactional_producer p(tx_options(b, producer::make_pg_checker(checker)));
  (void)p.conn()->wait_connected(5s);
  EXPECT_EQ(wait_all_resolved(b.address(), 90s), 0u);
  auto got = bodies(drain_topic(b.address(), "transfers", "g"));
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), expected);
  EXPECT_EQ(got.size(), expected.size());
}

TEST(transfer_example, publishes_the_transfer_iff_the_money_moved) {
  broker_process b;
  b.start();
  auto db = database("transfer_example");
  const std::string conninfo = shared_pg_cluster().conninfo("transfer_example");
  auto run = [&](std::vector<std::string> args) {
    std::vector<std::string> argv{binary_path("txmq_transfer_example"), conninfo, b.address()};
    argv.insert(argv.end(), args.begin(), args.end());
    child_process p(argv, b.dir() / "example.log");
    return p.wait();
  };
  EXPECT_EQ(run({"alice", "bob", "30"}), 0);
  EXPECT_EQ(run({"alice", "bob", "500"}), 1);  // not enough money: rolled back
  auto balances = pg::exec(db.get(), "SELECT string_agg(name || '=' || balance, ',' ORDER BY name) FROM accounts");
  ASSERT_TRUE(balances) << balances.error();
  EXPECT_STREQ(PQgetvalue(balances.value().get(), 0, 0), "alice=70,bob=130");
  auto events = drain_topic(b.address(), "transfers", "g");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].body(), R"({"from":"alice","to":"bob","amount":30})");
  EXPECT_TRUE(list_txs(b.address()).empty());
}

}  // namespace
}  // namespace txmq::test
