// Per-key order of the relay's reads against a real PostgreSQL (outbox-relay/README.md, "Where a
// read starts"), driven step by step: the test holds writer sessions open, commits them between
// the relay's reads and reads through the relay's own round_reader, so every interleaving is the
// test's choice (no sleeps, no timing). Publishing is recorded instead of sent: the order a
// relay publishes in is the order its reads return rows (publish_order), round after round.
// Label pg.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "eventually.h"
#include "outbox_support.h"
#include "pg_cluster.h"
#include "round_reader.h"
#include "round_statements.h"
#include "txmq/pg/pg.h"
#include "txmq/producer/pg_schema.h"

namespace txmq::test {
namespace {

using relay::detail::read_start;
using relay::detail::round_reader;

void run(PGconn* c, const std::string& sql) {
  auto r = pg::exec(c, sql);
  ASSERT_TRUE(r) << sql << ": " << r.error();
}

// Inserts one outbox row of `key` (on the caller's session, in its transaction if one is open);
// returns its seq.
std::int64_t insert_row(PGconn* c, const std::string& key, const std::string& body) {
  auto r = pg::exec(c, "INSERT INTO txmq_outbox (topic, key, payload) VALUES ('t', $1, convert_to($2, 'UTF8')) RETURNING seq",
                    {key, body});
  if (!r) throw std::runtime_error(r.error().message);
  return std::stoll(PQgetvalue(r.value().get(), 0, 0));
}

struct published_row {
  std::string key;
  std::int64_t seq = 0;
};

// The relay's round loop (relay.cc's drain) on one shard, without the broker: each round is
// "published" (recorded) in publish_order and deleted, and its shard resumes as drain() says.
class reading_relay {
 public:
  reading_relay(const std::string& db, int batch, bool order_rule = true)
      : conn_(connect_to(db)), reader_(batch, order_rule), batch_(batch) {
    auto r = pg::exec(conn_.get(), relay::detail::round_statements_setup_sql());
    if (!r) throw std::runtime_error(r.error().message);
  }

  struct round {
    std::vector<published_row> rows;
    std::vector<std::string> ids;  // 16 bytes each
    std::int64_t last_seq = 0;
    std::uint64_t read_no = 0;
    read_start start = read_start::full;
    bool unfinished = false;  // the shard may have more rows (else it drained)
  };

  // Reads shard 0: past `in_flight`'s last seq when given (the pipelined successor of a round not
  // yet deleted), else from its resume point.
  round read(const round* in_flight = nullptr) {
    std::map<int, std::int64_t> flight;
    if (in_flight) flight[0] = in_flight->last_seq;
    auto r = reader_.read(conn_.get(), {0}, in_flight ? &flight : nullptr, in_flight ? in_flight->read_no : 0);
    if (!r) throw std::runtime_error(r.error().message);
    round out;
    out.read_no = r.value().read_no;
    out.start = r.value().start;
    ++starts[out.start];
    if (out.start == read_start::deferred) return out;
    PGresult* res = r.value().rows.get();
    out.last_seq = r.value().from.at(0);
    out.unfinished = r.value().unfinished.contains(0);
    for (const auto& p : r.value().order) {
      const auto row = relay::detail::binary_row(res, p.row);
      out.rows.push_back({std::string(row.key.value_or("")), p.seq});
      out.ids.emplace_back(row.id);
      out.last_seq = p.seq;
    }
    return out;
  }

  // The round was acked: published in its order, deleted, and its shard's next read placed.
  void publish_and_delete(const round& r) {
    std::string ids;
    for (const auto& id : r.ids) ids += id;
    if (!ids.empty()) {
      const pg::param params[] = {pg::uuid_array_binary(ids)};
      auto d = pg::exec_prepared(conn_.get(), relay::detail::k_delete_statement, params, false, true);
      if (!d) throw std::runtime_error(d.error().message);
    }
    published.insert(published.end(), r.rows.begin(), r.rows.end());
    if (!r.unfinished) {
      reader_.read_from_start(0);
    } else {
      reader_.resume_after(0, r.last_seq, r.read_no);
    }
  }

  // A relay keeping up reads without a snapshot (one statement); the round after one that came
  // back full takes one. Publishes a full round of `writer`'s rows so that the next read does.
  void start_backlog(PGconn* writer) {
    for (int i = 0; i < batch_; ++i) insert_row(writer, "warm-up", "w" + std::to_string(i));
    auto r = read();
    if (static_cast<int>(r.rows.size()) != batch_) throw std::runtime_error("the warm-up round is not full");
    publish_and_delete(r);
  }

  // drain() until a read from the shard's start finds nothing.
  void drain() {
    for (int i = 0; i < 1000; ++i) {
      auto r = read();
      publish_and_delete(r);
      if (r.rows.empty() && r.start == read_start::full) return;
    }
    FAIL() << "the shard did not drain";
  }

  // Seqs of `key` in the order they were published.
  std::vector<std::int64_t> order_of(const std::string& key) const {
    std::vector<std::int64_t> out;
    for (const auto& p : published) {
      if (p.key == key) out.push_back(p.seq);
    }
    return out;
  }

  std::vector<published_row> published;
  std::map<read_start, int> starts;

 private:
  pg::connection_ptr conn_;
  round_reader reader_;
  int batch_;
};

std::string new_outbox(const std::string& name, int shards = 1) {  // one shard: every key in it
  const auto db = shared_pg_cluster().create_database(name);
  auto conn = connect_to(db);
  auto schema = producer::install_schema(conn.get(), shards);
  if (!schema) throw std::runtime_error(schema.error().message);
  return db;
}

// The set-up the interleavings below share: a fresh outbox, a relay reading 3 rows a round,
// writer sessions A and B, and a backlog B committed (so that the relay's reads resume).
struct two_writers {
  explicit two_writers(const std::string& name)
      : db(new_outbox(name)), relay(db, 3), a(connect_to(db)), b(connect_to(db)) {
    relay.start_backlog(b.get());
  }
  std::string db;
  reading_relay relay;
  decltype(connect_to(std::string())) a, b;
};

// The defect of 2026-11-27: writer A's first transaction holds seq s1 while a round past s1 is
// read; A commits it and then a second transaction on the same key (s2). The next read starts
// past the round, where s2 is and s1 is not.
TEST(outbox_order, a_resumed_read_never_publishes_a_writers_next_transaction_first) {
  two_writers w("order_resume");
  auto& [db, relay, a, b] = w;
  run(a.get(), "BEGIN");
  const auto s1 = insert_row(a.get(), "k", "a1");
  for (int i = 0; i < 3; ++i) insert_row(b.get(), "other", "b" + std::to_string(i));  // committed, seqs past s1

  auto r1 = relay.read();
  ASSERT_EQ(r1.rows.size(), 3u);  // a full round: the shard has a backlog, its next read resumes
  EXPECT_GT(r1.last_seq, s1);
  relay.publish_and_delete(r1);

  run(a.get(), "COMMIT");
  const auto s2 = insert_row(a.get(), "k", "a2");  // A's next transaction, after the first committed
  relay.drain();
  EXPECT_EQ(relay.order_of("k"), (std::vector<std::int64_t>{s1, s2})) << "key k's rows published out of seq order";
  EXPECT_EQ(relay.published.size(), 8u);
}

// A transaction first seen at a later read: it took its seq after the earlier read looked at the
// sequence, so the read after its commit starts there, not at the shard's start.
TEST(outbox_order, a_late_transaction_moves_reads_down_only_to_the_sequence_before_it) {
  two_writers w("order_lowered");
  auto& [db, relay, a, b] = w;
  for (int i = 0; i < 3; ++i) insert_row(b.get(), "other", "b" + std::to_string(i));
  auto r0 = relay.read();
  ASSERT_EQ(r0.rows.size(), 3u);
  relay.publish_and_delete(r0);

  run(a.get(), "BEGIN");
  const auto s1 = insert_row(a.get(), "k", "a1");
  for (int i = 3; i < 6; ++i) insert_row(b.get(), "other", "b" + std::to_string(i));
  auto r1 = relay.read();  // past r0, A running: first seen here
  ASSERT_EQ(r1.rows.size(), 3u);
  EXPECT_EQ(r1.start, read_start::resume);
  relay.publish_and_delete(r1);

  run(a.get(), "COMMIT");
  const auto s2 = insert_row(a.get(), "k", "a2");
  auto r2 = relay.read();
  EXPECT_EQ(r2.start, read_start::lowered) << "expected a read from the sequence's value at the first read, "
                                           << r0.last_seq << ", not from the shard's start";
  relay.publish_and_delete(r2);
  relay.drain();
  EXPECT_EQ(relay.order_of("k"), (std::vector<std::int64_t>{s1, s2})) << "key k's rows published out of seq order";
  EXPECT_EQ(relay.published.size(), 11u);
}

// The same while the round is in flight: its successor is read before it is deleted (drain's
// pipeline), from the round's last seq.
TEST(outbox_order, a_pipelined_read_never_publishes_a_writers_next_transaction_first) {
  two_writers w("order_pipelined");
  auto& [db, relay, a, b] = w;
  run(a.get(), "BEGIN");
  const auto s1 = insert_row(a.get(), "k", "a1");
  for (int i = 0; i < 3; ++i) insert_row(b.get(), "other", "b" + std::to_string(i));

  auto r1 = relay.read();
  ASSERT_EQ(r1.rows.size(), 3u);
  run(a.get(), "COMMIT");
  const auto s2 = insert_row(a.get(), "k", "a2");
  auto r2 = relay.read(&r1);  // while r1 is published
  relay.publish_and_delete(r1);
  if (r2.start == read_start::deferred) {
    EXPECT_TRUE(r2.rows.empty());
    r2 = relay.read();  // drain() reads again once the round in flight is deleted
  }
  relay.publish_and_delete(r2);
  relay.drain();
  EXPECT_EQ(relay.order_of("k"), (std::vector<std::int64_t>{s1, s2})) << "key k's rows published out of seq order";
  EXPECT_EQ(relay.published.size(), 8u);
}

// The hole the schema's version 3 closes: a transaction takes its seq (the column default, before
// any BEFORE trigger) before it has an xid. Writer A's INSERT is held in a trigger after its seq
// was taken while the relay reads; A's xid must already be one the read's snapshot accounts for.
TEST(outbox_order, a_transaction_holding_a_seq_has_an_xid_the_read_accounts_for) {
  const auto db = new_outbox("order_xid");
  {
    auto admin = connect_to(db);
    run(admin.get(),
        "CREATE FUNCTION order_test_gate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.key = 'gated' THEN PERFORM pg_advisory_xact_lock(4242); END IF; RETURN NEW; END $$; "
        "CREATE TRIGGER a_order_test_gate BEFORE INSERT ON txmq_outbox FOR EACH ROW EXECUTE FUNCTION order_test_gate(); "
        // nextval assigns an xid itself when it WAL-logs the sequence (its first call, then every
        // 32nd): take that call here, so that A's seq comes without one under the old default.
        "SELECT nextval(pg_get_serial_sequence('txmq_outbox', 'seq'))");
  }
  reading_relay relay(db, 3);
  auto gate = connect_to(db);
  auto a = connect_to(db);
  auto b = connect_to(db);
  relay.start_backlog(b.get());
  run(gate.get(), "SELECT pg_advisory_lock(4242)");
  // A's INSERT takes its seq, then waits in the trigger for the gate.
  ASSERT_EQ(PQsendQuery(a.get(), "INSERT INTO txmq_outbox (topic, key, payload) VALUES ('t', 'gated', 'a1') RETURNING seq"), 1);
  ASSERT_TRUE(eventually([&] {
    return scalar(db, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = 4242") == "1";
  }));
  for (int i = 0; i < 3; ++i) insert_row(b.get(), "other", "b" + std::to_string(i));  // seqs past A's

  auto r1 = relay.read();
  ASSERT_EQ(r1.rows.size(), 3u);
  relay.publish_and_delete(r1);

  run(gate.get(), "SELECT pg_advisory_unlock(4242)");
  std::int64_t s1 = 0;
  while (PGresult* res = PQgetResult(a.get())) {
    if (PQresultStatus(res) == PGRES_TUPLES_OK) s1 = std::stoll(PQgetvalue(res, 0, 0));
    PQclear(res);
  }
  ASSERT_GT(s1, 0) << PQerrorMessage(a.get());
  EXPECT_LT(s1, r1.last_seq);
  const auto s2 = insert_row(a.get(), "gated", "a2");
  relay.drain();
  EXPECT_EQ(relay.order_of("gated"), (std::vector<std::int64_t>{s1, s2})) << "key gated's rows published out of seq order";
}

// Without writers a backlog's reads resume past what was read: the rule costs nothing there.
TEST(outbox_order, a_backlog_without_writers_is_read_past_what_was_read) {
  const auto db = new_outbox("order_backlog");
  {
    auto w = connect_to(db);
    run(w.get(), "INSERT INTO txmq_outbox (topic, key, payload) SELECT 't', 'k' || (i % 7), 'x' FROM generate_series(1, 100) i");
  }
  reading_relay relay(db, 5);
  relay.drain();
  EXPECT_EQ(relay.published.size(), 100u);
  // 20 full rounds and the reads that found the shard drained: every round after the first
  // resumed (another session's transaction completing between two reads would lower one).
  EXPECT_GE(relay.starts[read_start::resume], 17) << "resumed " << relay.starts[read_start::resume] << ", lowered "
                                                  << relay.starts[read_start::lowered] << ", full " << relay.starts[read_start::full];
  std::map<std::string, std::int64_t> last;
  for (const auto& p : relay.published) {
    EXPECT_GT(p.seq, last[p.key]) << p.key;
    last[p.key] = p.seq;
  }
}

// A schema older than version 3 cannot tell which transactions hold seqs: the relay then reads
// every shard from its start, and never reads a round's successor while the round is in flight.
TEST(outbox_order, without_the_order_rule_every_read_starts_at_the_shards_beginning) {
  const auto db = new_outbox("order_old_schema");
  {
    auto w = connect_to(db);
    run(w.get(), "INSERT INTO txmq_outbox (topic, key, payload) SELECT 't', 'k', 'x' FROM generate_series(1, 10) i");
  }
  reading_relay relay(db, 3, false);
  auto r1 = relay.read();
  ASSERT_EQ(r1.rows.size(), 3u);
  EXPECT_EQ(relay.read(&r1).start, read_start::deferred);
  relay.publish_and_delete(r1);
  relay.drain();
  EXPECT_EQ(relay.published.size(), 10u);
  EXPECT_EQ(relay.starts[read_start::resume], 0);
  EXPECT_EQ(relay.starts[read_start::lowered], 0);
}

// The common ceiling (outbox-relay/README.md): shards of uneven density, drained round by round
// as drain() does (each round's successor read while it is in flight), publish one ascending run
// of seqs, as the broker's dedupe shortcut and memtable want; and a shard whose read was cut by
// the ceiling is not taken for drained. Taking `batch` rows of each shard, the sparse shard ran
// ahead and every round of the dense one started below seqs already published.
TEST(outbox_order, a_drains_rounds_are_one_ascending_run_of_seqs_over_uneven_shards) {
  const auto db = new_outbox("order_ceiling", 2);
  auto c = connect_to(db);
  // Three keys of shard 0 for one of shard 1, interleaved: shard 0 holds three rows in four.
  const auto keys_of = [&](int shard, int n) {
    return scalar(db, "SELECT string_agg(k, ',') FROM (SELECT 'k' || i AS k FROM generate_series(1, 200) i WHERE "
                      "((hashtext('k' || i)::bigint % 2) + 2) % 2 = " + std::to_string(shard) + " ORDER BY i LIMIT " +
                      std::to_string(n) + ") q");
  };
  const auto dense = keys_of(0, 3), sparse = keys_of(1, 1);
  run(c.get(), "INSERT INTO txmq_outbox (topic, key, payload) SELECT 't', (string_to_array('" + dense + "," + sparse +
                   "', ','))[1 + i % 4], 'x' FROM generate_series(0, 199) i");
  ASSERT_EQ(scalar(db, "SELECT count(*) FROM txmq_outbox WHERE shard = 0"), "150");

  constexpr int batch = 5;
  round_reader reader(batch, true);
  auto relay = connect_to(db);
  run(relay.get(), relay::detail::round_statements_setup_sql());
  struct round {
    std::map<int, std::int64_t> last_seq;
    std::set<int> unfinished;
    std::map<int, int> taken;
    std::string ids;
    std::uint64_t read_no = 0;
  };
  std::vector<std::int64_t> published;
  int cut_short = 0;  // rounds where a shard took fewer than `batch` rows and was not drained
  const auto read = [&](const std::set<int>& shards, const round* in_flight) {
    auto r = reader.read(relay.get(), shards, in_flight ? &in_flight->last_seq : nullptr, in_flight ? in_flight->read_no : 0);
    if (!r) throw std::runtime_error(r.error().message);
    if (r.value().start == read_start::deferred) return std::optional<round>();  // read again after the delete
    round out{r.value().from, r.value().unfinished, {}, {}, r.value().read_no};
    for (const auto& p : r.value().order) {
      out.ids += relay::detail::binary_row(r.value().rows.get(), p.row).id;
      out.last_seq[p.shard] = p.seq;
      ++out.taken[p.shard];
      published.push_back(p.seq);
    }
    return std::optional<round>(std::move(out));
  };
  auto cur = *read({0, 1}, nullptr);
  for (int rounds = 0; rounds < 500; ++rounds) {
    const std::set<int>& more = cur.unfinished;
    std::optional<round> next;
    if (!more.empty()) next = read(more, &cur);  // while cur is "published"; deferred after a read without a snapshot
    if (!cur.ids.empty()) {
      const pg::param params[] = {pg::uuid_array_binary(cur.ids)};
      auto d = pg::exec_prepared(relay.get(), relay::detail::k_delete_statement, params, false, true);
      ASSERT_TRUE(d) << d.error();
    }
    for (const auto& [shard, from] : cur.last_seq) {
      if (!more.contains(shard)) {
        // Drained: truly nothing left (there are no writers).
        EXPECT_EQ(scalar(db, "SELECT count(*) FROM txmq_outbox WHERE shard = " + std::to_string(shard)), "0")
            << "shard " << shard << " was taken for drained after round " << rounds;
        reader.read_from_start(shard);
      } else {
        if (cur.taken[shard] < batch) ++cut_short;
        reader.resume_after(shard, cur.last_seq.at(shard), cur.read_no);
      }
    }
    if (!next && !more.empty()) next = read(more, nullptr);
    if (!next) break;
    cur = std::move(*next);
  }
  EXPECT_EQ(published.size(), 200u);
  EXPECT_TRUE(std::is_sorted(published.begin(), published.end()) &&
              std::adjacent_find(published.begin(), published.end()) == published.end())
      << "the drain's rounds did not publish one ascending run of seqs";
  EXPECT_GT(cut_short, 0) << "no round cut a shard short of its batch at the ceiling";
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM txmq_outbox"), "0");
}

}  // namespace
}  // namespace txmq::test
