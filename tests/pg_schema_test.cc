// The schema `txmq outbox init` installs, against a real PostgreSQL server.

#include <gtest/gtest.h>

#include "pg_cluster.h"
#include "txmq/pg/pg.h"
#include "txmq/producer/pg_schema.h"

namespace txmq {
namespace {

pg::connection_ptr connect_to(const std::string& conninfo) {
  auto conn = pg::connect(conninfo);
  EXPECT_TRUE(conn) << conn.error();
  return std::move(conn).value();
}

std::string one_value(PGconn* conn, std::string_view sql) {
  auto r = pg::exec(conn, sql);
  EXPECT_TRUE(r) << r.error();
  EXPECT_EQ(PQntuples(r.value().get()), 1);
  return PQgetvalue(r.value().get(), 0, 0);
}

TEST(pg_schema, install_is_idempotent_and_records_version_and_shards) {
  auto conn = connect_to(test::shared_pg_cluster().create_database("schema_idem"));
  auto missing = producer::read_schema(conn.get());
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("txmq outbox init"), std::string::npos);

  auto first = producer::install_schema(conn.get(), 8);
  ASSERT_TRUE(first) << first.error();
  auto again = producer::install_schema(conn.get(), 8);
  ASSERT_TRUE(again) << again.error();
  auto info = producer::read_schema(conn.get());
  ASSERT_TRUE(info) << info.error();
  EXPECT_EQ(info.value().version, producer::pg_schema_version);
  EXPECT_EQ(info.value().shards, 8);
  EXPECT_FALSE(producer::install_schema(conn.get(), 0));
}

TEST(pg_schema, plain_insert_is_routed_to_a_shard_by_key_and_notifies) {
  auto conn = connect_to(test::shared_pg_cluster().create_database("schema_route"));
  ASSERT_TRUE(producer::install_schema(conn.get(), 4));
  ASSERT_TRUE(pg::exec(conn.get(), "LISTEN txmq_outbox"));
  ASSERT_TRUE(pg::exec(conn.get(), "INSERT INTO txmq_outbox (topic, key, payload) VALUES ('t', 'k1', 'x'), ('t', 'k1', 'y'), ('t', NULL, 'z')"));
  // Same key, same shard; every shard in range.
  EXPECT_EQ(one_value(conn.get(), "SELECT count(DISTINCT shard) FROM txmq_outbox WHERE key = 'k1'"), "1");
  EXPECT_EQ(one_value(conn.get(), "SELECT count(*) FROM txmq_outbox WHERE shard < 0 OR shard >= 4"), "0");
  EXPECT_EQ(one_value(conn.get(), "SELECT count(*) FROM txmq_outbox WHERE seq IS NOT NULL"), "3");
  PQconsumeInput(conn.get());
  PGnotify* note = PQnotifies(conn.get());
  ASSERT_NE(note, nullptr);
  EXPECT_STREQ(note->relname, "txmq_outbox");
  PQfreemem(note);
}

// Version 3: an outbox row's seq is taken after its transaction has an xid (the relay's order
// rule needs it). The plain bigserial default takes it first: nextval assigns no xid (except
// when it logs a batch of values).
TEST(pg_schema, version_3_takes_a_rows_seq_after_its_transactions_xid_and_migrates_version_2) {
  auto conn = connect_to(test::shared_pg_cluster().create_database("schema_v3"));
  ASSERT_TRUE(producer::install_schema(conn.get(), 4));
  auto xid_before_seq = [&] {
    EXPECT_TRUE(pg::exec(conn.get(), "BEGIN"));
    // The column's default, evaluated as an INSERT would, then whether the transaction has an xid.
    const auto seq = one_value(conn.get(),
                               "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = 'txmq_outbox'::regclass AND "
                               "adnum = (SELECT attnum FROM pg_attribute WHERE attrelid = 'txmq_outbox'::regclass AND attname = 'seq')");
    std::string assigned;
    if (auto r = pg::exec(conn.get(), "SELECT " + seq); r) {
      assigned = one_value(conn.get(), "SELECT pg_current_xact_id_if_assigned() IS NOT NULL");
    }
    EXPECT_TRUE(pg::exec(conn.get(), "ROLLBACK"));
    return assigned;
  };
  EXPECT_EQ(xid_before_seq(), "t");

  // A database of version 2: the bigserial default, version 2 recorded.
  ASSERT_TRUE(pg::exec(conn.get(),
                       "ALTER TABLE txmq_outbox ALTER COLUMN seq SET DEFAULT nextval('txmq_outbox_seq_seq'::regclass); "
                       "DROP FUNCTION txmq_outbox_next_seq(); UPDATE txmq_schema SET version = 2"));
  EXPECT_EQ(one_value(conn.get(), "SELECT version FROM txmq_schema"), "2");
  ASSERT_TRUE(pg::exec(conn.get(), "SELECT nextval('txmq_outbox_seq_seq')"));  // not the 32nd value: no xid from nextval
  EXPECT_EQ(xid_before_seq(), "f");
  ASSERT_TRUE(producer::install_schema(conn.get(), 4));  // `txmq outbox init` again: migrates
  EXPECT_EQ(one_value(conn.get(), "SELECT version FROM txmq_schema"), std::to_string(producer::pg_schema_version));
  EXPECT_EQ(xid_before_seq(), "t");
  ASSERT_TRUE(producer::install_schema(conn.get(), 4));  // and again: idempotent
  ASSERT_TRUE(pg::exec(conn.get(), "INSERT INTO txmq_outbox (topic, key, payload) VALUES ('t', 'k', 'x'), ('t', 'k', 'y')"));
  EXPECT_EQ(one_value(conn.get(), "SELECT count(DISTINCT seq) FROM txmq_outbox"), "2");
}

// Version 4: the NOTIFY leaves the routing trigger for a deferred one (outbox_wake_test.cc drives
// it); `txmq outbox init` on a version-3 database moves it.
TEST(pg_schema, version_4_notifies_from_a_commit_time_trigger_and_migrates_version_3) {
  auto conn = connect_to(test::shared_pg_cluster().create_database("schema_v4"));
  ASSERT_TRUE(producer::install_schema(conn.get(), 4));
  const auto notifies = [&](const char* fn) {
    return one_value(conn.get(), std::string("SELECT pg_get_functiondef('") + fn + "'::regproc) LIKE '%pg_notify%'");
  };
  const auto wake_trigger = [&] {
    return one_value(conn.get(), "SELECT count(*) FROM pg_trigger WHERE tgname = 'txmq_outbox_wake' AND tgdeferrable AND tginitdeferred");
  };
  EXPECT_EQ(notifies("txmq_outbox_route"), "f");
  EXPECT_EQ(notifies("txmq_outbox_wake"), "t");
  EXPECT_EQ(wake_trigger(), "1");

  // A database of version 3: the routing trigger notifies, no wake trigger.
  ASSERT_TRUE(pg::exec(conn.get(),
                       "CREATE OR REPLACE FUNCTION txmq_outbox_route() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                       "NEW.shard := ((hashtext(coalesce(NEW.key, NEW.id::text))::bigint % 4) + 4) % 4; "
                       "PERFORM pg_notify('txmq_outbox', NEW.shard::text); RETURN NEW; END $$; "
                       "DROP TRIGGER txmq_outbox_wake ON txmq_outbox; DROP FUNCTION txmq_outbox_wake(); "
                       "UPDATE txmq_schema SET version = 3"));
  EXPECT_EQ(notifies("txmq_outbox_route"), "t");
  ASSERT_TRUE(producer::install_schema(conn.get(), 4));  // `txmq outbox init` again: migrates
  EXPECT_EQ(one_value(conn.get(), "SELECT version FROM txmq_schema"), "4");
  EXPECT_EQ(notifies("txmq_outbox_route"), "f");
  EXPECT_EQ(wake_trigger(), "1");
}

TEST(pg_schema, sqlstate_is_kept_in_errors) {
  auto conn = connect_to(test::shared_pg_cluster().create_database("schema_errors"));
  ASSERT_TRUE(producer::install_schema(conn.get()));
  const std::string txid = "0190b1f2-0000-7000-8000-000000000001";
  ASSERT_TRUE(pg::exec(conn.get(), "INSERT INTO txmq_tx_barrier (txid, outcome) VALUES ($1, 'commit')", {txid}));
  auto dup = pg::exec(conn.get(), "INSERT INTO txmq_tx_barrier (txid, outcome) VALUES ($1, 'commit')", {txid});
  ASSERT_FALSE(dup);
  EXPECT_EQ(pg::sqlstate(dup.error()), pg::unique_violation);
}

TEST(pg_schema, bytea_round_trip) {
  auto conn = connect_to(test::shared_pg_cluster().create_database("schema_bytea"));
  const std::string bytes("a\0b\xff", 4);
  auto r = pg::exec(conn.get(), "SELECT $1::bytea", {pg::bytea_literal(bytes)});
  ASSERT_TRUE(r) << r.error();
  auto back = pg::bytea_value(PQgetvalue(r.value().get(), 0, 0));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back.value(), bytes);
}

}  // namespace
}  // namespace txmq
