#pragma once

// What the store offers replication (cluster mode, DESIGN §8, docs/cluster.md): leader-epoch
// records per partition, appends of a leader's batch at the leader's offsets on a follower,
// truncation of a partition's log to an offset. Declared apart from store.h so the replication
// layer's types stay in one place; the calls themselves are members of txmq::storage::store.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "txmq/v1/frame.pb.h"
#include "txmq/v1/message.pb.h"

namespace txmq::storage {

// A leader epoch began at start_offset: the first offset written under that epoch. A
// partition's entries are kept in increasing epoch and non-decreasing start order (persisted
// under the partition; truncate() drops those that start at or past its offset).
struct epoch_entry {
  std::uint32_t epoch = 0;
  std::uint64_t start_offset = 0;
  friend bool operator==(const epoch_entry&, const epoch_entry&) = default;
};

// Messages in their stored encoding (cluster mode: a leader passes its stored records to its
// followers, which store the same bytes: no parse or re-encoding on either side,
// docs/cluster.md "Replication"). `entries` holds `count` consecutive messages from
// `base_offset` on, each as a field of a txmq.v1.MessageBatch: tag 0x12, the length (varint),
// the txmq.v1.Message as stored (no topic, partition, offset or attempt; publish_time_ms set).
struct raw_messages {
  std::uint64_t base_offset = 0;
  std::uint32_t count = 0;
  std::string entries;
};

// store::read_raw: what read() would return, in stored form: one run per stored record read,
// consecutive, in offset order (a run may span leader epochs: a follower's commit group can
// hold two batches of one partition).
struct raw_read {
  std::vector<raw_messages> runs;
  std::uint64_t next_offset = 0;
  std::uint64_t start_offset = 0;
  std::uint64_t high_watermark = 0;
  std::uint64_t written_end = 0;
};

// One entry of raw_messages::entries, and what the store needs of its message.
struct raw_entry {
  std::string_view entry;    // tag, length and message
  std::string_view message;  // the serialized txmq.v1.Message
  std::string_view id;       // its id field (16 bytes once checked)
  std::int64_t publish_time_ms = 0;
  std::size_t body_bytes = 0;
};
// Takes the first entry off `rest` (a MessageBatch `messages` field, tag 0x12 or, with
// `tag` given, another length-delimited tag byte, e.g. ReplicaBatch's 0x1a) into `out`. With
// `check_message`, the message's fields are walked too (well-formed wire format, a 16-byte id
// not all zeros) and id/publish_time_ms/body_bytes filled in. False, `rest` unchanged, when
// malformed. Cheap: no allocation, no copy.
[[nodiscard]] bool next_raw_entry(std::string_view& rest, raw_entry& out, bool check_message, char tag = 0x12);

// A follower's append: a leader's messages at the leader's offsets. base_offset must be the
// partition's next offset (otherwise errc::invalid_argument and nothing is written: the
// follower truncates or fetches again); leader_epoch must not be older than the partition's
// latest epoch entry (errc::invalid_argument), and a newer one is recorded as starting at
// base_offset. Messages keep their publish time; their ids enter the dedupe index (without a
// duplicate check: the leader decided). The messages' topic/partition/offset fields are ignored.
struct replica_append_request {
  std::string topic;
  std::uint32_t partition = 0;
  std::uint64_t base_offset = 0;
  std::uint32_t leader_epoch = 0;
  std::vector<v1::Message> messages;
  // Instead of `messages` (left empty): the leader's stored records, stored as they are
  // (raw->base_offset == base_offset). Each entry is checked (next_raw_entry with
  // check_message), so a malformed one is refused (errc::invalid_argument) before anything is
  // written; its id enters the dedupe index like a parsed message's.
  std::optional<raw_messages> raw;
  // The topic is created with this many partitions when missing (a follower learns topics
  // from the leader); without it a missing topic fails with errc::unknown_topic.
  std::optional<std::uint32_t> auto_create_partitions;
  bool sync = true;
};

// Kafka's OffsetsForLeaderEpoch answer (KIP-101/279): for a follower whose last epoch is
// `epoch`, the greatest epoch <= `epoch` this log knows and the offset where that epoch ended
// here (the next epoch's start, or the log end for the latest). A follower truncates to
// min(its own end of that epoch, end_offset). No entry <= epoch: {nullopt, the first entry's
// start (or log_end when there is none)}: the follower keeps nothing past that.
struct epoch_end {
  std::optional<std::uint32_t> epoch;
  std::uint64_t end_offset = 0;
  friend bool operator==(const epoch_end&, const epoch_end&) = default;
};
[[nodiscard]] epoch_end end_offset_for_epoch(const std::vector<epoch_entry>& epochs, std::uint32_t epoch,
                                             std::uint64_t log_end);

// Consumer-group state replicated with its partition (docs/cluster.md "Consumer groups"). With
// store_options::log_group_changes, every change of a group's state of a partition (an
// update_group's part of that partition, or the cursor ensure_group starts) is also written, in
// the same atomic write, as a txmq.v1.GroupChange at the next seq of the partition's change
// sequence; a follower applies the leader's changes at the same seqs (apply_group_changes), or
// replaces its whole group state of the partition by the leader's (install_group_snapshot).
// The sequence keeps the last k_group_change_window changes of each partition; a follower
// further behind takes a snapshot.
inline constexpr std::uint64_t k_group_change_window = 50'000;

// Where an update_group's change of one partition ended: answer the ack once every ISR member
// reports a group seq >= end_seq.
struct group_change_ref {
  std::string topic;
  std::uint32_t partition = 0;
  std::uint64_t end_seq = 0;
  friend bool operator==(const group_change_ref&, const group_change_ref&) = default;
};

// store::group_changes: the changes from the asked seq on, up to the durable end (end), or
// snapshot_needed when the asked seq is not kept (trimmed, or beyond end: a diverged follower).
struct group_changes_read {
  std::vector<v1::GroupChange> changes;
  std::uint64_t end = 0;
  bool snapshot_needed = false;
};

// The epoch of the message at `offset`: the greatest entry starting at or before it (0 when none).
[[nodiscard]] std::uint32_t epoch_at(const std::vector<epoch_entry>& epochs, std::uint64_t offset);

}  // namespace txmq::storage
