#pragma once

// A transaction checker backed by the producer's own PostgreSQL database (docs/semantics.md §3, after
// dtm's barrier), and the barrier helper that goes with it.
//
// Inside the business transaction, before COMMIT:
//     record_commit(conn, tx.id());   // INSERT (txid, 'commit') INTO txmq_tx_barrier
// On a check-back the checker runs, in its own connection:
//     INSERT (txid, 'rollback') ... ON CONFLICT DO NOTHING;  SELECT outcome ...
// If the business transaction committed, its 'commit' row is there: COMMIT. If it rolled back
// or never reached the insert, the checker's 'rollback' row goes in: ROLLBACK, and a late
// business COMMIT then fails on the primary key instead of diverging. If it is still open,
// the checker's insert waits on its row lock, so the answer is definite once it ends; only
// when that wait passes lock_timeout (a business transaction open for longer than the broker
// waits for an answer) does the checker say unknown, and the broker asks again later.

#include <chrono>
#include <memory>
#include <string>

#include <libpq-fe.h>

#include "txmq/client/error.h"
#include "txmq/producer/transaction.h"
#include "txmq/protocol/message_id.h"

namespace txmq::producer {

// Records, inside the caller's open transaction on conn, that transaction `txid` commits
// with it. Errors: pg::errc::database; SQLSTATE 23505 (pg::unique_violation) means a
// check-back already decided ROLLBACK for this txid: the caller must roll back.
[[nodiscard]] client::result<void> record_commit(PGconn* conn, const protocol::txid& txid);

struct pg_checker_options {
  std::string conninfo;  // the application's database (where txmq_tx_barrier lives)
  // Keep under the broker's tx_check_answer_timeout (3 s), so a business transaction that is
  // still open yields unknown rather than no answer.
  std::chrono::milliseconds lock_timeout{2000};
  // Diagnostics (connection failures). Default: none.
  std::function<void(std::string_view)> log;
};

// Usable wherever a transaction_checker is wanted (it is callable). Thread-safe: keeps one
// connection per concurrent check, reconnecting after failures. A database error answers
// unknown (the broker asks again).
class pg_transaction_checker {
 public:
  explicit pg_transaction_checker(pg_checker_options options);
  ~pg_transaction_checker();
  pg_transaction_checker(const pg_transaction_checker&) = delete;
  pg_transaction_checker& operator=(const pg_transaction_checker&) = delete;

  [[nodiscard]] tx_decision check(const protocol::txid& txid);
  tx_decision operator()(const tx_check& c) { return check(c.txid); }

  // Deletes barrier rows older than `age` (keep it above the broker's dedupe_window, after
  // which the broker forgets the outcome anyway). Returns how many went.
  [[nodiscard]] client::result<std::uint64_t> cleanup(std::chrono::seconds age);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// A transaction_checker that forwards to a shared pg_transaction_checker.
[[nodiscard]] transaction_checker make_pg_checker(std::shared_ptr<pg_transaction_checker> checker);

}  // namespace txmq::producer
