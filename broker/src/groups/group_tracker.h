#pragma once

// The delivery state of one consumer group, in memory: which messages are in flight to which
// member until when, which wait for a retry or their delivery time, which are held back behind
// an earlier message of the same key, and how far the group has acknowledged.
//
// It makes the decisions of docs/semantics.md §2 (ack deadline, retry schedule, max attempts →
// dead letters, per-key order, delayed messages) and returns, with each decision, the
// storage::group_update that records it; the caller persists it. It reads messages from the
// store (synchronously, RocksDB reads) but never writes. Not thread-safe: one owner thread.

#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "txmq/protocol/errc.h"
#include "txmq/protocol/result.h"
#include "txmq/storage/store.h"

namespace txmq::broker {

// A node that starts leading a partition reloads only that partition's group state
// (store::load_group_partition). TXMQ_TEST_FULL_GROUP_LOAD=1 at startup loads the whole group
// instead, as before (every partition's records and a count of every dead letter): for the
// before/after figure of scripts/bench-leadership-stall.sh only.
inline result<storage::group_state> load_for_leadership(const storage::store& store, const std::string& group,
                                                        const std::string& topic, std::uint32_t partition) {
  static const bool whole = [] {
    const char* v = std::getenv("TXMQ_TEST_FULL_GROUP_LOAD");
    return v != nullptr && v[0] == '1';
  }();
  if (whole) return store.load_group(group);
  return store.load_group_partition(group, topic, partition);
}

struct delivery_settings {
  std::chrono::milliseconds ack_deadline{30'000};
  std::vector<std::chrono::milliseconds> retry_schedule{std::chrono::seconds(10)};
  std::uint32_t max_attempts = 16;
  // How far a partition's dispatch cursor may run ahead of its ack floor; bounds memory.
  std::size_t max_unacked_per_partition = 10'000;
};

struct delivered {
  v1::Message message;  // topic, partition, offset, attempt set (not in a raw fetch)
  std::int64_t deadline_ms = 0;
  // A raw fetch (group_tracker::fetch with raw = true) leaves `message` empty and names the
  // message as the log stores it instead (storage::raw_message): its encoding is
  // fetch_result::buffers[buffer][begin, begin + size), topic, partition, offset and attempt
  // still to be appended (encode_fetch_response).
  const std::string* topic = nullptr;  // the tracker's; valid until its next call
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
  std::uint32_t attempt = 0;
  std::size_t buffer = 0, begin = 0, size = 0;
  std::int64_t publish_time_ms = 0;
  std::int64_t deliver_at_ms = 0;
  std::size_t body_bytes = 0;
};

// Names one delivered message; attempt 0 means whichever delivery of it is in flight.
struct delivery_ref {
  std::string topic;
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
  std::uint32_t attempt = 0;
};

// Whether an update records nothing (nothing to write).
[[nodiscard]] inline bool is_empty(const storage::group_update& u) {
  return u.dispatched.empty() && u.deliveries.empty() && u.acks.empty() && u.dead.empty() && u.redrive.empty();
}

// How far (exclusive) a partition's messages may be handed to consumers by this broker, given
// its local log's end (docs/cluster.md "Consumers"). Unset (single-node mode): the log end, at
// no cost. In cluster mode the service sets it: 0 for a partition this node does not lead (a
// follower's copy is never delivered), the high watermark for a replicated partition it leads
// (a message a failover may truncate is never delivered). Called on the owner thread.
using visible_end_fn = std::function<std::uint64_t(const std::string& topic, std::uint32_t partition,
                                                   std::uint64_t log_end)>;

// Each topic's partitions' deliverable ends (the log end, or what `visible` says), by topic
// name: what the lag of many groups needs, read from the store once (read_end_offsets) instead
// of once per group.
using topic_end_offsets = std::unordered_map<std::string, std::vector<std::uint64_t>>;
[[nodiscard]] topic_end_offsets read_end_offsets(const storage::store& store, const visible_end_fn* visible = nullptr);

struct partition_summary {
  std::string topic;
  std::uint32_t partition = 0;
  std::uint64_t acked = 0;
  std::uint64_t dispatched = 0;
  std::uint32_t in_flight = 0;
  std::uint32_t waiting = 0;
  // The deliverable end when the visible_end hook is set (cluster mode), read on the owner
  // thread; unset: the reader takes the log end.
  std::optional<std::uint64_t> end_offset;
};

// An upper bound of what `m` of `topic` takes encoded as one Delivery of a FetchResponse, with
// the fields a fetch sets (topic, partition, offset, attempt, deadline) and its headers.
[[nodiscard]] std::size_t encoded_delivery_bytes(const v1::Message& m, const std::string& topic);

class group_tracker {
 public:
  // `visible` (may be null or empty: the log end) bounds what is delivered; it outlives the tracker.
  group_tracker(std::string name, delivery_settings settings, const storage::store& store,
                const visible_end_fn* visible = nullptr);

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const std::vector<std::string>& topics() const noexcept { return topics_; }
  [[nodiscard]] bool subscribes(const std::string& topic) const;

  // Takes the stored state (at start, or after ensure_group added topics). Partitions already
  // known keep their in-memory state. Messages between the ack floor and the dispatch cursor
  // without a delivery record (held behind a key when the broker stopped) are ready again.
  [[nodiscard]] result<void> load(const storage::group_state& state, std::int64_t now_ms);

  // Hands out up to `max` messages of the given topics to `member`: due retries first, then
  // new messages from the cursors. Messages whose key has an earlier message in flight or
  // waiting are held back; messages with a future deliver_at wait for it.
  struct fetch_result {
    std::vector<delivered> messages;
    storage::group_update update;
    std::vector<std::string> buffers;  // a raw fetch's encodings (delivered::buffer)
  };
  // The messages handed out take at most max_bytes encoded as deliveries of a FetchResponse
  // (encoded_delivery_bytes; at least one message if any is deliverable), so the answer fits in
  // one frame; the rest stay for the next fetch.
  // `raw`: the messages stay encoded as stored (delivered's raw fields), so that a Fetch answer
  // copies their bytes instead of parsing and re-encoding each (issue #15).
  [[nodiscard]] result<fetch_result> fetch(std::uint64_t member, const std::vector<std::string>& topics,
                                           std::size_t max, std::size_t max_bytes,
                                           std::chrono::milliseconds ack_deadline, std::int64_t now_ms,
                                           bool raw = false);

  struct refs_result {
    std::vector<protocol::errc> results;  // per ref: errc{} (0) when applied, unknown_delivery
    storage::group_update update;
  };
  // Only messages in flight whose deadline has not passed (and, when the ref names an attempt,
  // in that attempt) can be acked, nacked or extended.
  //
  // `tx` (cluster mode, read-process-write, docs/cluster.md "Transactions"): the txid on whose
  // behalf a transaction's home leader settles. An extend by a transaction *holds* the delivery
  // for it: until that transaction acks (COMMIT) or nacks (ROLLBACK) it, another
  // transaction's settle of it is refused (unknown_delivery), and so is the consumer's own ack or
  // nack; the consumer's extend never shortens the hold. The holder and the hold's deadline are
  // the delivery record's (storage::delivery_record::holder, replicated with it), so a new leader
  // of the partition reloads both and refuses exactly what this one refused.
  [[nodiscard]] refs_result ack(const std::vector<delivery_ref>& refs, std::int64_t now_ms, std::string_view tx = {});
  // delay 0: the retry schedule decides. After max_attempts deliveries the message is dead.
  [[nodiscard]] refs_result nack(const std::vector<delivery_ref>& refs, std::chrono::milliseconds delay,
                                 std::int64_t now_ms, std::string_view tx = {});
  [[nodiscard]] refs_result extend(const std::vector<delivery_ref>& refs, std::chrono::milliseconds by,
                                   std::int64_t now_ms, std::string_view tx = {});

  // Deadlines that passed become retries (or dead letters). Returns the update to persist.
  [[nodiscard]] storage::group_update expire(std::int64_t now_ms);
  // Dead letters put back (storage::store::update_group with redrive has written them).
  void redriven(const std::vector<storage::message_ref>& refs, std::int64_t now_ms);

  // Cluster mode (docs/cluster.md "Consumer groups"): forget a partition this node no longer
  // leads (its in-memory state, in flight included: the leader's copy decides), or take it
  // again from the stored state (`state`: load_group's, of which only this partition is read)
  // when this node starts leading it.
  void drop_partition(const std::string& topic, std::uint32_t p);
  [[nodiscard]] result<void> reload_partition(const storage::group_state& state, const std::string& topic,
                                              std::uint32_t p, std::int64_t now_ms);

  // Whether the message was delivered to the group at least once and is not done yet (in
  // flight, or waiting for a retry): what a transaction may carry as an ack.
  [[nodiscard]] bool outstanding(const std::string& topic, std::uint32_t partition, std::uint64_t offset) const;
  // The store already acknowledged these messages for the group (the commit of a transaction
  // carrying them, read-process-write in docs/protocol.md §9): forget them, whatever their state, without
  // another write. Refs the tracker does not hold are ignored.
  void acked_elsewhere(const std::vector<storage::message_ref>& refs);

  // Whether a fetch at now_ms could hand out something (for waking long polls): a due retry, a
  // ready message below the deliverable end, or a cursor behind its partition's deliverable end.
  [[nodiscard]] bool has_deliverable(std::int64_t now_ms) const;
  // The earliest deadline or retry time, if any.
  [[nodiscard]] std::optional<std::int64_t> next_event_ms() const;
  [[nodiscard]] std::vector<partition_summary> summary() const;
  // Messages of the group's partitions not yet acknowledged, given each topic's end offsets
  // (read once for many groups): O(partitions of the group), no walk of the deliveries as
  // summary() does. A topic missing from `ends` (deleted) counts nothing.
  [[nodiscard]] std::uint64_t lag(const topic_end_offsets& ends) const;
  [[nodiscard]] std::uint64_t in_flight() const noexcept { return in_flight_count_; }

 private:
  enum class state : std::uint8_t { ready, in_flight, waiting };
  struct entry {
    state st = state::ready;
    std::uint32_t attempt = 0;  // deliveries so far
    std::int64_t when_ms = 0;   // deadline (in_flight) or visible time (waiting)
    std::uint64_t member = 0;
    std::optional<std::string> key;
    std::optional<std::multimap<std::int64_t, std::pair<std::size_t, std::uint64_t>>::iterator> timeline_pos;
  };
  struct partition {
    std::string topic;
    std::uint32_t id = 0;
    std::uint64_t floor = 0;  // every offset below is done
    std::uint64_t next = 0;   // next offset not yet taken from the log
    std::map<std::uint64_t, entry> pending;
    // Offsets not yet done, per key, in order: only the front may be in flight.
    std::unordered_map<std::string, std::deque<std::uint64_t>> keys;
    // Ready entries that may be handed out now (eligible by key), in offset order.
    std::set<std::uint64_t> deliverable;
  };

  std::size_t partition_index(const std::string& topic, std::uint32_t p);
  std::optional<std::size_t> find_partition(const std::string& topic, std::uint32_t p) const;
  bool eligible(const partition& part, std::uint64_t offset, const entry& e) const;
  // Adds a pending offset to its key's queue in offset order.
  void enqueue_key(partition& part, std::uint64_t offset, const entry& e);
  void make_ready(std::size_t pidx, std::uint64_t offset, entry& e);
  // The in-flight entry a ref names, or nullptr.
  entry* in_flight_entry(const delivery_ref& r, std::int64_t now_ms, std::size_t& pidx);
  // Applies fn to each ref's in-flight entry; refs without one, or held by a transaction other
  // than `tx` (an ack or nack; `extend` true: an extend by another transaction), answer
  // unknown_delivery.
  template <class Fn>
  refs_result settle(const std::vector<delivery_ref>& refs, std::int64_t now_ms, std::string_view tx, bool extend,
                     Fn&& fn);
  // The transaction holding (pidx, offset), or nullptr.
  [[nodiscard]] const std::string* holder(std::size_t pidx, std::uint64_t offset) const;
  void deliver(std::size_t pidx, std::uint64_t offset, entry& e, v1::Message msg, std::uint64_t member,
               std::chrono::milliseconds ack_deadline, std::int64_t now_ms, fetch_result& out);
  // The bookkeeping of a delivery (in flight under its deadline, its record when redelivered),
  // without the message: the raw fetch's.
  delivered& deliver_entry(std::size_t pidx, std::uint64_t offset, entry& e, std::uint64_t member,
                           std::chrono::milliseconds ack_deadline, std::int64_t now_ms, fetch_result& out);
  void set_timeline(std::size_t pidx, std::uint64_t offset, entry& e, std::optional<std::int64_t> when);
  // The message at (partition, offset) is done (acked or dead): forget it, unblock its key,
  // advance the floor.
  void finish(std::size_t pidx, std::uint64_t offset);
  // Retry or dead letter after a failed delivery.
  void fail_delivery(std::size_t pidx, std::uint64_t offset, std::chrono::milliseconds delay, std::int64_t now_ms,
                     const char* why, storage::group_update& update);
  storage::delivery_record record_of(const partition& part, std::uint64_t offset, const entry& e) const;
  result<std::optional<v1::Message>> read_one(const partition& part, std::uint64_t offset) const;
  std::chrono::milliseconds retry_delay(std::uint32_t attempt) const;
  [[nodiscard]] bool bounded() const noexcept { return visible_ != nullptr && *visible_; }
  // Below which offset `part` may be delivered: the hook's answer (capped at the log end), or
  // the log end; 0 when the topic or partition is gone.
  [[nodiscard]] std::uint64_t deliverable_end(const partition& part) const;
  [[nodiscard]] std::uint64_t deliverable_end(const partition& part, std::uint64_t log_end) const;

  std::string name_;
  delivery_settings settings_;
  const storage::store& store_;
  const visible_end_fn* visible_;
  std::vector<std::string> topics_;
  std::vector<partition> partitions_;
  std::map<std::pair<std::string, std::uint32_t>, std::size_t> index_;
  std::multimap<std::int64_t, std::pair<std::size_t, std::uint64_t>> timeline_;
  std::uint64_t in_flight_count_ = 0;
  std::size_t rotate_ = 0;  // fairness across partitions
  // Deliveries held by a transaction (extend with a tx), by (partition index, offset) → txid.
  std::map<std::pair<std::size_t, std::uint64_t>, std::string> holds_;
};

// Frame{correlation_id, fetch_response{deliveries}} of a raw fetch (group_tracker::fetch with
// raw = true), encoded into `out` (cleared first): each message's stored bytes, then topic,
// partition, offset and attempt, which override whatever the stored bytes hold of them (a
// later singular field wins in protobuf's encoding), then the deadline. It parses to the Frame
// that a fetch without raw, its messages moved into deliveries, encodes to; without parsing
// each message, building it, or copying its body twice (issue #15: serialize once).
void encode_fetch_response(std::uint64_t correlation_id, const group_tracker::fetch_result& r, std::string& out);

}  // namespace txmq::broker
