#pragma once

// Waking the relay (outbox schema version 4; outbox-relay/README.md, "Waking the relay"). While
// the relay reads its shards on its own it holds their awake locks, and writers' commits send no
// NOTIFY: NOTIFY serialises committing transactions across the whole PostgreSQL cluster. Once
// its reads keep finding nothing it gives the locks up (falls asleep), waits out the commits
// that saw it awake, reads once more, and from then on waits for a NOTIFY or its poll interval.

#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>

#include "txmq/client/error.h"
#include "txmq/common/metrics.h"
#include "txmq/pg/pg.h"

namespace txmq::relay::detail {

// A statement on the relay's session (relay.cc's db_exec: it times each call for /healthz).
using db_exec = std::function<client::result<pg::result_ptr>(std::string_view sql, std::span<const pg::param> params)>;

// Waits until no writer holds the shards' committing lock: those that found the relay awake
// have ended, so a read now sees their rows. A writer that checked at its insert (SET CONSTRAINTS
// ... IMMEDIATE) may hold it for its whole transaction: after `timeout` the relay goes on and
// such a row waits for the poll interval.
std::string wait_for_committing_writers_sql(const std::set<int>& shards, std::chrono::milliseconds timeout);

// How long an awake relay waits before it reads its shards again when nothing was found, and
// when it falls asleep instead: read again at once after rows, then after 1, 2 and 4 ms; after
// that it falls asleep. A steady stream keeps it awake while gaps stay under ~7 ms.
class quiet_reads {
 public:
  void found_rows() noexcept { empty_ = 0; }
  void found_nothing() noexcept { ++empty_; }
  // The wait before the next read, or nullopt: fall asleep.
  [[nodiscard]] std::optional<std::chrono::milliseconds> next_wait() const noexcept;

 private:
  int empty_ = 0;  // reads in a row that found nothing
};

// The awake locks of one database session (they go with it). Metrics:
// txmq_relay_shards_awake, txmq_relay_sleep_wait_timeouts_total.
class wake_state {
 public:
  // `enabled`: the schema is version 4 or later (older triggers NOTIFY on every commit).
  wake_state(bool enabled, common::metrics_registry& metrics);
  ~wake_state();
  wake_state(const wake_state&) = delete;
  wake_state& operator=(const wake_state&) = delete;
  [[nodiscard]] bool awake() const noexcept { return !held_.empty(); }
  quiet_reads quiet;

  // A drain published rows. Asleep, it wakes only when the previous drain with rows ended under
  // 5 ms before (about 200 rows/s): below that rate commits rarely overlap, the NOTIFY lock costs
  // them little, and reading on its own would cost PostgreSQL more (per lone row: the lock
  // statements and five reads instead of one). Awake, it takes the locks of the `owned` shards it
  // lacks; one a committing writer holds shared is not taken (its writers go on notifying) and is
  // tried again 100 ms later.
  client::result<void> rows_published(const db_exec& exec, const std::set<int>& owned);
  // Gives up the locks of `shards` that are held (a shard released to another relay).
  client::result<void> give_up(const db_exec& exec, const std::set<int>& shards);
  // Gives up every lock and waits out the commits that found us awake (up to 100 ms); the
  // caller then reads once more, and after that a NOTIFY or the poll wakes it.
  client::result<void> fall_asleep(const db_exec& exec);

 private:
  bool enabled_;
  common::gauge& awake_gauge_;
  common::counter& wait_timeouts_;
  std::set<int> held_;
  std::chrono::steady_clock::time_point next_try_{};
  std::chrono::steady_clock::time_point last_rows_{};  // the end of the previous drain with rows
};

}  // namespace txmq::relay::detail
