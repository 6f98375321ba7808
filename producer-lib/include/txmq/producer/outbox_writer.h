#pragma once

// Writes outbox rows (docs/semantics.md §4) inside the caller's own PostgreSQL transaction, so that the
// business rows and the messages about them commit or roll back together; txmq-relay publishes
// the committed rows with the row id as the message id.
//
// The writer adds nothing that a plain SQL INSERT could not do: the triggers of `txmq outbox
// init` route the shard and, at the commit, wake a relay that is not reading the shard already
// (outbox-relay/README.md, "Waking the relay"). What it adds is a UUIDv7 id made
// here (time-ordered, so the broker's dedupe index stays append-mostly), parameterised
// statements, and the row's shard and seq read back.
//
// Thread-safety: none of its own; it uses the caller's PGconn, which libpq allows on one thread
// at a time. Cheap to make: it holds only the connection pointer (not owned).

#include <libpq-fe.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "txmq/client/error.h"
#include "txmq/protocol/message_id.h"

namespace txmq::producer {

struct outbox_message {
  std::string topic;
  std::optional<std::string> key;  // same key -> same shard and partition -> ordered
  std::map<std::string, std::string> headers;
  std::string payload;
  std::optional<protocol::message_id> id;  // a new UUIDv7 when absent
};

// Where a row went: its id (the message id the relay publishes with), shard and seq.
struct outbox_row {
  protocol::message_id id;
  int shard = 0;
  std::int64_t seq = 0;
};

class outbox_writer {
 public:
  // `conn` must outlive the writer.
  explicit outbox_writer(PGconn* conn) noexcept : conn_(conn) {}

  // Inserts one row. The caller must have a transaction open (BEGIN, e.g. inside
  // pg::in_transaction): otherwise client::errc::invalid_argument, and nothing is written,
  // because a row committed on its own defeats the outbox. Errors: client::errc::invalid_argument
  // (no topic, no open transaction), pg::errc::database (SQLSTATE 23505 for an id used
  // before; the caller's transaction is then aborted, as with any failed statement).
  [[nodiscard]] client::result<outbox_row> add(const outbox_message& message);
  // Inserts several rows with one statement, in the order given (their seq ascend likewise).
  [[nodiscard]] client::result<std::vector<outbox_row>> add(std::span<const outbox_message> messages);

 private:
  PGconn* conn_;
};

}  // namespace txmq::producer
