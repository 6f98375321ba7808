#pragma once

// A history checker for fault tests (issue 14): records every produce attempt with what the
// producer learned of it (acknowledged, failed, unknown) and every message a consumer read,
// then judges the history:
// - lost: acknowledged, never consumed (an acknowledged write the cluster lost);
// - invented: consumed but never attempted, consumed with another key or body than attempted,
//   or consumed although its attempt was refused for certain (`failed` means the broker
//   answered that it did NOT store it; a timeout or a broken connection is `unknown`);
// - duplicated: one id stored at two positions (partition, offset); reading one position
//   again is a redelivery and allowed;
// - order: per key, acknowledged messages stored in another order than they were produced
//   (attempts carry a per-key sequence; a key's messages compared by stored position).
// - misplaced: with acknowledged_at() recorded, an id acknowledged at a position (partition,
//   offset) that the consumed log holds for another id, or read at another position than
//   acknowledged: two writers acknowledged one position (two leaders of one partition), or an
//   acknowledgement from a log that was later truncated.
// Unknown attempts may or may not appear. Thread-safe: producers and consumers record from
// their own threads. Reusable: nothing here knows about brokers.

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace txmq::test {

enum class attempt_outcome : std::uint8_t { unknown = 0, acknowledged = 1, failed = 2 };

struct history_verdict {
  std::vector<std::string> lost;        // ids
  std::vector<std::string> invented;    // ids, with why
  std::vector<std::string> duplicated;  // ids, with the positions
  std::vector<std::string> order;       // keys, with the sequences out of order
  std::vector<std::string> misplaced;   // ids, with the acknowledged and the read positions
  std::size_t retained_away = 0;  // acknowledged below a retained_from() start
  std::size_t attempts = 0, acknowledged = 0, failed = 0, unknown = 0, consumed = 0, distinct_consumed = 0;

  [[nodiscard]] bool ok() const {
    return lost.empty() && invented.empty() && duplicated.empty() && order.empty() && misplaced.empty();
  }
  // One line of counts, then up to 5 examples of each fault.
  [[nodiscard]] std::string summary() const;
};

class history {
 public:
  history() = default;
  // A copy taken under the other's lock (e.g. the attempts, to judge a second log against).
  history(const history& other);
  history& operator=(const history&) = delete;

  // A produce attempt of message `id` with `key` and `body`; `seq` orders the attempts of
  // one key (the producer's own order). Outcome unknown until resolved.
  void attempt(const std::string& id, const std::string& key, const std::string& body, std::uint64_t seq);
  // What the producer learned; a later `acknowledged` wins over any other outcome (a retry
  // of the same id that succeeded), a `failed` never overrides an acknowledgement.
  void resolve(const std::string& id, attempt_outcome outcome);
  // The position the acknowledgement named (a producer's send_result), for `misplaced`.
  void acknowledged_at(const std::string& id, std::uint32_t partition, std::uint64_t offset);
  void consumed(const std::string& id, const std::string& key, const std::string& body, std::uint32_t partition,
                std::uint64_t offset);

  // Retention removed partition `partition`'s offsets below `start`: an acknowledgement at
  // such a position (acknowledged_at) is neither lost nor misplaced (counted retained_away).
  void retained_from(std::uint32_t partition, std::uint64_t start);
  // The lowest offset of `partition` read (consumed()), nullopt when none.
  [[nodiscard]] std::optional<std::uint64_t> lowest_read(std::uint32_t partition) const;
  [[nodiscard]] history_verdict check() const;
  // How many times the id was read (at any position).
  [[nodiscard]] std::size_t times_consumed(const std::string& id) const;

 private:
  struct attempt_rec {
    std::string key, body;
    std::uint64_t seq = 0;
    attempt_outcome outcome = attempt_outcome::unknown;
  };
  struct read_rec {
    std::string id, key, body;
    std::uint32_t partition = 0;
    std::uint64_t offset = 0;
  };
  mutable std::mutex mu_;
  std::map<std::string, attempt_rec> attempts_;
  std::vector<read_rec> reads_;
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::vector<std::string>> ack_positions_;
  std::map<std::uint32_t, std::uint64_t> retained_from_;
};

}  // namespace txmq::test
