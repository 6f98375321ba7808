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
