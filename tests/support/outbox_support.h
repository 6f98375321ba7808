#pragma once

// Small PostgreSQL helpers of the outbox tests: a connection that throws, one value of a
// query, a key of another shard, and the shards txmq-relay processes hold (advisory locks in
// pg_locks).

#include <stdexcept>
#include <string>

#include "txmq/pg/pg.h"

namespace txmq::test {

inline pg::connection_ptr connect_to(const std::string& conninfo) {
  auto conn = pg::connect(conninfo);
  if (!conn) throw std::runtime_error(conn.error().message);
  return std::move(conn).value();
}

// One value of a query; "" when it failed (the caller's condition then stays false).
inline std::string scalar(const std::string& conninfo, const std::string& sql) {
  auto conn = pg::connect(conninfo);
  if (!conn) return "";
  auto r = pg::exec(conn.value().get(), sql);
  if (!r || PQntuples(r.value().get()) != 1) return "";
  return PQgetvalue(r.value().get(), 0, 0);
}

// A key ("o0".."o99") whose row lands in another shard of a 2-shard outbox than `key`'s (the
// trigger's shard function, producer-lib/src/pg_schema.cc); "" when the query failed.
inline std::string key_of_other_shard(const std::string& conninfo, const std::string& key) {
  return scalar(conninfo, "SELECT k FROM (SELECT 'o' || i AS k FROM generate_series(0, 99) i) s WHERE "
                          "((hashtext(k)::bigint % 2) + 2) % 2 <> ((hashtext('" + key + "')::bigint % 2) + 2) % 2 LIMIT 1");
}

inline constexpr const char* k_shard_locks =
    "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND "
    "l.objsubid = 2 AND l.classid = 1954049393 AND l.database = (SELECT oid FROM pg_database WHERE datname = "
    "current_database())";

// Shards held by relays (all, or the one named relay_id); -1 when the query failed.
inline int shards_held(const std::string& conninfo, const std::string& relay_id = "") {
  // Appended, not chained with +: gcc 12 warns (-Warray-bounds, a false positive) on the chain.
  std::string sql = "SELECT count(*) ";
  sql += k_shard_locks;
  if (!relay_id.empty()) sql.append(" AND a.application_name = 'txmq-relay:").append(relay_id).append("'");
  const auto v = scalar(conninfo, sql);
  return v.empty() ? -1 : std::stoi(v);
}

}  // namespace txmq::test
