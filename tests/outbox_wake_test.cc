// Waking the relay (outbox schema version 4; outbox-relay/README.md, "Waking the relay"), against
// a real PostgreSQL. outbox_wake.*: the writers' side step by step, on sessions the test holds
// (a relay's locks taken by hand, commits in the order the test chooses): a commit NOTIFYs only
// shards no relay is awake on, and a relay falling asleep waits for the commits that found it
// awake. outbox_wake_relay.*: a real txmq-relay reads on its own while rows come, falls asleep
// when they stop, and a NOTIFY wakes it (its poll interval is an hour). Label pg.

#include <poll.h>

#include <chrono>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "admin_of.h"
#include "broker_process.h"
#include "eventually.h"
#include "outbox_support.h"
#include "pg_cluster.h"
#include "raw_client.h"
#include "relay_process.h"
#include "txmq/client/admin.h"
#include "txmq/pg/pg.h"
#include "txmq/producer/pg_schema.h"
#include "wake.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;

void run(PGconn* c, const std::string& sql) {
  auto r = pg::exec(c, sql);
  ASSERT_TRUE(r) << sql << ": " << r.error();
}

// Inserts a row of `key` on the caller's session (in its transaction if one is open); its shard.
int insert_row(PGconn* c, const std::string& key) {
  auto r = pg::exec(c, "INSERT INTO txmq_outbox (topic, key, payload) VALUES ('t', $1, 'x') RETURNING shard", {key});
  if (!r) throw std::runtime_error(r.error().message);
  return std::stoi(PQgetvalue(r.value().get(), 0, 0));
}

std::string lock_sql(const char* fn, int lock_class, int shard) {
  return std::string("SELECT ") + fn + "(" + std::to_string(lock_class) + ", " + std::to_string(shard) + ")";
}

// A session LISTENing on txmq_outbox, as the relay's is.
class listener {
 public:
  explicit listener(const std::string& db) : conn_(connect_to(db)) {
    if (!pg::exec(conn_.get(), "LISTEN txmq_outbox")) throw std::runtime_error("LISTEN failed");
  }
  // The payloads (shards) received until `shard` arrives or 20 s pass, in arrival order, `shard` last.
  std::vector<std::string> until(int shard) {
    std::vector<std::string> got;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      PQconsumeInput(conn_.get());
      while (PGnotify* n = PQnotifies(conn_.get())) {
        got.emplace_back(n->extra);
        PQfreemem(n);
      }
      if (!got.empty() && got.back() == std::to_string(shard)) return got;
      pollfd fd{PQsocket(conn_.get()), POLLIN, 0};
      ::poll(&fd, 1, 100);  // wakes on the notification's arrival; the timeout only re-checks the deadline
    }
    return got;
  }

 private:
  pg::connection_ptr conn_;
};

// Advisory locks of `lock_class` in pg_locks that also match `where` (SQL), on a session the
// test keeps open (a new one per look would pause a writer for longer than the relay stays
// awake without rows); -1 when the query failed.
int advisory_locks(PGconn* c, int lock_class, const std::string& where = "granted") {
  auto r = pg::exec(c, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = " +
                           std::to_string(lock_class) + "::bigint::oid AND " + where);
  return r ? std::stoi(PQgetvalue(r.value().get(), 0, 0)) : -1;
}

// The awake locks txmq-relay holds.
int awake_locks(PGconn* c) { return advisory_locks(c, producer::outbox_awake_lock_class); }

struct wake_db {
  explicit wake_db(const std::string& name) : db(shared_pg_cluster().create_database(name)), conn(connect_to(db)) {
    auto schema = producer::install_schema(conn.get(), 2);
    if (!schema) throw std::runtime_error(schema.error().message);
  }
  std::string db;
  pg::connection_ptr conn;
};

TEST(outbox_wake, a_commit_notifies_only_the_shards_no_relay_is_awake_on) {
  wake_db setup("wake_notify");
  listener l(setup.db);
  auto relay = connect_to(setup.db);
  auto writer = connect_to(setup.db);
  const std::string key_a = "a";
  const std::string key_b = key_of_other_shard(setup.db, key_a);
  ASSERT_FALSE(key_b.empty());

  // No relay awake: the commit notifies its row's shard.
  const int shard_a = insert_row(writer.get(), key_a);
  EXPECT_EQ(l.until(shard_a), std::vector<std::string>{std::to_string(shard_a)});

  // A relay awake on shard a: a's commit sends nothing. b's commit, after it, notifies, and
  // notifications arrive in commit order, so a's would have come first.
  run(relay.get(), lock_sql("pg_advisory_lock", producer::outbox_awake_lock_class, shard_a));
  ASSERT_EQ(insert_row(writer.get(), key_a), shard_a);
  const int shard_b = insert_row(writer.get(), key_b);
  ASSERT_NE(shard_a, shard_b);
  EXPECT_EQ(l.until(shard_b), std::vector<std::string>{std::to_string(shard_b)});

  // Asleep again: a's commits notify.
  run(relay.get(), lock_sql("pg_advisory_unlock", producer::outbox_awake_lock_class, shard_a));
  ASSERT_EQ(insert_row(writer.get(), key_a), shard_a);
  EXPECT_EQ(l.until(shard_a), std::vector<std::string>{std::to_string(shard_a)});
}

TEST(outbox_wake, a_relay_falling_asleep_waits_for_the_commits_that_found_it_awake) {
  wake_db setup("wake_asleep");
  listener l(setup.db);
  auto relay = connect_to(setup.db);
  auto late = connect_to(setup.db);
  auto other = connect_to(setup.db);
  const int shard = std::stoi(scalar(setup.db, "SELECT ((hashtext('k')::bigint % 2) + 2) % 2"));
  run(relay.get(), lock_sql("pg_advisory_lock", producer::outbox_awake_lock_class, shard));

  // A writer checks now, not at its commit (what SET CONSTRAINTS ... IMMEDIATE does): it finds the
  // relay awake, sends no NOTIFY, and holds the shard's committing lock until it ends.
  run(late.get(), "BEGIN");
  ASSERT_EQ(insert_row(late.get(), "k"), shard);
  run(late.get(), "SET CONSTRAINTS txmq_outbox_wake IMMEDIATE");

  // The relay falls asleep. With a short timeout its wait gives up (the relay then reads anyway,
  // and such a row waits for its poll), which shows the writer holds the lock.
  run(relay.get(), lock_sql("pg_advisory_unlock", producer::outbox_awake_lock_class, shard));
  auto gave_up = pg::exec(relay.get(), relay::detail::wait_for_committing_writers_sql({shard}, 50ms));
  ASSERT_FALSE(gave_up);
  EXPECT_EQ(pg::sqlstate(gave_up.error()), "55P03") << gave_up.error();

  // With a long one it waits, queued behind the writer.
  ASSERT_EQ(PQsendQuery(relay.get(), relay::detail::wait_for_committing_writers_sql({shard}, 20s).c_str()), 1);
  ASSERT_TRUE(eventually([&] { return advisory_locks(other.get(), producer::outbox_committing_lock_class, "NOT granted") == 1; }));
  // Meanwhile another writer's commit neither waits nor stays silent: it notifies.
  ASSERT_EQ(insert_row(other.get(), "k"), shard);
  EXPECT_EQ(l.until(shard), std::vector<std::string>{std::to_string(shard)});

  // The late writer commits; the relay's wait ends, and its next read sees the row.
  PQconsumeInput(relay.get());
  ASSERT_EQ(PQisBusy(relay.get()), 1) << "the relay's wait ended before the writer did";
  run(late.get(), "COMMIT");
  while (PGresult* r = PQgetResult(relay.get())) {  // blocks until the wait ends
    EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQresultErrorMessage(r);
    PQclear(r);
  }
  auto rows = pg::exec(relay.get(), "SELECT count(*) FROM txmq_outbox WHERE shard = " + std::to_string(shard));
  ASSERT_TRUE(rows);
  EXPECT_STREQ(PQgetvalue(rows.value().get(), 0, 0), "2");
}

// A 2-shard outbox, a broker with topic "t" (2 partitions), and a relay holding both shards.
struct relay_setup : wake_db {
  relay_setup(const std::string& name, const std::string& poll_interval)
      : wake_db(name), admin(admin_of(started(b))),
        relay({"--pg", db, "--broker", b.address(), "--relay-id", name, "--poll-interval", poll_interval}) {
    if (!admin.create_topic({"t", 2})) throw std::runtime_error("create topic t");
    relay.start();
    if (!eventually([&] { return shards_held(db) == 2; }, 20s)) throw std::runtime_error("no shards held\n" + relay.log());
  }
  static broker_process& started(broker_process& p) {
    p.start();
    return p;
  }
  broker_process b;
  client::admin admin;
  relay_process relay;
};

TEST(outbox_wake_relay, the_relay_reads_on_its_own_while_rows_come_and_a_notify_wakes_it_after) {
  // An hour between polls: rows after the stream are published only if a NOTIFY wakes the relay.
  relay_setup setup("wake_relay", "1h");
  auto& relay = setup.relay;
  auto& admin = setup.admin;

  // One row per commit until the relay holds its awake locks (it reads on its own: writers stop
  // notifying), at most 20,000 rows.
  auto watch = connect_to(setup.db);
  int rows = 0;
  bool awake = false;
  for (; rows < 20000 && !awake; rows += 10) {
    for (int i = 0; i < 10; ++i) insert_row(setup.conn.get(), "k" + std::to_string(rows + i));
    // Both while rows come (the relay falls asleep ~7 ms after they stop): its locks and its gauge.
    awake = awake_locks(watch.get()) == 2 &&
            metric(http_get(relay.http_port(), "/metrics"), "txmq_relay_shards_awake") == 2.0;
  }
  EXPECT_TRUE(awake) << rows << " rows\n" << relay.log();

  // The rows stop: everything is published, and the relay falls asleep.
  EXPECT_TRUE(eventually([&] { return scalar(setup.db, "SELECT count(*) FROM txmq_outbox") == "0"; }, 30s)) << relay.log();
  EXPECT_TRUE(eventually([&] { return awake_locks(watch.get()) == 0; }, 20s)) << relay.log();
  EXPECT_TRUE(eventually([&] { return metric(http_get(relay.http_port(), "/metrics"), "txmq_relay_shards_awake") == 0.0; }));

  // A lone row: its commit notifies, and the relay publishes it.
  insert_row(setup.conn.get(), "lone");
  ++rows;
  EXPECT_TRUE(eventually([&] { return scalar(setup.db, "SELECT count(*) FROM txmq_outbox") == "0"; }, 20s)) << relay.log();
  auto t = admin.describe_topic("t");
  ASSERT_TRUE(t) << t.error();
  std::uint64_t stored = 0;
  for (const auto& p : t.value().partition_info()) stored += p.end_offset() - p.start_offset();
  EXPECT_EQ(stored, static_cast<std::uint64_t>(rows));
  EXPECT_EQ(relay.stop(), 0) << relay.log();
}

// The case the wait cannot cover: a writer that checks at its insert (SET CONSTRAINTS ...
// IMMEDIATE), finds the relay awake and keeps its transaction open past the relay's 100 ms wait.
// The relay counts the timeout, and the row comes with the poll.
TEST(outbox_wake_relay, a_writer_holding_its_check_past_the_wait_is_counted_and_its_row_polled) {
  relay_setup setup("wake_held", "500ms");
  auto& relay = setup.relay;
  auto watch = connect_to(setup.db);
  auto held = connect_to(setup.db);
  const std::string held_pid = PQgetvalue(pg::exec(held.get(), "SELECT pg_backend_pid()").value().get(), 0, 0);
  bool checked_awake = false;
  for (int rows = 0; rows < 20000 && !checked_awake; rows += 10) {
    for (int i = 0; i < 10; ++i) insert_row(setup.conn.get(), "k" + std::to_string(rows + i));
    if (awake_locks(watch.get()) != 2) continue;
    run(held.get(), "BEGIN");
    insert_row(held.get(), "held");
    run(held.get(), "SET CONSTRAINTS txmq_outbox_wake IMMEDIATE");
    // Found awake: the writer holds no awake lock of its own (it would, had it found the relay asleep).
    checked_awake = advisory_locks(watch.get(), producer::outbox_awake_lock_class, "pid = " + held_pid) == 0;
    if (!checked_awake) run(held.get(), "ROLLBACK");
  }
  ASSERT_TRUE(checked_awake) << relay.log();
  const auto timeouts = [&] { return metric(http_get(relay.http_port(), "/metrics"), "txmq_relay_sleep_wait_timeouts_total"); };
  EXPECT_TRUE(eventually([&] { return timeouts() >= 1.0; }, 20s)) << relay.log();
  EXPECT_TRUE(eventually([&] { return scalar(setup.db, "SELECT count(*) FROM txmq_outbox") == "0"; }, 20s)) << relay.log();
  run(held.get(), "COMMIT");  // no NOTIFY: it found the relay awake
  EXPECT_TRUE(eventually([&] { return scalar(setup.db, "SELECT count(*) FROM txmq_outbox") == "0"; }, 20s)) << relay.log();
  EXPECT_EQ(relay.stop(), 0) << relay.log();
}

}  // namespace
}  // namespace txmq::test
