// The outbox relay through pauses and PostgreSQL failures (docs/operations.md): a relay frozen
// with SIGSTOP loses its shards to the other relay (--stale-after) and, thawed, publishes
// nothing twice beyond what the broker's dedupe absorbs; PostgreSQL frozen (postmaster and
// backends SIGSTOPped) or stopped under the relays: /healthz 503 and txmq_relay_pg_healthy 0
// with the reason, one error line and one recovery line, and every committed row consumed once
// through pg_inbox, none invented. Each test prints a FAULT-COUNTS line.

#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <stop_token>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "admin_of.h"
#include "broker_process.h"
#include "eventually.h"
#include "fault_support.h"
#include "outbox_support.h"
#include "pg_cluster.h"
#include "raw_client.h"
#include "relay_process.h"
#include "txmq/client/admin.h"
#include "txmq/consumer/consumer.h"
#include "txmq/consumer/pg_inbox.h"
#include "txmq/producer/pg_schema.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;
using testing::HasSubstr;

// A short --stale-after, allowed by a short publish timeout and back-off.
std::vector<std::string> relay_args(const std::string& db, const broker_process& b, const std::string& id) {
  return {"--pg", db, "--broker", b.address(), "--relay-id", id, "--poll-interval", "200ms", "--publish-timeout", "1s",
          "--backoff-max", "500ms", "--stale-after", "3s"};
}

// Everything a relay fault test runs: a database with the outbox, a broker and its topic,
// a writer inserting committed rows, and a consumer recording each row once through pg_inbox.
class relay_world {
 public:
  // before_start runs on the broker before it starts (e.g. a tmpfs on its data directory).
  relay_world(const std::string& name, int shards, std::vector<std::string> broker_args = {},
              const std::function<void(broker_process&)>& before_start = {})
      : db_(shared_pg_cluster().create_database(name)), broker_(with_defaults(std::move(broker_args))) {
    {
      auto conn = connect_to(db_);
      if (auto s = producer::install_schema(conn.get(), shards); !s) throw std::runtime_error(s.error().message);
      auto t = pg::exec(conn.get(), "CREATE TABLE consumed (n bigserial, id uuid NOT NULL)");
      if (!t) throw std::runtime_error(t.error().message);
    }
    if (before_start) before_start(broker_);
    broker_.start();
    client::admin admin = admin_of(broker_);
    if (auto r = admin.create_topic({"outbox", 4}); !r) throw std::runtime_error(r.error().message);
  }
  ~relay_world() { stop(); }

  // Starts the writer (10 rows a transaction, ids kept once committed) and the consumer.
  void run() {
    writer_ = std::thread([this] {
      pg::connection_ptr conn;
      while (writing_.load()) {
        if (!conn || PQstatus(conn.get()) != CONNECTION_OK) {
          auto c = pg::connect(db_);
          if (!c) {
            std::this_thread::sleep_for(50ms);  // PostgreSQL away: the writer's retry pace
            continue;
          }
          conn = std::move(c).value();
        }
        // One statement, so it commits or not as a whole; a lost connection during it may
        // have committed: the ids are then found by the final check (never counted as lost).
        auto r = pg::exec(conn.get(),
                          "INSERT INTO txmq_outbox (topic, key, payload) SELECT 'outbox', 'k' || (i % 7), 'x' "
                          "FROM generate_series(1, 10) i RETURNING id");
        if (!r) {
          conn.reset();
          continue;
        }
        std::lock_guard lock(mu_);
        for (int i = 0; i < PQntuples(r.value().get()); ++i) committed_.insert(PQgetvalue(r.value().get(), i, 0));
        std::this_thread::sleep_for(5ms);  // the writers' pace, about 2,000 rows a second
      }
    });
    consumer::consumer_options co;
    co.connection.address = broker_.address();
    co.group = "relay-fault";
    co.topics = {"outbox"};
    co.concurrency = 4;
    co.max_wait = 200ms;
    co.nack_delay = 200ms;
    consumer_ = std::make_unique<consumer::consumer>(co);
    inbox_ = std::make_unique<consumer::pg_inbox>(db_, consumer::pg_inbox_options{.consumer = "relay-fault"});
    consumer_thread_ = std::thread([this] {
      auto handler = inbox_->wrap([](PGconn* tx, const consumer::delivery& d) -> client::result<void> {
        auto r = pg::exec(tx, "INSERT INTO consumed (id) VALUES ($1)", {d.id().to_string()});
        if (!r) return r.error();
        return outcome::success();
      });
      while (!stop_consumer_.stop_requested()) (void)consumer_->run(handler, stop_consumer_.get_token());
    });
  }

  std::size_t committed() {
    std::lock_guard lock(mu_);
    return committed_.size();
  }

  void stop_writing() {
    writing_ = false;
    if (writer_.joinable()) writer_.join();
  }

  // Waits until the outbox is empty and every committed row was consumed; prints and checks the
  // counts. dedupe = the broker's txmq_duplicates_total (rows published again and absorbed).
  void check(const std::string& test, const std::string& extra = "") {
    stop_writing();
    const bool drained = eventually([&] { return scalar(db_, "SELECT count(*) FROM txmq_outbox") == "0"; }, 60s);
    std::set<std::string> committed;
    {
      std::lock_guard lock(mu_);
      committed = committed_;
    }
    const bool all = eventually(
        [&] { return scalar(db_, "SELECT count(DISTINCT id) FROM consumed") == std::to_string(committed.size()); }, 60s);
    stop();
    // Rows whose INSERT answer was lost with its connection are in `consumed` but were not
    // counted as committed: sent = everything the outbox ever held that the writer wrote.
    std::set<std::string> consumed;
    std::size_t consumed_rows = 0;
    {
      auto conn = connect_to(db_);
      auto r = pg::exec(conn.get(), "SELECT id FROM consumed");
      if (r) {
        consumed_rows = static_cast<std::size_t>(PQntuples(r.value().get()));
        for (std::size_t i = 0; i < consumed_rows; ++i) consumed.insert(PQgetvalue(r.value().get(), static_cast<int>(i), 0));
      }
    }
    const auto counts = count_outcome(committed, committed, consumed);
    const double dedupe = metric(http_get(broker_.http_port(), "/metrics"), "txmq_duplicates_total");
    print_fault_counts(test, counts.acknowledged, counts.consumed, counts.lost, counts.invented,
                       "consumed_twice=" + std::to_string(consumed_rows - consumed.size()) +
                           " broker_dedupe_absorbed=" + std::to_string(static_cast<long long>(dedupe)) +
                           (extra.empty() ? "" : " " + extra));
    EXPECT_TRUE(drained) << "outbox left " << scalar(db_, "SELECT count(*) FROM txmq_outbox") << " rows, shards held "
                         << shards_held(db_) << "; " << scalar(db_, "SELECT string_agg(shard || ':' || seq || ':' || id, ' ') FROM txmq_outbox");
    EXPECT_TRUE(all);
    EXPECT_EQ(counts.lost, 0u);
    // Rows committed with a lost answer are the only ones consumed but not counted; a
    // handful at most (one statement of 10 per PostgreSQL outage).
    EXPECT_LE(counts.invented, 10u);
    EXPECT_EQ(consumed_rows, consumed.size()) << "pg_inbox ran a handler twice";
    EXPECT_GT(counts.acknowledged, 0u);
  }

  void stop() {
    stop_writing();
    stop_consumer_.request_stop();
    if (consumer_thread_.joinable()) consumer_thread_.join();
  }

  [[nodiscard]] const std::string& db() const { return db_; }
  broker_process& broker() { return broker_; }

 private:
  static std::vector<std::string> with_defaults(std::vector<std::string> args) {
    // Handlers fail while PostgreSQL is away: enough attempts that nothing is dead-lettered.
    args.insert(args.begin(), {"--ack-deadline", "5s", "--retry-schedule", "200ms", "--max-attempts", "100000"});
    return args;
  }

  std::string db_;
  broker_process broker_;
  std::mutex mu_;
  std::set<std::string> committed_;
  std::atomic<bool> writing_{true};
  std::thread writer_;
  std::unique_ptr<consumer::consumer> consumer_;
  std::unique_ptr<consumer::pg_inbox> inbox_;
  std::stop_source stop_consumer_;
  std::thread consumer_thread_;
};

TEST(relay_pause, a_frozen_relay_loses_its_shards_and_publishes_nothing_twice_after_it_thaws) {
  const auto pause = fault_pause(10s);
  relay_world w("relay_frozen", 8);
  relay_process a(relay_args(w.db(), w.broker(), "frozen-a"));
  relay_process b(relay_args(w.db(), w.broker(), "frozen-b"));
  a.start();
  b.start();
  ASSERT_TRUE(eventually([&] { return shards_held(w.db(), "frozen-a") == 4 && shards_held(w.db(), "frozen-b") == 4; }, 30s))
      << a.log() << b.log();
  w.run();
  ASSERT_TRUE(eventually([&] { return w.committed() >= 1000; }, 30s));

  const auto frozen_at = std::chrono::steady_clock::now();
  bool moved = false;
  std::chrono::milliseconds moved_after{0};
  {
    frozen stopped({a.pid()});
    // Within --stale-after (3s) and a rebalance, b ends a's session and takes every shard.
    moved = eventually([&] { return shards_held(w.db(), "frozen-b") == 8; }, pause);
    moved_after = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - frozen_at);
    while (std::chrono::steady_clock::now() < frozen_at + pause) {
      std::this_thread::sleep_for(100ms);  // the fault itself: a stays frozen for the whole pause
    }
  }
  EXPECT_TRUE(moved) << b.log();
  EXPECT_THAT(b.log(), HasSubstr("relay frozen-a sent no heartbeat for"));
  // Thawed, a finds its session ended, reconnects and takes its share again.
  EXPECT_TRUE(eventually([&] { return shards_held(w.db(), "frozen-a") == 4 && shards_held(w.db(), "frozen-b") == 4; }, 30s))
      << a.log() << b.log();
  EXPECT_THAT(a.log(), HasSubstr("PostgreSQL unavailable"));
  const auto metrics = http_get(a.http_port(), "/metrics");
  const double dropped = metric(metrics, "txmq_relay_stale_rounds_dropped_total");
  w.check("relay_sigstop", "pause_ms=" + std::to_string(pause.count()) + " shards_moved_after_ms=" +
                               std::to_string(moved_after.count()) + " stale_rounds_dropped=" +
                               std::to_string(static_cast<long long>(dropped)));
  EXPECT_EQ(a.stop(), 0) << a.log();
  EXPECT_EQ(b.stop(), 0) << b.log();
}

TEST(relay_pause, postgresql_frozen_under_the_relays_is_reported_and_nothing_is_lost) {
  const auto pause = fault_pause(10s);
  relay_world w("relay_pg_frozen", 8);
  relay_process a(relay_args(w.db(), w.broker(), "pgfrozen-a"));
  relay_process b(relay_args(w.db(), w.broker(), "pgfrozen-b"));
  a.start();
  b.start();
  ASSERT_TRUE(eventually([&] { return shards_held(w.db()) == 8 && a.http_port() != 0; }, 30s)) << a.log() << b.log();
  w.run();
  ASSERT_TRUE(eventually([&] { return w.committed() >= 1000; }, 30s));

  std::string health, metrics;
  const auto frozen_at = std::chrono::steady_clock::now();
  {
    frozen stopped(process_tree(shared_pg_cluster().postmaster_pid()));
    // A statement unanswered for 5 s makes the relay unhealthy, while it waits.
    EXPECT_TRUE(eventually(
        [&] {
          health = http_get(a.http_port(), "/healthz");
          return health.find(" 503 ") != std::string::npos;
        },
        pause));
    metrics = http_get(a.http_port(), "/metrics");
    while (std::chrono::steady_clock::now() < frozen_at + pause) {
      std::this_thread::sleep_for(100ms);  // the fault itself: PostgreSQL stays frozen for the whole pause
    }
  }
  EXPECT_THAT(health, HasSubstr("PostgreSQL has not answered a statement for"));
  EXPECT_EQ(metric(metrics, "txmq_relay_pg_healthy"), 0) << metrics;
  EXPECT_TRUE(eventually([&] { return http_get(a.http_port(), "/healthz").find(" 200 ") != std::string::npos; }, 30s))
      << a.log();
  EXPECT_EQ(metric(http_get(a.http_port(), "/metrics"), "txmq_relay_pg_healthy"), 1);
  // Logged as the slow call ends, just after /healthz can read it as ended.
  EXPECT_TRUE(eventually([&] { return a.log().find("ms to answer a statement") != std::string::npos; }, 10s)) << a.log();
  // Both relays kept their sessions: nobody ended anybody's (every heartbeat was equally old).
  EXPECT_THAT(a.log() + b.log(), testing::Not(HasSubstr("sent no heartbeat")));
  w.check("postgresql_sigstop", "pause_ms=" + std::to_string(pause.count()));
  EXPECT_EQ(a.stop(), 0) << a.log();
  EXPECT_EQ(b.stop(), 0) << b.log();
}

TEST(relay_pause, postgresql_stopped_and_started_under_the_relay_is_said_once_and_recovered) {
  relay_world w("relay_pg_stopped", 4);
  relay_process a(relay_args(w.db(), w.broker(), "pgstop-a"));
  a.start();
  ASSERT_TRUE(eventually([&] { return shards_held(w.db()) == 4 && a.http_port() != 0; }, 30s)) << a.log();
  w.run();
  ASSERT_TRUE(eventually([&] { return w.committed() >= 1000; }, 30s));

  shared_pg_cluster().stop();
  std::string health;
  EXPECT_TRUE(eventually(
      [&] {
        health = http_get(a.http_port(), "/healthz");
        return health.find(" 503 ") != std::string::npos;
      },
      20s));
  EXPECT_THAT(health, HasSubstr("PostgreSQL unavailable"));
  EXPECT_EQ(metric(http_get(a.http_port(), "/metrics"), "txmq_relay_pg_healthy"), 0);
  // Retried with back-off while it is down (the relay keeps running).
  const auto errors_before = metric(http_get(a.http_port(), "/metrics"), "txmq_relay_database_errors_total");
  EXPECT_TRUE(eventually(
      [&] { return metric(http_get(a.http_port(), "/metrics"), "txmq_relay_database_errors_total") >= errors_before + 2; },
      10s));
  shared_pg_cluster().start();
  EXPECT_TRUE(eventually([&] { return http_get(a.http_port(), "/healthz").find(" 200 ") != std::string::npos; }, 30s))
      << a.log();
  // One error line for the outage however long it lasted (its text unchanged), one recovery.
  const std::string log = a.log();
  std::size_t unavailable = 0;
  for (auto at = log.find("PostgreSQL unavailable"); at != std::string::npos; at = log.find("PostgreSQL unavailable", at + 1)) {
    ++unavailable;
  }
  // One line per distinct error text of the outage, none per retry: the lost session, then
  // what a connect meets while the server shuts down ("shutting down", "server closed the
  // connection unexpectedly"), then "Connection refused" (4 in a loaded run, 14:33 2026-11-27;
  // 5 once in session 15, when a text came back after another: now each text is said once).
  EXPECT_LE(unavailable, 4u) << log;
  EXPECT_THAT(log, HasSubstr("after it was unavailable"));
  w.check("postgresql_stop_start", "error_lines=" + std::to_string(unavailable));
  EXPECT_EQ(a.stop(), 0) << a.log();
}

// The broker's disk below min_free_disk_bytes (a 64 MiB tmpfs, 100 MiB minimum): it answers
// the relay's batches STORE_FULL; the relay keeps the rows, backs off, says so once, and
// publishes them when the tmpfs grows (the broker resumes by itself).
TEST(relay_pause, a_broker_answering_store_full_keeps_the_rows_in_the_outbox_until_it_takes_them) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
  std::unique_ptr<tmpfs_mount> disk;
  relay_world w("relay_store_full", 4, {"--min-free-disk-bytes", "100MiB"}, [&](broker_process& b) {
    disk = std::make_unique<tmpfs_mount>(b.data_dir(), "64m");
  });
  if (!disk->mounted()) GTEST_SKIP() << "cannot mount a tmpfs: " << disk->error();
  relay_process a(relay_args(w.db(), w.broker(), "full-a"));
  a.start();
  ASSERT_TRUE(eventually([&] { return shards_held(w.db()) == 4 && a.http_port() != 0; }, 30s)) << a.log();
  w.run();
  std::string health;
  EXPECT_TRUE(eventually(
      [&] {
        health = http_get(a.http_port(), "/healthz");
        return health.find(" 503 ") != std::string::npos;
      },
      20s))
      << a.log();
  EXPECT_THAT(health, HasSubstr("broker unavailable"));
  EXPECT_THAT(health, HasSubstr("STORE_FULL"));
  // Retried with back-off, every row kept.
  EXPECT_TRUE(eventually(
      [&] { return metric(http_get(a.http_port(), "/metrics"), "txmq_relay_publish_failures_total") >= 3; }, 20s));
  EXPECT_EQ(metric(http_get(a.http_port(), "/metrics"), "txmq_relay_rows_published_total"), 0);
  EXPECT_NE(scalar(w.db(), "SELECT count(*) FROM txmq_outbox"), "0");

  ASSERT_TRUE(disk->resize("512m"));
  EXPECT_TRUE(eventually([&] { return http_get(a.http_port(), "/healthz").find(" 200 ") != std::string::npos; }, 30s))
      << a.log();
  EXPECT_THAT(a.log(), HasSubstr("publishing to the broker works again"));
  std::size_t error_lines = 0;
  const std::string log = a.log();
  for (auto at = log.find("publishing to the broker"); at != std::string::npos; at = log.find("publishing to the broker", at + 1)) {
    error_lines += log.compare(at, 31, "publishing to the broker works") == 0 ? 0 : 1;
  }
  w.check("relay_broker_store_full", "failed_publish_lines=" + std::to_string(error_lines));
  EXPECT_EQ(a.stop(), 0) << a.log();
}

}  // namespace
}  // namespace txmq::test
