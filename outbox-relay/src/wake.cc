#include "wake.h"

#include <algorithm>
#include <iterator>

#include "txmq/producer/pg_schema.h"

namespace txmq::relay::detail {

std::string wait_for_committing_writers_sql(const std::set<int>& shards, std::chrono::milliseconds timeout) {
  // One statement, one round trip: the xact locks go at its end. The shards are our own ints.
  return "DO $$ BEGIN SET LOCAL lock_timeout = '" + std::to_string(timeout.count()) +
         "ms'; PERFORM pg_advisory_xact_lock(" + std::to_string(producer::outbox_committing_lock_class) +
         ", s) FROM unnest('" + pg::int_array_literal(shards) + "'::int[]) s; END $$";
}

std::optional<std::chrono::milliseconds> quiet_reads::next_wait() const noexcept {
  using std::chrono::milliseconds;
  switch (empty_) {
    case 0: return milliseconds(0);
    case 1: return milliseconds(1);
    case 2: return milliseconds(2);
    case 3: return milliseconds(4);
    default: return std::nullopt;
  }
}

wake_state::wake_state(bool enabled, common::metrics_registry& metrics)
    : enabled_(enabled),
      awake_gauge_(metrics.add_gauge("txmq_relay_shards_awake",
                                     "owned shards this relay reads on its own: their writers' commits send no NOTIFY")),
      wait_timeouts_(metrics.add_counter("txmq_relay_sleep_wait_timeouts_total",
                                         "times falling asleep stopped waiting (100 ms) for a writer that found the relay "
                                         "awake; such a row waits for the poll interval")) {}

// The session's locks went with it (or are given up at shutdown).
wake_state::~wake_state() { awake_gauge_.set(0); }

client::result<void> wake_state::rows_published(const db_exec& exec, const std::set<int>& owned) {
  quiet.found_rows();
  const auto now = std::chrono::steady_clock::now();
  const bool busy = now - last_rows_ < std::chrono::milliseconds(5);
  last_rows_ = now;
  std::set<int> missing;
  std::ranges::set_difference(owned, held_, std::inserter(missing, missing.end()));
  if (!enabled_ || (!awake() && !busy) || missing.empty() || now < next_try_) return outcome::success();
  const pg::param params[] = {std::to_string(producer::outbox_awake_lock_class), pg::int_array_literal(missing)};
  auto r = exec("SELECT s FROM unnest($2::int[]) s WHERE pg_try_advisory_lock($1::int, s)", params);
  if (!r) return r.error();
  for (int i = 0; i < PQntuples(r.value().get()); ++i) held_.insert(std::stoi(PQgetvalue(r.value().get(), i, 0)));
  awake_gauge_.set(static_cast<double>(held_.size()));
  next_try_ = held_.size() < owned.size() ? now + std::chrono::milliseconds(100) : std::chrono::steady_clock::time_point{};
  return outcome::success();
}

client::result<void> wake_state::give_up(const db_exec& exec, const std::set<int>& shards) {
  std::set<int> ours;
  std::ranges::set_intersection(shards, held_, std::inserter(ours, ours.end()));
  if (ours.empty()) return outcome::success();
  const pg::param params[] = {std::to_string(producer::outbox_awake_lock_class), pg::int_array_literal(ours)};
  auto r = exec("SELECT pg_advisory_unlock($1::int, s) FROM unnest($2::int[]) s", params);
  if (!r) return r.error();
  for (int s : ours) held_.erase(s);
  awake_gauge_.set(static_cast<double>(held_.size()));
  return outcome::success();
}

client::result<void> wake_state::fall_asleep(const db_exec& exec) {
  const auto shards = held_;
  if (auto r = give_up(exec, shards); !r) return r.error();
  quiet = {};
  auto r = exec(wait_for_committing_writers_sql(shards, std::chrono::milliseconds(100)), {});
  if (!r && pg::sqlstate(r.error()) != "55P03") return r.error();
  if (!r) wait_timeouts_.inc();  // lock_not_available: the timeout
  return outcome::success();
}

}  // namespace txmq::relay::detail
