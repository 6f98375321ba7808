// The outbox route end to end (docs/semantics.md §4): a real PostgreSQL, the real broker, real txmq-relay
// processes. outbox_relay.*: plain-SQL rows, connection loss and shard takeover, clean stop
// (ctest label pg). outbox_relay_fault.*: writers, rollbacks, relays and the broker SIGKILLed,
// PostgreSQL restarted, every committed row consumed exactly once through pg_inbox in per-key
// seq order (label fault).

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <stop_token>
#include <thread>

#include <gtest/gtest.h>

#include "broker_process.h"
#include "cli_runner.h"
#include "eventually.h"
#include "outbox_support.h"
#include "pg_cluster.h"
#include "relay_process.h"
#include "txmq/client/admin.h"
#include "txmq/pg/pg.h"
#include "txmq/consumer/consumer.h"
#include "txmq/consumer/pg_inbox.h"
#include "txmq/producer/outbox_writer.h"
#include "txmq/producer/pg_schema.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> relay_args(const std::string& conninfo, const broker_process& b, const std::string& id) {
  return {"--pg", conninfo, "--broker", b.address(), "--relay-id", id, "--poll-interval", "200ms", "--publish-timeout", "3s"};
}

void create_topic(const broker_process& b, const std::string& topic) {
  client::connection_options o;
  o.address = b.address();
  client::admin admin(std::make_shared<client::connection>(o));
  auto r = admin.create_topic({topic, 4});
  ASSERT_TRUE(r || r.error().is(protocol::errc::topic_exists)) << r.error();
}

// A new database with the txmq schema of `shards` shards, a started broker, and `topic` on it.
struct outbox_setup {
  outbox_setup(const std::string& name, int shards, const std::string& topic, std::vector<std::string> broker_args = {})
      : db(shared_pg_cluster().create_database(name)), conn(connect_to(db)), b(std::move(broker_args)) {
    auto schema = producer::install_schema(conn.get(), shards);
    if (!schema) throw std::runtime_error(schema.error().message);
    b.start();
    create_topic(b, topic);
  }
  std::string db;
  pg::connection_ptr conn;
  broker_process b;
};

TEST(outbox_relay, rows_from_a_plain_sql_insert_are_published_and_deleted) {
  outbox_setup setup("relay_plain", 4, "plain");
  const auto& db = setup.db;
  auto& conn = setup.conn;
  auto& b = setup.b;
  relay_process relay(relay_args(db, b, "plain-1"));
  relay.start();
  ASSERT_TRUE(eventually([&] { return shards_held(db) == 4; }, 20s)) << relay.log();

  // No library: what any language's driver would send.
  ASSERT_TRUE(pg::exec(conn.get(),
                       "INSERT INTO txmq_outbox (topic, key, headers, payload) SELECT 'plain', 'k' || (i % 5), "
                       "jsonb_build_object('n', i::text), convert_to('body-' || i, 'UTF8') FROM generate_series(1, 60) i"));
  std::set<std::string> ids;
  auto rows = pg::exec(conn.get(), "SELECT id FROM txmq_outbox");
  ASSERT_TRUE(rows);
  for (int i = 0; i < PQntuples(rows.value().get()); ++i) ids.insert(PQgetvalue(rows.value().get(), i, 0));
  ASSERT_EQ(ids.size(), 60u);

  consumer::consumer_options co;
  co.connection.address = b.address();
  co.group = "plain-readers";
  co.topics = {"plain"};
  consumer::consumer c(co);
  std::set<std::string> seen;
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (seen.size() < ids.size() && std::chrono::steady_clock::now() < until) {
    auto got = c.fetch(100, 500ms);
    ASSERT_TRUE(got) << got.error();
    std::vector<consumer::delivery_ref> refs;
    for (const auto& d : got.value()) {
      seen.insert(d.id().to_string());
      EXPECT_EQ(d.message.body(), "body-" + d.message.headers().at("n"));
      refs.push_back(d.ref());
    }
    if (!refs.empty()) {
      ASSERT_TRUE(c.ack(refs));
    }
  }
  EXPECT_EQ(seen, ids) << relay.log();
  EXPECT_TRUE(eventually([&] { return scalar(db, "SELECT count(*) FROM txmq_outbox") == "0"; }, 10s));

  // `txmq outbox status`: every shard empty and held by this relay, which says it is connected.
  EXPECT_EQ(txmq(b, {"outbox", "init", "--pg", db, "--shards", "4"}).status, 0);  // again: idempotent
  ASSERT_TRUE(eventually([&] { return scalar(db, "SELECT count(*) FROM txmq_relay") == "1"; }, 10s));
  auto status = run_txmq({"outbox", "status", "--pg", db, "--json"});
  ASSERT_EQ(status.status, 0) << status;
  int shard_lines = 0, relay_lines = 0;
  std::istringstream lines(status.out);
  for (std::string line; std::getline(lines, line);) {
    const auto o = json::parse(line).as_object();
    if (o.contains("shard")) {
      ++shard_lines;
      EXPECT_EQ(o.at("waiting").as_int64(), 0) << line;
      EXPECT_EQ(o.at("relay").as_string(), "plain-1") << line;
    } else {
      ++relay_lines;
      EXPECT_EQ(o.at("relay").as_string(), "plain-1") << line;
      EXPECT_TRUE(o.at("connected").as_bool()) << line;
      EXPECT_EQ(o.at("shards").as_int64(), 4) << line;
    }
  }
  EXPECT_EQ(shard_lines, 4) << status;
  EXPECT_EQ(relay_lines, 1) << status;
  const auto table = txmq(b, {"outbox", "status", "--pg", db});
  EXPECT_EQ(fields(table.out.substr(0, table.out.find('\n'))), (std::vector<std::string>{"SHARD", "WAITING", "OLDEST", "RELAY"}))
      << table;

  // SIGTERM: exit 0, shards released, its txmq_relay row gone.
  EXPECT_EQ(relay.stop(), 0) << relay.log();
  EXPECT_EQ(shards_held(db), 0);
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM txmq_relay"), "0");
}

// A TOML basic string (the conninfo holds spaces, and may hold quotes or backslashes).
std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// txmq-relay --config FILE (what txmq-relay@NAME.service runs): the settings come from the file,
// a flag given beside it wins, and rows are published.
TEST(outbox_relay, settings_from_a_toml_config_file_and_flags_over_it) {
  outbox_setup setup("relay_toml", 4, "toml");
  const auto dir = std::filesystem::temp_directory_path() / ("txmq-relay-toml-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "relay-test.toml";
  {
    std::ofstream out(file);
    out << "# as /etc/txmq/relay-NAME.toml\n"
        << "pg = " << toml_string(setup.db) << "\n"
        << "broker = " << toml_string(setup.b.address()) << "\n"
        << "relay_id = \"from-file\"\n"
        << "poll_interval = \"200ms\"\n"
        << "publish_timeout = \"3s\"\n"
        << "batch = 50\n"
        << "log_level = \"warn\"\n";
  }
  // The file's log_level (warn) would hide the INFO lines; the flag brings them back.
  relay_process relay({"--config", file.string(), "--log-level", "info"});
  relay.start();
  ASSERT_TRUE(eventually([&] { return shards_held(setup.db) == 4; }, 20s)) << relay.log();
  EXPECT_TRUE(eventually([&] { return scalar(setup.db, "SELECT string_agg(relay_id, ',') FROM txmq_relay") == "from-file"; }, 10s))
      << scalar(setup.db, "SELECT string_agg(relay_id, ',') FROM txmq_relay");
  EXPECT_TRUE(eventually([&] { return relay.http_port() != 0; }, 10s)) << "no INFO line: --log-level did not win over the file\n"
                                                                        << relay.log();

  ASSERT_TRUE(pg::exec(setup.conn.get(),
                       "INSERT INTO txmq_outbox (topic, key, headers, payload) VALUES ('toml', 'k', '{}', "
                       "convert_to('from a relay configured by TOML', 'UTF8'))"));
  consumer::consumer_options co;
  co.connection.address = setup.b.address();
  co.group = "toml-readers";
  co.topics = {"toml"};
  consumer::consumer c(co);
  std::vector<std::string> bodies;
  ASSERT_TRUE(eventually([&] {
    auto got = c.fetch(10, 200ms);
    if (!got) return false;
    std::vector<consumer::delivery_ref> refs;
    for (const auto& d : got.value()) {
      bodies.emplace_back(d.message.body());
      refs.push_back(d.ref());
    }
    if (!refs.empty()) (void)c.ack(refs);
    return !bodies.empty();
  }, 20s)) << relay.log();
  EXPECT_EQ(bodies, std::vector<std::string>{"from a relay configured by TOML"});
  EXPECT_TRUE(eventually([&] { return scalar(setup.db, "SELECT count(*) FROM txmq_outbox") == "0"; }, 10s));
  EXPECT_EQ(relay.stop(), 0) << relay.log();
  std::filesystem::remove_all(dir);
}

TEST(outbox_relay, a_relay_cut_off_from_the_database_loses_its_shards_to_another) {
  outbox_setup setup("relay_cut", 8, "cut");
  const auto& db = setup.db;
  auto& conn = setup.conn;
  auto& b = setup.b;
  relay_process a(relay_args(db, b, "cut-a"));
  relay_process other(relay_args(db, b, "cut-b"));
  a.start();
  other.start();
  ASSERT_TRUE(eventually([&] { return shards_held(db, "cut-a") > 0 && shards_held(db, "cut-b") > 0 && shards_held(db) == 8; }, 20s))
      << a.log() << other.log();

  // Cut relay a off (its backends terminated as soon as they appear) until b holds every shard
  // and has published rows inserted meanwhile into all of them.
  std::atomic<bool> cutting{true};
  std::thread cutter([&] {
    auto admin = connect_to(db);
    while (cutting.load()) {
      (void)pg::exec(admin.get(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'txmq-relay:cut-a'");
      std::this_thread::sleep_for(20ms);  // the cut's own pace, not a synchronisation
    }
  });
  EXPECT_TRUE(eventually([&] { return shards_held(db, "cut-b") == 8; }, 15s)) << other.log();
  EXPECT_EQ(shards_held(db, "cut-a"), 0);
  ASSERT_TRUE(pg::exec(conn.get(),
                       "INSERT INTO txmq_outbox (topic, key, payload) SELECT 'cut', 'k' || i, 'x' FROM generate_series(1, 40) i"));
  EXPECT_TRUE(eventually([&] { return scalar(db, "SELECT count(*) FROM txmq_outbox") == "0"; }, 15s)) << other.log();
  cutting = false;
  cutter.join();

  // Back in touch, a takes its share again.
  EXPECT_TRUE(eventually([&] { return shards_held(db, "cut-a") == 4 && shards_held(db, "cut-b") == 4; }, 20s))
      << a.log() << other.log();
  EXPECT_NE(a.log().find("PostgreSQL unavailable"), std::string::npos) << a.log();
  EXPECT_EQ(a.stop(), 0);
  EXPECT_TRUE(eventually([&] { return shards_held(db, "cut-b") == 8; }, 10s));
  EXPECT_EQ(other.stop(), 0);
}

// A shard in a backlog is read from the seq its relay last deleted, not from its start. A row
// whose transaction took its seq before that point but commits after it must still be published
// (the first read after its commit starts below it: outbox-relay/README.md, "The order rule").
TEST(outbox_relay, a_row_committed_late_below_a_backlogs_read_point_is_still_published) {
  outbox_setup setup("relay_late", 1, "late");
  const auto& db = setup.db;
  auto& b = setup.b;
  auto late = connect_to(db);
  ASSERT_TRUE(pg::exec(late.get(), "BEGIN"));
  ASSERT_TRUE(pg::exec(late.get(), "INSERT INTO txmq_outbox (topic, key, payload) VALUES ('late', 'k-late', 'late')"));
  ASSERT_TRUE(pg::exec(setup.conn.get(),
                       "INSERT INTO txmq_outbox (topic, key, payload) SELECT 'late', 'k' || (i % 7), 'x' FROM generate_series(1, 20000) i"));
  auto args = relay_args(db, b, "late-1");
  args.insert(args.end(), {"--batch", "10"});
  relay_process relay(args);
  relay.start();
  // The relay is past the late row's seq (every committed row has a higher one) and still has a
  // backlog, so its reads start at what it deleted.
  ASSERT_TRUE(eventually([&] { return std::stoll(scalar(db, "SELECT count(*) FROM txmq_outbox")) <= 19000; }, 30s)) << relay.log();
  ASSERT_TRUE(pg::exec(late.get(), "COMMIT"));
  const auto left = std::stoll(scalar(db, "SELECT count(*) FROM txmq_outbox"));
  EXPECT_GT(left, 1) << "the backlog drained before the late commit: the test did not exercise a read past deleted rows";
  // Published (acked, then deleted), and with it everything else.
  EXPECT_TRUE(eventually([&] { return scalar(db, "SELECT count(*) FROM txmq_outbox") == "0"; }, 60s)) << relay.log();
  client::connection_options o;
  o.address = b.address();
  client::admin admin(std::make_shared<client::connection>(o));
  auto t = admin.describe_topic("late");
  ASSERT_TRUE(t) << t.error();
  std::uint64_t stored = 0;
  for (const auto& p : t.value().partition_info()) stored += p.end_offset() - p.start_offset();
  EXPECT_EQ(stored, 20001u);
  EXPECT_EQ(relay.stop(), 0) << relay.log();
}

TEST(outbox_relay, writer_needs_a_transaction_and_inbox_runs_a_handler_once_per_id) {
  const auto db = shared_pg_cluster().create_database("relay_inbox");
  auto conn = connect_to(db);
  ASSERT_TRUE(producer::install_schema(conn.get(), 4));

  // Outside BEGIN the writer refuses: a row committed alone would not follow the business rows.
  producer::outbox_message m{"t", "k", {{"h", "v"}}, "body", std::nullopt};
  auto alone = producer::outbox_writer(conn.get()).add(m);
  ASSERT_FALSE(alone);
  EXPECT_TRUE(alone.error().is(client::errc::invalid_argument));
  std::vector<producer::outbox_row> rows;
  ASSERT_TRUE(pg::in_transaction(conn.get(), [&](PGconn* tx) -> client::result<void> {
    auto r = producer::outbox_writer(tx).add(std::vector<producer::outbox_message>{m, m});
    if (!r) return r.error();
    rows = r.value();
    return outcome::success();
  }));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].id.version(), 7);
  EXPECT_LT(rows[0].seq, rows[1].seq);
  EXPECT_EQ(rows[0].shard, rows[1].shard);  // same key, same shard

  consumer::pg_inbox inbox(db, {.consumer = "c1", .retention = std::chrono::seconds(3600), .cleanup_interval = {}});
  consumer::delivery d;
  d.message.set_id(std::string(rows[0].id.raw()));
  int runs = 0;
  auto handler = [&](PGconn*, const consumer::delivery&) -> client::result<void> {
    ++runs;
    return outcome::success();
  };
  auto failing = [&](PGconn*, const consumer::delivery&) -> client::result<void> {
    return client::error(client::errc::invalid_argument, "handler failed");
  };
  EXPECT_FALSE(inbox.handle(d, failing));  // rolled back: no record, the redelivery runs again
  EXPECT_EQ(inbox.handle(d, handler).value(), consumer::inbox_outcome::handled);
  EXPECT_EQ(inbox.handle(d, handler).value(), consumer::inbox_outcome::duplicate);
  EXPECT_EQ(runs, 1);
  // Another consumer of the same database deduplicates on its own.
  consumer::pg_inbox other(db, {.consumer = "c2", .retention = std::chrono::seconds(3600), .cleanup_interval = {}});
  EXPECT_EQ(other.handle(d, handler).value(), consumer::inbox_outcome::handled);

  // Cleanup removes records older than the retention, and only this consumer's.
  ASSERT_TRUE(pg::exec(conn.get(), "UPDATE txmq_inbox SET received_at = now() - interval '2 hours'"));
  EXPECT_EQ(inbox.cleanup().value(), 1u);
  EXPECT_EQ(scalar(db, "SELECT consumer FROM txmq_inbox"), "c2");
}

// Writers commit (and roll back) business rows with outbox rows while relays and the broker are
// SIGKILLed and PostgreSQL restarts; a pg_inbox consumer records what it handled.
TEST(outbox_relay_fault, committed_rows_are_consumed_once_in_key_order_through_crashes) {
  auto& cluster = shared_pg_cluster();
  outbox_setup setup("relay_crash", 16, "orders", {"--ack-deadline", "2s", "--retry-schedule", "200ms"});
  const auto& db = setup.db;
  auto& b = setup.b;
  ASSERT_TRUE(pg::exec(setup.conn.get(),
                       "CREATE TABLE written (id uuid PRIMARY KEY, key text NOT NULL, seq bigint NOT NULL);"
                       "CREATE TABLE consumed (n bigserial, id uuid NOT NULL, key text NOT NULL)"));
  setup.conn.reset();  // PostgreSQL restarts under this test; it must not hold a dead session
  std::vector<std::unique_ptr<relay_process>> relays;
  for (int i = 0; i < 3; ++i) {
    relays.push_back(std::make_unique<relay_process>(relay_args(db, b, "crash-" + std::to_string(i))));
    relays.back()->start();
  }

  consumer::pg_inbox inbox(db, {.consumer = "crash"});
  consumer::consumer_options co;
  co.connection.address = b.address();
  co.group = "crash";
  co.topics = {"orders"};
  co.concurrency = 4;
  co.max_wait = 200ms;
  co.nack_delay = 200ms;
  consumer::consumer c(co);
  std::stop_source stop_consumer;
  std::thread consumer_thread([&] {
    auto handler = inbox.wrap([](PGconn* tx, const consumer::delivery& d) -> client::result<void> {
      auto r = pg::exec(tx, "INSERT INTO consumed (id, key) VALUES ($1, $2)", {d.id().to_string(), d.message.key()});
      if (!r) return r.error();
      return outcome::success();
    });
    while (!stop_consumer.stop_requested()) (void)c.run(handler, stop_consumer.get_token());
  });

  constexpr int writers = 4, per_writer = 5000;
  std::atomic<int> done_tx{0};
  std::atomic<int> committed_rows{0};
  std::vector<std::thread> writer_threads;
  for (int w = 0; w < writers; ++w) {
    writer_threads.emplace_back([&, w] {
      pg::connection_ptr conn;
      for (int i = 0; i < per_writer; ++i, ++done_tx) {
        const bool rollback = i % 4 == 3;
        std::vector<producer::outbox_message> msgs;
        for (int j = 0; j <= i % 3; ++j) {
          // Each writer owns its keys, and its transactions run one after the other: per key,
          // seq order is commit order.
          msgs.push_back({"orders", "w" + std::to_string(w) + "-" + std::to_string((i + j) % 20), {{"w", std::to_string(w)}},
                          std::string(64, 'a' + static_cast<char>(j)), std::nullopt});
        }
        std::string first_id;
        for (int attempt = 0; attempt < 200; ++attempt) {
          if (!conn || PQstatus(conn.get()) != CONNECTION_OK) {
            auto c2 = pg::connect(db);
            if (!c2) {
              std::this_thread::sleep_for(50ms);  // PostgreSQL restarting: retry pace
              continue;
            }
            conn = std::move(c2).value();
          }
          auto body = [&](PGconn* tx) -> client::result<void> {
            auto rows = producer::outbox_writer(tx).add(msgs);
            if (!rows) return rows.error();
            first_id = rows.value().front().id.to_string();
            for (std::size_t k = 0; k < rows.value().size(); ++k) {
              auto r = pg::exec(tx, "INSERT INTO written (id, key, seq) VALUES ($1, $2, $3)",
                                {rows.value()[k].id.to_string(), *msgs[k].key, std::to_string(rows.value()[k].seq)});
              if (!r) return r.error();
            }
            if (rollback) return client::error(client::errc::invalid_argument, "rolled back on purpose");
            return outcome::success();
          };
          auto r = pg::in_transaction(conn.get(), body);
          if (r) {
            committed_rows += static_cast<int>(msgs.size());
            break;
          }
          if (rollback && r.error().is(client::errc::invalid_argument)) break;
          // Failed: did it commit anyway (connection lost during COMMIT)? The written table
          // says, once the old session is gone.
          conn.reset();
          if (!first_id.empty()) {
            std::string found;
            for (int k = 0; k < 200 && found.empty(); ++k) {
              found = scalar(db, "SELECT count(*) FROM written WHERE id = '" + first_id + "'");
              if (found.empty()) std::this_thread::sleep_for(50ms);  // PostgreSQL restarting: retry pace
            }
            if (found == "1") {
              committed_rows += static_cast<int>(msgs.size());
              break;
            }
          }
          for (auto& m : msgs) m.id.reset();  // a fresh attempt, fresh ids
          first_id.clear();
        }
      }
    });
  }

  // Chaos while the writers run: relays and the broker SIGKILLed at random moments, one
  // PostgreSQL restart half-way.
  std::mt19937 rng(20261126);
  int relay_kills = 0, broker_kills = 0;
  bool pg_restarted = false;
  while (done_tx.load() < writers * per_writer) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng() % 600));  // chaos pace
    if (!pg_restarted && done_tx.load() > writers * per_writer / 2) {
      cluster.restart();
      pg_restarted = true;
      continue;
    }
    if (rng() % 3 == 0) {
      b.kill();
      b.start();
      ++broker_kills;
    } else {
      auto& r = *relays[rng() % relays.size()];
      r.kill();
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 300));  // chaos pace
      r.start();
      ++relay_kills;
    }
  }
  for (auto& t : writer_threads) t.join();
  if (!pg_restarted) {
    cluster.restart();
    pg_restarted = true;
  }
  std::cerr << "chaos: " << relay_kills << " relay kills, " << broker_kills << " broker kills, 1 PostgreSQL restart; "
            << committed_rows.load() << " committed rows\n";

  const auto expected = std::to_string(committed_rows.load());
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM written"), expected);
  const bool all = eventually([&] { return scalar(db, "SELECT count(DISTINCT id) FROM consumed") == expected; }, 120s);
  stop_consumer.request_stop();
  consumer_thread.join();
  EXPECT_TRUE(all) << "consumed " << scalar(db, "SELECT count(DISTINCT id) FROM consumed") << " of " << expected
                   << "; outbox left " << scalar(db, "SELECT count(*) FROM txmq_outbox") << "\n"
                   << relays[0]->log();
  // Exactly once, nothing invented (a rolled-back row is not in `written`), per key in seq order.
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM consumed"), expected);
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM consumed c LEFT JOIN written w USING (id) WHERE w.id IS NULL"), "0");
  EXPECT_EQ(scalar(db,
                   "SELECT count(*) FROM (SELECT w.seq, lag(w.seq) OVER (PARTITION BY c.key ORDER BY c.n) AS prev "
                   "FROM consumed c JOIN written w USING (id)) x WHERE prev >= seq"),
            "0");
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM txmq_outbox"), "0");
  EXPECT_GE(relay_kills, 3);
  EXPECT_GE(broker_kills, 1);
  for (auto& r : relays) EXPECT_EQ(r->stop(), 0) << r->log();
}

}  // namespace
}  // namespace txmq::test
