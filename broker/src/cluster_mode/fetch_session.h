#pragma once

// A follower's fetch session (docs/cluster.md "Replication", docs/protocol.md "ReplicaFetch"):
// one ReplicaFetch carries a fetch per partition the follower follows from one leader, and its
// answer one encoded ReplicaFetchResponse per partition. This header holds the part of the
// leader's answer that needs no cluster (tested in cluster_fetch_session_test): how the
// per-partition answers share max_frame_bytes, the store read of one partition and its
// encoding into batches.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "txmq/storage/replica.h"
#include "txmq/storage/store.h"
#include "txmq/v1/frame.pb.h"

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

// The store read of one partition's fetch in a session: from its fetch offset, what the leader
// has written (before its fsync: the follower's fsync overlaps it), at most max_fetch_messages
// (or fewer when the follower asks fewer), and `budget / 2` bytes (the other half is for the
// partition's group changes; the store returns one message even beyond it).
[[nodiscard]] inline storage::read_request session_read(const v1::ReplicaFetchRequest& req,
                                                        std::uint32_t max_fetch_messages, std::size_t budget) {
  storage::read_request r;
  r.topic = req.topic();
  r.partition = req.partition();
  r.from_offset = req.fetch_offset();
  r.max_messages = req.max_messages() ? std::min(req.max_messages(), max_fetch_messages) : max_fetch_messages;
  r.unsynced = true;
  r.max_bytes = std::max<std::size_t>(std::min<std::size_t>(4u << 20, budget / 2), 1);
  return r;
}

// The batches part of a partition's answer (a ReplicaFetchResponse holding only batches): the
// messages read, one batch per run of the same leader epoch, each message without topic,
// partition and offset (its offset is the batch's base_offset + its index).
[[nodiscard]] inline v1::ReplicaFetchResponse batches_of(std::vector<v1::Message> messages,
                                                         const std::vector<storage::epoch_entry>& epochs) {
  v1::ReplicaFetchResponse out;
  v1::ReplicaBatch* batch = nullptr;
  std::uint32_t batch_epoch = 0;
  for (auto& m : messages) {
    const std::uint32_t epoch = storage::epoch_at(epochs, m.offset());
    if (!batch || epoch != batch_epoch) {
      batch = out.add_batches();
      batch->set_leader_epoch(epoch);
      batch->set_base_offset(m.offset());
      batch_epoch = epoch;
    }
    m.clear_topic();
    m.clear_partition();
    m.clear_offset();
    *batch->add_messages() = std::move(m);
  }
  return out;
}

}  // namespace txmq::broker::cluster_mode
