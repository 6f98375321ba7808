#pragma once

// A follower's fetch session (docs/cluster.md "Replication", docs/protocol.md "ReplicaFetch"):
// one ReplicaFetch carries a fetch per partition the follower follows from one leader, and its
// answer one encoded ReplicaFetchResponse per partition. This header holds the part of the
// leader's answer that needs no cluster (tested in cluster_fetch_session_test): how the
// per-partition answers share max_frame_bytes, the store read of one partition and its
// encoding into batches (the stored records passed through: encode_raw_batches), and the
// follower's split of an answer into those records and the rest (split_partition_answer).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "txmq/protocol/wire.h"
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

// The batches part of a partition's answer, encoded: what batches_of(...).SerializeAsString()
// holds, built from the stored records (store::read_raw) without parsing a message. One
// ReplicaBatch per run of the same leader epoch (`epochs`: the partition's); each stored entry
// (MessageBatch field 2) becomes a ReplicaBatch `messages` entry (field 3) by its tag byte
// alone: the message bytes are the stored ones. A follower of any version parses it as before.
// False when a stored entry is malformed (nothing useful in `out` then).
[[nodiscard]] inline bool encode_raw_batches(const std::vector<storage::raw_messages>& runs,
                                             const std::vector<storage::epoch_entry>& epochs, std::string& out) {
  namespace wire = protocol::wire;
  struct segment {
    std::uint32_t epoch = 0;
    std::uint64_t base = 0;
    std::size_t entry_bytes = 0;
    std::vector<std::string_view> entries;
  };
  std::vector<segment> segments;
  for (const auto& run : runs) {
    std::string_view rest = run.entries;
    std::uint64_t offset = run.base_offset;
    storage::raw_entry e;
    while (!rest.empty()) {
      if (!storage::next_raw_entry(rest, e, false)) return false;
      const std::uint32_t epoch = storage::epoch_at(epochs, offset);
      if (segments.empty() || segments.back().epoch != epoch ||
          segments.back().base + segments.back().entries.size() != offset) {
        segments.push_back({epoch, offset, 0, {}});
      }
      segments.back().entries.push_back(e.entry);
      segments.back().entry_bytes += e.entry.size();
      ++offset;
    }
  }
  for (const auto& g : segments) {
    const std::size_t body = 1 + wire::varint_size(g.epoch) + 1 + wire::varint_size(g.base) + g.entry_bytes;
    out.push_back(wire::tag_byte(1, wire::k_len));  // ReplicaFetchResponse.batches
    wire::put_varint(out, body);
    out.push_back(wire::tag_byte(1, wire::k_varint));  // ReplicaBatch.leader_epoch
    wire::put_varint(out, g.epoch);
    out.push_back(wire::tag_byte(2, wire::k_varint));  // ReplicaBatch.base_offset
    wire::put_varint(out, g.base);
    for (auto entry : g.entries) {
      out.push_back(wire::tag_byte(3, wire::k_len));  // ReplicaBatch.messages: the same length and bytes
      out.append(entry.substr(1));
    }
  }
  return true;
}

// A ReplicaBatch of an answer as the follower keeps it: its messages in stored form
// (storage::raw_messages, ready for replica_append_request::raw).
struct raw_batch {
  std::int64_t leader_epoch = 0;
  storage::raw_messages messages;
};

// The follower's parse of one encoded partition answer: every field but `batches` parsed into
// `rest`; each batch's messages kept as bytes (their tag byte changed back to MessageBatch's),
// never parsed into messages (the store checks each entry's wire format and takes its id,
// replica_append_request::raw). False when the answer is malformed.
[[nodiscard]] inline bool split_partition_answer(std::string_view answer, v1::ReplicaFetchResponse& rest,
                                                 std::vector<raw_batch>& batches) {
  namespace wire = protocol::wire;
  std::string others;
  std::string_view s = answer;
  while (!s.empty()) {
    const std::string_view field_start = s;
    std::uint64_t field = 0;
    std::uint32_t wt = 0;
    if (!wire::take_tag(s, field, wt)) return false;
    if (field != 1) {
      if (!wire::skip_field(s, field, wt)) return false;
      others.append(field_start.substr(0, field_start.size() - s.size()));
      continue;
    }
    std::string_view b;
    if (wt != wire::k_len || !wire::take_bytes(s, b)) return false;
    raw_batch batch;
    batch.messages.entries.reserve(b.size());
    while (!b.empty()) {
      std::uint64_t f = 0;
      std::uint32_t t = 0;
      if (!wire::take_tag(b, f, t)) return false;
      std::uint64_t v = 0;
      if (f == 1 || f == 2) {
        if (t != wire::k_varint || !wire::take_varint(b, v)) return false;
        if (f == 1) batch.leader_epoch = static_cast<std::int64_t>(v);
        else batch.messages.base_offset = v;
      } else if (f == 3) {
        std::string_view m;
        if (t != wire::k_len || !wire::take_bytes(b, m)) return false;
        batch.messages.entries.push_back(wire::tag_byte(2, wire::k_len));  // MessageBatch.messages
        wire::put_varint(batch.messages.entries, m.size());
        batch.messages.entries.append(m);
        ++batch.messages.count;
      } else if (!wire::skip_field(b, f, t)) {
        return false;
      }
    }
    batches.push_back(std::move(batch));
  }
  return rest.ParseFromString(others);
}

}  // namespace txmq::broker::cluster_mode
