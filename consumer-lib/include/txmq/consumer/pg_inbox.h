#pragma once

// An idempotent inbox in the consumer's PostgreSQL database (docs/semantics.md §4): the handler runs inside
// a transaction that first records the message id in txmq_inbox, so its database effects and
// the record commit together. A redelivery of a message whose transaction committed finds the
// id and is acked without running the handler; a transaction that failed left no record, so
// the redelivery runs the handler again. Delivery stays at-least-once; effects happen once.
//
// Thread-safety: every member may be called from any thread. handle() and the handler made by
// wrap() keep a pool of connections (one per concurrent call), so consumer::run() may call them
// on several worker threads. A connection that broke is dropped and a new one made next time.

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "txmq/client/error.h"
#include "txmq/consumer/consumer.h"

namespace txmq::consumer {

struct pg_inbox_options {
  // The consumer's name in txmq_inbox.consumer: one inbox serves several consumers of a
  // database, each deduplicating on its own (usually the consumer group's name).
  std::string consumer;
  // Records older than this are removed by cleanup(). It must exceed the longest time a
  // message can still be redelivered (the broker's retry schedule, ~4 h by default, and its
  // dedupe window for re-published outbox rows, 24 h): a duplicate arriving after its record
  // was removed runs the handler again.
  std::chrono::seconds retention{std::chrono::hours(24 * 7)};
  // handle() runs cleanup() itself at most this often (0 = never; call cleanup() yourself).
  std::chrono::seconds cleanup_interval{std::chrono::minutes(10)};
  // Rows removed per DELETE statement in cleanup(), so that no statement holds locks long.
  std::size_t cleanup_batch = 10000;
};

enum class inbox_outcome {
  handled,    // the handler ran and its transaction committed with the inbox record
  duplicate,  // the id was recorded already: the handler did not run
};

class pg_inbox {
 public:
  // The handler does its work on `conn`, inside the open transaction; an error (or exception)
  // rolls it back together with the inbox record.
  using tx_handler = std::function<client::result<void>(PGconn* conn, const delivery& d)>;

  // Connects lazily with `conninfo` (libpq conninfo or URI).
  pg_inbox(std::string conninfo, pg_inbox_options options);
  ~pg_inbox();
  pg_inbox(const pg_inbox&) = delete;
  pg_inbox& operator=(const pg_inbox&) = delete;

  // Runs h for d once per message id. Errors: pg::errc::database (no connection, the
  // insert, the commit), or the handler's own error; in both cases nothing was recorded and a
  // consumer should nack (consumer::run does). A commit whose outcome is unknown (the
  // connection broke during COMMIT) is also an error: the redelivery then finds the record or
  // runs the handler, whichever is true.
  [[nodiscard]] client::result<inbox_outcome> handle(const delivery& d, const tx_handler& h);

  // A consumer::handler for consumer::run(): handle(), success for handled and duplicate.
  // The inbox must outlive the returned handler.
  [[nodiscard]] handler wrap(tx_handler h);

  // Removes this consumer's records older than the retention, in batches. Returns how many.
  [[nodiscard]] client::result<std::uint64_t> cleanup();

 private:
  class impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace txmq::consumer
