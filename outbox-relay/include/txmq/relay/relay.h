#pragma once

// txmq-relay's engine (docs/semantics.md §4): owns outbox shards through PostgreSQL advisory
// locks, reads each owned shard in seq order in batches, publishes the rows with their id as
// message id and deletes them only after the broker acknowledged them (fsynced).
//
// One thread, one PostgreSQL connection: the connection that holds a shard's lock is the one
// that reads and deletes its rows, so a relay that loses its connection loses its shards and
// can no longer delete anything of them. Publishing goes through a producer with one batch in
// flight per topic, so rows of one shard reach the broker in seq order across retries; after a
// crash of either side the unacknowledged rows are published again with the same ids, and the
// broker's dedupe stores them once.
//
// Failures are retried for ever with capped exponential back-off (PostgreSQL unreachable,
// broker unreachable or refusing), logged once per change of state, and shown in the metrics
// and in txmq_relay (`txmq outbox status`). Nothing is deleted that the broker did not ack.
//
// Thread-safety: run() on one thread; stop() and status() from any thread (stop() is also
// safe from a signal handler).

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "txmq/common/log.h"
#include "txmq/common/metrics.h"
#include "txmq/client/connection.h"
#include "txmq/client/error.h"

namespace txmq::relay {

// The relay logs at the levels of txmq's logger (txmq/common/log.h); txmq-relay writes its
// lines there.
using log_level = common::log::level;

struct relay_options {
  std::string conninfo;                     // libpq conninfo or URI of the application's database
  std::string broker = "127.0.0.1:7878";    // HOST:PORT
  client::tls_options tls;                  // --tls, --tls-ca, --tls-cert, --tls-key
  // A principal's token for a broker with auth (--token, --token-file, TXMQ_TOKEN); it needs
  // produce on the outbox rows' topics. Never logged.
  std::string auth_token;
  std::string relay_id;                     // shown in txmq_relay and application_name; default host:pid
  int shards = 0;                           // 0 = txmq_schema.shards
  int batch = 500;                          // rows per shard per round (read, publish, delete)
  // Broker connections; shard s always uses s % publishers. One: a round goes out in seq order in
  // one stream, its ids ascending at the broker (cheaper there than two streams over the same ids).
  int publishers = 1;
  std::chrono::milliseconds poll_interval{1000};  // fallback when no NOTIFY arrives
  // How often shares are recomputed and txmq_relay is updated; a dead relay's shards are taken
  // within about this (its locks vanish with its connection at once).
  std::chrono::milliseconds rebalance_interval{1000};
  std::chrono::milliseconds backoff_initial{100};
  std::chrono::milliseconds backoff_max{5000};
  // How long one batch may wait for the broker's acks before it counts as failed (and is
  // published again after a back-off).
  std::chrono::milliseconds publish_timeout{10000};
  // A relay whose heartbeat (in txmq_relay, every rebalance_interval) is older than this while
  // its session still holds its locks is frozen or hung: another relay ends that session, so
  // its shards move. Must exceed publish_timeout + backoff_max + rebalance_interval (the
  // longest a working relay goes without a heartbeat). 0 = never.
  std::chrono::milliseconds stale_after{30000};
  // Metrics (txmq_relay_*) go here when set; must outlive the relay.
  common::metrics_registry* metrics = nullptr;
  // Where log lines go. Default: none.
  std::function<void(log_level, std::string_view)> log;
};

struct relay_status {
  bool database_up = false;
  bool pg_ok = true;  // false from a failed statement to the next that works
  // How long the statement in progress has waited for PostgreSQL (0 when none is running).
  std::chrono::milliseconds pg_waiting{0};
  bool broker_up = true;  // until a publish fails
  int shards_owned = 0;
  int live_relays = 0;
  std::string last_error;
};

// A statement unanswered this long makes the relay unhealthy (a frozen or hung server).
inline constexpr std::chrono::milliseconds k_pg_silent{5000};

struct pg_health_status {
  bool healthy = true;
  std::string reason;  // "PostgreSQL unavailable: ...", "... statements fail: ...", "... has not answered ..."
};

// Whether PostgreSQL serves the relay: connected, the last statement worked, and none has
// waited k_pg_silent or more. What /healthz and txmq_relay_pg_healthy report.
[[nodiscard]] pg_health_status relay_pg_health(const relay_status& status);

class relay {
 public:
  explicit relay(relay_options options);
  ~relay();
  relay(const relay&) = delete;
  relay& operator=(const relay&) = delete;

  // Works until stop(): then finishes the batch in flight, releases the shards, removes its
  // txmq_relay row and returns success. Returns an error only for a setting it cannot work with
  // (no relay can run: e.g. a bad broker address); everything else is retried.
  [[nodiscard]] client::result<void> run();
  // Asks run() to return. Async-signal-safe.
  void stop() noexcept;
  [[nodiscard]] relay_status status() const;

 private:
  class impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace txmq::relay
