#pragma once

// A follower's fetch session (docs/cluster.md "Replication", docs/protocol.md "ReplicaFetch"):
// one ReplicaFetch carries a fetch per partition the follower follows from one leader, and its
// answer one encoded ReplicaFetchResponse per partition. This header holds the part of the
// leader's answer that is pure arithmetic (tested alone in cluster_fetch_session_test): how the
// per-partition answers share max_frame_bytes.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace txmq::broker::cluster_mode {

// Room counted for each entry of ReplicaFetchResponse.partition_answers besides its bytes (the
// field's tag and length prefix: at most 1 + 5 bytes).
inline constexpr std::size_t k_partition_answer_overhead = 8;

// Builds the answers of a session's `n` partitions within `budget` bytes in all, visiting them
// from `start` on (the leader rotates it per answer, so that no partition is always the one
// left out when room runs short). build(i, left) returns partition i's encoded answer, its
// messages and group changes kept below `left` (a store read returns at least one message even
// when it is larger: such an answer may exceed `left`). An answer that would take the total past
// `budget` is replaced by skipped(i), which carries no messages or group changes (that partition
// is fetched again by the next request) — except for the first partition visited, which is kept
// whole as a single-partition answer would be. Returns the answers in visiting order.
[[nodiscard]] inline std::vector<std::string> pack_partition_answers(
    std::size_t n, std::size_t start, std::size_t budget,
    const std::function<std::string(std::size_t i, std::size_t left)>& build,
    const std::function<std::string(std::size_t i)>& skipped) {
  std::vector<std::string> out;
  out.reserve(n);
  std::size_t used = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const std::size_t i = (start + j) % n;
    const std::size_t left = used + k_partition_answer_overhead < budget ? budget - used - k_partition_answer_overhead : 0;
    std::string a;
    // With no room left the store is not read at all.
    if (j == 0 || left > 0) a = build(i, left);
    if (j > 0 && (left == 0 || a.size() > left)) a = skipped(i);
    used += a.size() + k_partition_answer_overhead;
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace txmq::broker::cluster_mode
