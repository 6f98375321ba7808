#include "outbox_commands.h"

#include <boost/json.hpp>

#include "txmq/cli/format.h"
#include "txmq/pg/pg.h"
#include "txmq/producer/pg_schema.h"

namespace txmq::cli::detail {
namespace {

namespace json = boost::json;

// Per shard: waiting rows, the oldest's age, and who holds the shard's advisory lock (relay id
// from txmq_relay when the relay recorded itself, else the session's application_name).
constexpr const char* k_shards_sql = R"sql(
WITH shards AS (SELECT generate_series(0, (SELECT shards FROM txmq_schema) - 1) AS shard),
waiting AS (SELECT shard, count(*) AS n, extract(epoch FROM now() - min(created_at)) * 1000 AS oldest_ms
            FROM txmq_outbox GROUP BY shard),
holders AS (SELECT l.objid::int AS shard, coalesce(r.relay_id, a.application_name, '') AS relay
            FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid LEFT JOIN txmq_relay r ON r.backend_pid = l.pid
            WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid = 1954049393
              AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
SELECT s.shard, coalesce(w.n, 0), coalesce(w.oldest_ms, 0)::bigint, coalesce(h.relay, '')
FROM shards s LEFT JOIN waiting w USING (shard) LEFT JOIN holders h USING (shard) ORDER BY s.shard
)sql";

// Recorded relays; `connected` says whether its session is still there.
constexpr const char* k_relays_sql = R"sql(
SELECT r.relay_id, r.process, array_length(r.shards, 1), r.broker_state, r.last_error, r.rows_published,
       (extract(epoch FROM now() - r.heartbeat_at) * 1000)::bigint, a.pid IS NOT NULL
FROM txmq_relay r LEFT JOIN pg_stat_activity a ON a.pid = r.backend_pid AND a.application_name = 'txmq-relay:' || r.relay_id
ORDER BY r.relay_id
)sql";

}  // namespace

int outbox_init(session& s, const std::string& conninfo, int shards) {
  auto conn = pg::connect(conninfo);
  if (!conn) return s.fail("connect to PostgreSQL", conn.error());
  auto info = producer::install_schema(conn.value().get(), shards > 0 ? shards : producer::default_outbox_shards);
  if (!info) return s.fail("install the txmq schema", info.error());
  if (s.json()) {
    s.env().out << json::serialize(json::object{{"version", info.value().version}, {"shards", info.value().shards}}) << '\n';
  } else {
    s.env().out << "txmq schema version " << info.value().version << " installed: txmq_outbox (" << info.value().shards
                << " shards), txmq_tx_barrier, txmq_inbox, txmq_relay\n";
  }
  return exit_ok;
}

int outbox_status(session& s, const std::string& conninfo) {
  auto conn = pg::connect(conninfo);
  if (!conn) return s.fail("connect to PostgreSQL", conn.error());
  PGconn* c = conn.value().get();
  if (auto schema = producer::read_schema(c); !schema) return s.fail("read the txmq schema", schema.error());
  auto shards = pg::exec(c, k_shards_sql);
  if (!shards) return s.fail("read the outbox's shards", shards.error());
  auto relays = pg::exec(c, k_relays_sql);
  if (!relays) return s.fail("read txmq_relay (run `txmq outbox init` to add it)", relays.error());
  auto& out = s.env().out;
  PGresult* sr = shards.value().get();
  PGresult* rr = relays.value().get();
  if (s.json()) {
    for (int i = 0; i < PQntuples(sr); ++i) {
      out << json::serialize(json::object{{"shard", std::stoi(PQgetvalue(sr, i, 0))},
                                          {"waiting", std::stoll(PQgetvalue(sr, i, 1))},
                                          {"oldest_age_ms", std::stoll(PQgetvalue(sr, i, 2))},
                                          {"relay", PQgetvalue(sr, i, 3)}})
          << '\n';
    }
    for (int i = 0; i < PQntuples(rr); ++i) {
      out << json::serialize(json::object{{"relay", PQgetvalue(rr, i, 0)},
                                          {"process", PQgetvalue(rr, i, 1)},
                                          {"shards", PQgetisnull(rr, i, 2) ? 0 : std::stoi(PQgetvalue(rr, i, 2))},
                                          {"broker", PQgetvalue(rr, i, 3)},
                                          {"last_error", PQgetvalue(rr, i, 4)},
                                          {"published", std::stoll(PQgetvalue(rr, i, 5))},
                                          {"heartbeat_age_ms", std::stoll(PQgetvalue(rr, i, 6))},
                                          {"connected", std::string_view(PQgetvalue(rr, i, 7)) == "t"}})
          << '\n';
    }
    return exit_ok;
  }
  table t({"SHARD", "WAITING", "OLDEST", "RELAY"});
  for (int i = 0; i < PQntuples(sr); ++i) {
    const std::string relay = PQgetvalue(sr, i, 3);
    t.add({PQgetvalue(sr, i, 0), PQgetvalue(sr, i, 1), duration_text(std::stoll(PQgetvalue(sr, i, 2))),
           relay.empty() ? "(none)" : relay});
  }
  t.print(out);
  out << '\n';
  table r({"RELAY", "PROCESS", "SHARDS", "BROKER", "PUBLISHED", "HEARTBEAT", "CONNECTED", "LAST_ERROR"});
  for (int i = 0; i < PQntuples(rr); ++i) {
    r.add({PQgetvalue(rr, i, 0), PQgetvalue(rr, i, 1), PQgetisnull(rr, i, 2) ? "0" : PQgetvalue(rr, i, 2),
           PQgetvalue(rr, i, 3), PQgetvalue(rr, i, 5), duration_text(std::stoll(PQgetvalue(rr, i, 6))) + " ago",
           std::string_view(PQgetvalue(rr, i, 7)) == "t" ? "yes" : "no", escape_control(PQgetvalue(rr, i, 4))});
  }
  if (r.rows() == 0) {
    out << "no relay has recorded itself\n";
  } else {
    r.print(out);
  }
  return exit_ok;
}

}  // namespace txmq::cli::detail
