#include "txmq/producer/pg_schema.h"

#include <string>

#include "txmq/pg/pg.h"

namespace txmq::producer {
namespace {

// Version 1. Every statement is idempotent so that init can run again (and concurrently: the
// advisory lock serialises two inits against one database).
constexpr const char* schema_v1 = R"sql(
CREATE TABLE IF NOT EXISTS txmq_schema (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  version int NOT NULL,
  shards int NOT NULL CHECK (shards BETWEEN 1 AND 1024),
  installed_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS txmq_outbox (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  topic text NOT NULL,
  key text,
  headers jsonb NOT NULL DEFAULT '{}',
  payload bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  shard int NOT NULL DEFAULT 0,
  seq bigserial
);
CREATE INDEX IF NOT EXISTS txmq_outbox_shard_seq ON txmq_outbox (shard, seq);
CREATE TABLE IF NOT EXISTS txmq_tx_barrier (
  txid uuid PRIMARY KEY,
  outcome text NOT NULL CHECK (outcome IN ('commit', 'rollback')),
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS txmq_inbox (
  message_id uuid NOT NULL,
  consumer text NOT NULL DEFAULT '',
  received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer, message_id)
);
CREATE INDEX IF NOT EXISTS txmq_inbox_received_at ON txmq_inbox (received_at);
CREATE INDEX IF NOT EXISTS txmq_tx_barrier_created_at ON txmq_tx_barrier (created_at);
)sql";

// Version 2, on top of version 1 (every statement again idempotent, so v1 databases migrate by
// running init again).
// txmq_relay: a relay upserts its row about once a second; the advisory locks in pg_locks are
// the truth about ownership, this row only says who the holder is and how it fares.
// The outbox is a queue: rows live for milliseconds and are deleted in batches, so autovacuum
// must visit it after a few thousand dead rows, not after 20 % of the table.
constexpr const char* schema_v2 = R"sql(
CREATE TABLE IF NOT EXISTS txmq_relay (
  relay_id text PRIMARY KEY,
  backend_pid int NOT NULL,            -- its session's pid, as pg_locks shows the shard locks
  process text NOT NULL DEFAULT '',    -- host:pid of the relay process
  started_at timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  shards int[] NOT NULL DEFAULT '{}',
  broker_state text NOT NULL DEFAULT 'unknown',
  last_error text NOT NULL DEFAULT '',
  rows_published bigint NOT NULL DEFAULT 0
);
ALTER TABLE txmq_outbox SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
                             autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 5000);
)sql";

// Version 3: a row's seq is taken after its transaction has an xid. The relay resumes a read past
// rows it already read only while every transaction that was running at its previous read still
// runs (outbox-relay/README.md, "Where a read starts"); that judges transactions by xid, so a
// transaction holding a seq must already have one. The bigserial default alone takes the seq
// first (defaults are evaluated before BEFORE triggers) and the xid only at the row's write.
// pg_current_xact_id() assigns the top-level xid (also inside a subtransaction) before nextval.
// The sequence is the one bigserial made (pg_get_serial_sequence keeps finding it: the column
// still owns it); its name is resolved once, here, not per row.
constexpr const char* schema_v3 = R"sql(
DO $do$
BEGIN
  EXECUTE format($f$
CREATE OR REPLACE FUNCTION txmq_outbox_next_seq() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  PERFORM pg_current_xact_id();
  RETURN nextval(%L::regclass);
END
$fn$$f$, pg_get_serial_sequence('txmq_outbox', 'seq'));
END
$do$;
ALTER TABLE txmq_outbox ALTER COLUMN seq SET DEFAULT txmq_outbox_next_seq();
)sql";

// The shard of a row: from its key, or its id when it has none; the same function in SQL for
// every writer, so plain INSERTs from any language land where the relay looks.
std::string trigger_sql(int shards) {
  return R"sql(
CREATE OR REPLACE FUNCTION txmq_outbox_route() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.shard := ((hashtext(coalesce(NEW.key, NEW.id::text))::bigint % )sql" +
         std::to_string(shards) + R"sql() + )sql" + std::to_string(shards) + R"sql() % )sql" + std::to_string(shards) +
         R"sql(;
  RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS txmq_outbox_route ON txmq_outbox;
CREATE TRIGGER txmq_outbox_route BEFORE INSERT ON txmq_outbox FOR EACH ROW EXECUTE FUNCTION txmq_outbox_route();
)sql";
}

// Version 4: the wake-up moves out of the routing trigger into one that runs at commit. A
// transaction that NOTIFYs takes a lock of the whole PostgreSQL cluster before its commit record
// and keeps it until the record is flushed, so notifying commits cannot share a WAL flush: with
// a NOTIFY per outbox insert, 16 writers committed 2,791-2,911 rows/s, 8,610-8,995 without
// (docs/BENCHMARKS.md, "Seventeenth round"). A relay that reads a shard anyway holds the shard's
// awake lock, and commits skip the NOTIFY (the protocol: pg_schema.h, outbox_awake_lock_class).
// Deferred to the commit, not at the insert: the relay may fall asleep while the writer's
// transaction runs. pg_notify() sends one notification per shard and transaction.
std::string wake_sql() {
  const auto shard_lock = [](int lock_class) {
    return "pg_try_advisory_xact_lock_shared(" + std::to_string(lock_class) + ", NEW.shard)";
  };
  return R"sql(
CREATE OR REPLACE FUNCTION txmq_outbox_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT )sql" + shard_lock(outbox_committing_lock_class) + R"sql( THEN
    PERFORM pg_notify('txmq_outbox', NEW.shard::text);  -- a relay is falling asleep right now
  ELSIF )sql" + shard_lock(outbox_awake_lock_class) + R"sql( THEN
    PERFORM pg_notify('txmq_outbox', NEW.shard::text);  -- no relay is reading the shard
  END IF;
  RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS txmq_outbox_wake ON txmq_outbox;
CREATE CONSTRAINT TRIGGER txmq_outbox_wake AFTER INSERT ON txmq_outbox DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION txmq_outbox_wake();
)sql";
}

}  // namespace

client::result<pg_schema_info> read_schema(PGconn* conn) {
  auto exists = pg::exec(conn, "SELECT to_regclass('txmq_schema') IS NOT NULL");
  if (!exists) return exists.error();
  if (std::string_view(PQgetvalue(exists.value().get(), 0, 0)) != "t") {
    return client::error(pg::errc::database, "the txmq schema is not installed in this database: run `txmq outbox init --pg CONN`");
  }
  auto row = pg::exec(conn, "SELECT version, shards FROM txmq_schema");
  if (!row) return row.error();
  if (PQntuples(row.value().get()) != 1) {
    return client::error(pg::errc::database, "txmq_schema has no row: run `txmq outbox init --pg CONN`");
  }
  return pg_schema_info{std::stoi(PQgetvalue(row.value().get(), 0, 0)), std::stoi(PQgetvalue(row.value().get(), 0, 1))};
}

client::result<pg_schema_info> install_schema(PGconn* conn, int shards) {
  if (shards < 1 || shards > 1024) {
    return client::error(client::errc::invalid_argument,
                         "the outbox shard count must be between 1 and 1024, not " + std::to_string(shards));
  }
  pg_schema_info info{pg_schema_version, shards};
  auto done = pg::in_transaction(conn, [&](PGconn* c) -> client::result<void> {
    // Two inits at once would race on CREATE ... IF NOT EXISTS; one waits for the other.
    if (auto r = pg::exec(c, "SELECT pg_advisory_xact_lock(hashtext('txmq_schema'))"); !r) return r.error();
    // "already exists, skipping" notices on every re-run are noise to the operator.
    if (auto r = pg::exec(c, "SET LOCAL client_min_messages = warning"); !r) return r.error();
    if (auto r = pg::exec(c, schema_v1); !r) return r.error();
    if (auto r = pg::exec(c, schema_v2); !r) return r.error();
    auto current = pg::exec(c, "SELECT version FROM txmq_schema");
    if (!current) return current.error();
    if (PQntuples(current.value().get()) == 1) {
      const int version = std::stoi(PQgetvalue(current.value().get(), 0, 0));
      if (version > pg_schema_version) {
        return client::error(pg::errc::database, "the database has txmq schema version " + std::to_string(version) +
                                                         ", newer than this release's " + std::to_string(pg_schema_version) +
                                                         ": use a newer txmq");
      }
    }
    if (auto r = pg::exec(c, schema_v3); !r) return r.error();
    if (auto r = pg::exec(c, trigger_sql(shards)); !r) return r.error();
    if (auto r = pg::exec(c, wake_sql()); !r) return r.error();
    auto r = pg::exec(c,
                      "INSERT INTO txmq_schema (version, shards) VALUES ($1, $2) "
                      "ON CONFLICT (singleton) DO UPDATE SET version = EXCLUDED.version, shards = EXCLUDED.shards",
                      {std::to_string(pg_schema_version), std::to_string(shards)});
    if (!r) return r.error();
    return outcome::success();
  });
  if (!done) return done.error();
  return info;
}

}  // namespace txmq::producer
