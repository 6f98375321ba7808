#pragma once

// The pure decisions of transaction check-back (docs/protocol.md §9), kept apart from the io so
// they can be tested with an explicit clock:
//   - check_schedule: when the next check is due after an undecided one, and when a
//     transaction is abandoned;
//   - producer_pool: which live connection of a producer group gets the next check
//     (round-robin over the connections whose Hello declared the group), and the cap on open
//     checks per group (tx_checks_in_flight), so one group's backlog never holds up another's.
// Not thread-safe: one owner (the broker's io thread).

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace txmq::broker {

class check_schedule {
 public:
  // gaps: delays between later checks, the last one repeating (tx_check_schedule); must not be
  // empty (10 s is used when it is). max_checks: undecided checks before ABANDONED (≥ 1).
  check_schedule(std::vector<std::chrono::milliseconds> gaps, std::uint32_t max_checks);

  struct decision {
    std::uint32_t check_count = 0;  // undecided checks after this one
    bool abandon = false;           // that reached max_checks: PREPARED -> ABANDONED
    std::int64_t next_check_ms = 0; // when not abandoned: the next check's due time
  };
  // A check of a transaction that had `checks_before` undecided checks did not decide (UNKNOWN,
  // no answer in time, no producer connected) at now_ms.
  [[nodiscard]] decision undecided(std::uint32_t checks_before, std::int64_t now_ms) const;
  // The gap after the n-th undecided check (n ≥ 1).
  [[nodiscard]] std::chrono::milliseconds gap_after(std::uint32_t n) const;

 private:
  std::vector<std::chrono::milliseconds> gaps_;
  std::uint32_t max_checks_;
};

class producer_pool {
 public:
  // cap: open checks allowed per group at once (tx_checks_in_flight, ≥ 1).
  explicit producer_pool(std::uint32_t cap);

  // A connection that declared `group` in its Hello. Joining twice is a no-op.
  void join(const std::string& group, std::uint64_t connection);
  // The connection closed.
  void leave(const std::string& group, std::uint64_t connection);
  [[nodiscard]] bool has_producer(const std::string& group) const;

  enum class refusal { none, no_producer, at_cap };
  struct pick_result {
    std::optional<std::uint64_t> connection;  // set when a check may be sent now
    refusal why = refusal::none;
  };
  // The connection for the group's next check, round-robin; counts it as open. Refused when the
  // group has no connection or already has `cap` open checks.
  [[nodiscard]] pick_result pick(const std::string& group);
  // An open check of the group was answered, timed out or lost.
  void release(const std::string& group);
  [[nodiscard]] std::uint32_t open(const std::string& group) const;
  [[nodiscard]] std::uint32_t cap() const noexcept { return cap_; }

 private:
  struct group_state {
    std::vector<std::uint64_t> members;  // in join order
    std::size_t next = 0;                // round-robin position
    std::uint32_t open = 0;
  };
  std::uint32_t cap_;
  std::map<std::string, group_state> groups_;
};

}  // namespace txmq::broker
