#pragma once

// Transactional messages (docs/semantics.md §3): half messages that become visible to consumers if and
// only if the producer's local transaction committed.
//
//   transactional_producer p({.connection = {.address = ..., .producer_group = "payments"},
//                             .checker = my_checker});
//   auto tx = p.begin();
//   tx.add({.topic = "transfers", .key = account, .body = ...});
//   tx.prepare();                // durable on the broker, invisible
//   ... local database transaction ...
//   tx.commit();                 // or tx.rollback()
//
// or, in one call, send_in_transaction(messages, local_tx). When the producer dies or loses
// the broker between prepare() and the end, the broker asks a live producer of the same
// group (check-back): the checker registered here answers, on the producer's own threads.
// PgTransactionChecker (pg_checker.h) answers from the application's database, definitely.
//
// Thread-safety: the producer's members may be called from any thread; one transaction object
// belongs to one thread at a time. The checker runs on checker_threads threads concurrently.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "txmq/client/connection.h"
#include "txmq/client/error.h"
#include "txmq/producer/producer.h"
#include "txmq/protocol/message_id.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::producer {

// What a local transaction came to, or what a checker knows about one.
enum class tx_decision {
  commit,
  rollback,
  // Not known (yet): the broker asks again later. From send_in_transaction's local_tx: the
  // caller cannot tell whether its local commit happened (e.g. the database connection broke
  // during COMMIT), so the end is left to the check-back.
  unknown,
};

[[nodiscard]] const char* to_string(tx_decision d) noexcept;

// A check-back from the broker.
struct tx_check {
  protocol::txid txid;
  std::string producer_group;
  std::vector<v1::Message> messages;  // as prepared
  std::uint32_t check_number = 0;     // 1 for the first check of this transaction
  std::chrono::system_clock::time_point prepared_at;
};

// Answers check-backs. May block (a database query); an exception counts as unknown.
using transaction_checker = std::function<tx_decision(const tx_check&)>;

// A delivery consumed from a consumer group, acknowledged by the transaction's commit
// (read-process-write). Same fields as consumer::delivery_ref.
struct consumed_ref {
  std::string topic;
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
  // The delivery's attempt (delivery::message.attempt()). In a cluster the broker holds and
  // acks exactly that delivery (a later redelivery of the message is not this one's to ack);
  // 0: whichever delivery is in flight. A single broker ignores it.
  std::uint32_t attempt = 0;
};

struct transactional_producer_options {
  // connection.producer_group names the producer group: required. The broker sends this
  // connection check-backs for every transaction of the group, whoever prepared it.
  client::connection_options connection;
  // Without a checker every check is answered unknown (the broker retries, then abandons).
  transaction_checker checker;
  std::size_t checker_threads = 4;
  // Prepare and EndTx are retried with the same txid (the broker deduplicates) for this long.
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds retry_backoff_initial{20};
  std::chrono::milliseconds retry_backoff_max{1000};
  // Time from Prepare to the first check-back; 0 = the broker's tx_timeout.
  std::chrono::milliseconds tx_timeout{0};
};

// What commit() did.
struct commit_result {
  std::vector<send_result> positions;  // in the order the messages were added
  bool already_resolved = false;       // a repeated commit (e.g. after a check committed it)
};

class transactional_producer;

class transaction {
 public:
  enum class state { open, prepared, committed, rolled_back, failed };

  transaction(transaction&&) noexcept;
  transaction& operator=(transaction&&) noexcept;
  ~transaction();

  [[nodiscard]] const protocol::txid& id() const noexcept;
  [[nodiscard]] state current_state() const noexcept;
  // As added, each with its id (a UUIDv7 made by add() when it had none).
  [[nodiscard]] const std::vector<outgoing_message>& messages() const noexcept;

  // Before prepare(). Messages may go to several topics; all become visible together.
  transaction& add(outgoing_message message);
  // Before prepare(): acknowledge these deliveries of `group` with the commit. All acks of a
  // transaction belong to one group (acks of two groups: client::errc::invalid_argument at
  // prepare()). Errors at prepare(): the broker's UNKNOWN_DELIVERY when a delivery is not in
  // flight for the group.
  transaction& add_ack(const std::string& group, consumed_ref ref);

  // Stores the messages on the broker as PREPARED (durable, invisible). Retries retriable
  // failures with the same txid until request_timeout. Errors: client::errc::invalid_argument
  // (no messages, wrong state), the broker's (MESSAGE_TOO_LARGE, UNKNOWN_TOPIC, ...), or the
  // last retriable error (the broker may or may not have it: if it has, it will check back).
  [[nodiscard]] client::result<void> prepare();
  // EndTx COMMIT / ROLLBACK, retried like prepare(). Errors: TX_ALREADY_RESOLVED when a check
  // (or an operator) resolved it the other way first; a retriable error when the broker could
  // not be reached in time (the check-back will settle it).
  [[nodiscard]] client::result<commit_result> commit();
  [[nodiscard]] client::result<void> rollback();

 private:
  friend class transactional_producer;
  struct data;
  explicit transaction(std::unique_ptr<data> d);
  std::unique_ptr<data> d_;
};

// What send_in_transaction did.
struct tx_result {
  protocol::txid txid;
  tx_decision decision = tx_decision::unknown;  // what local_tx said (commit was done when commit)
  commit_result committed;                      // positions when committed
};

class transactional_producer {
 public:
  // Connects in the background and registers the checker. Errors surface from the first
  // request; an empty producer group fails every prepare() with client::errc::invalid_argument.
  explicit transactional_producer(transactional_producer_options options);
  ~transactional_producer();
  transactional_producer(const transactional_producer&) = delete;
  transactional_producer& operator=(const transactional_producer&) = delete;

  // A new transaction with a fresh random txid.
  [[nodiscard]] transaction begin();

  // prepare(); then local_tx(tx) runs the caller's local transaction and says how it ended;
  // then commit() or rollback() accordingly. local_tx throwing → rollback, and the exception
  // is rethrown. unknown → nothing is sent; the check-back decides. Errors: prepare()'s
  // (local_tx did not run), commit()/rollback()'s (local_tx ran: its decision is in the
  // error's text, and the check-back settles the transaction).
  [[nodiscard]] client::result<tx_result> send_in_transaction(std::vector<outgoing_message> messages,
                                                              const std::function<tx_decision(const transaction&)>& local_tx);

  // Check-backs answered so far, by answer (commit, rollback, unknown).
  struct check_counts {
    std::uint64_t commit = 0, rollback = 0, unknown = 0;
  };
  [[nodiscard]] check_counts checks_answered() const noexcept;

  [[nodiscard]] const std::shared_ptr<client::connection>& conn() const noexcept;
  // Closes the connection: open transactions are left to the check-back.
  void close();

  struct impl;  // shared with the transactions it began

 private:
  std::shared_ptr<impl> impl_;
};

}  // namespace txmq::producer
