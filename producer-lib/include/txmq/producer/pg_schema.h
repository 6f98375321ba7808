#pragma once

// The tables txmq keeps in an application's PostgreSQL database (docs/semantics.md §3, §4):
//   txmq_outbox      rows waiting for txmq-relay; plain SQL, any language can INSERT into it
//   txmq_tx_barrier  one row per transactional-message txid: 'commit' or 'rollback'
//   txmq_inbox       ids of messages a PgInbox handler already ran for
//   txmq_schema      the installed schema version and the outbox's shard count
//   txmq_relay       one row per txmq-relay (since version 2): what it holds and how it fares,
//                    for `txmq outbox status`
// install_schema() is what `txmq outbox init` runs: idempotent, in one transaction, so a later
// release can read txmq_schema.version and migrate.

#include <libpq-fe.h>

#include "txmq/client/error.h"

namespace txmq::producer {

// 1: outbox, barrier, inbox. 2: txmq_relay, outbox autovacuum tuned for a queue table.
// 3: an outbox row's seq is taken after its transaction has an xid (txmq_outbox_next_seq()),
// which lets txmq-relay resume reads without breaking per-key order.
// 4: a commit that inserted outbox rows sends a NOTIFY only for shards whose relay is not awake
// (it holds no outbox_awake_lock_class lock on them): NOTIFY serialises every notifying commit
// of the whole PostgreSQL cluster on one lock held through the commit's WAL flush.
inline constexpr int pg_schema_version = 4;
// The advisory locks of the wake-up (version 4), per shard. A relay holds (awake, shard)
// exclusively while it reads the shard on its own. A committing writer holds (committing, shard)
// shared from its check to its end, then tries (awake, shard) shared, and sends the NOTIFY when
// it gets that one or not the first. A relay that falls asleep gives up (awake, shard), then
// waits for (committing, shard) exclusively: every writer that found it awake has then committed
// (or rolled back), and its next read sees their rows. outbox-relay/README.md, "Waking the relay".
inline constexpr int outbox_awake_lock_class = 0x74786d73;
inline constexpr int outbox_committing_lock_class = 0x74786d74;
inline constexpr int default_outbox_shards = 16;

struct pg_schema_info {
  int version = 0;
  int shards = 0;
};

// Creates what is missing and sets the outbox's shard count (1..1024). Changing the count of an
// existing schema re-routes only rows inserted afterwards. Runs its own BEGIN/COMMIT: call it
// outside a transaction. Errors: client::errc::invalid_argument for a bad shard count,
// pg::errc::database (e.g. a newer schema version than this library knows).
[[nodiscard]] client::result<pg_schema_info> install_schema(PGconn* conn, int shards = default_outbox_shards);

// The installed version and shard count. Errors: pg::errc::database when the schema is
// not installed (text says to run `txmq outbox init`).
[[nodiscard]] client::result<pg_schema_info> read_schema(PGconn* conn);

}  // namespace txmq::producer
