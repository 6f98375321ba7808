#pragma once

// The durable store of a txmq broker: topics and their partitioned message logs, the dedupe
// index, half (prepared) transactions, consumer-group state and dead letters.
// It is one piece (over 600 lines) because it is the one contract the broker, the tools and
// the tests program against; its declarations are grouped by concern below.
//
// Threading: every member function is thread-safe. Writes are queued to one writer thread (the
// group committer): all writes that arrive while it is busy are applied together in one RocksDB
// WriteBatch; a second thread makes every batch written meanwhile durable with one fsync and
// then runs each caller's completion, in order, with that caller's own result. Completions run
// on that thread: they must be quick (post the result to your own executor); they may submit
// further requests, which only enqueue, but must never wait for one.
// Reads run on the calling thread. They never see a message before its append was fsynced.
//
// Errors: every call returns or completes with result<T>; error codes are txmq::storage::errc.
// After an io_error or corruption on write the store refuses all further writes
// (errc::store_failed): reopen it after fixing the cause. Nothing is acknowledged that was not
// written. The failing calls' error text says what failed with RocksDB's reason ("fsync of the
// write-ahead log failed: IO error: ..."), and every refused write's text repeats that first
// failure, so the cause reaches whoever sees any of them. One exception: when the first failure
// was a write that found the disk full, the store resumes by itself once space is back (see
// health()). Below store_options::min_free_bytes of free space, append and prepare fail with
// errc::store_full while every other write still runs.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "txmq/protocol/message_id.h"
#include "txmq/protocol/result.h"
#include "txmq/storage/errc.h"
#include "txmq/storage/replica.h"
#include "txmq/v1/frame.pb.h"
#include "txmq/v1/message.pb.h"

namespace txmq::storage {

using protocol::message_id;
using protocol::txid;

template <class T>
using completion = std::function<void(result<T>)>;

struct store_options {
  std::filesystem::path dir = "data";
  // RocksDB over an in-memory file system: the same code and semantics, nothing on disk
  // (tests of the layers above). Such a store cannot be reopened.
  bool in_memory = false;
  // How long message ids are remembered for dedupe, and resolved transaction outcomes kept.
  std::chrono::milliseconds dedupe_window = std::chrono::hours(24);
  // Read every block of every file once at open so corruption is found before serving, not
  // later on a read. Costs about one sequential read of the store.
  bool verify_checksums_on_open = true;
  // RocksDB's flush and compaction threads at nice 19 while no write waits for them, raised
  // back to the process's priority while RocksDB delays or stops writes (storage/README.md
  // "Background priority"). Needs root, CAP_SYS_NICE or an RLIMIT_NICE that allows raising a
  // thread back; without, or on an in-memory store, they keep the process's priority. One
  // store per process: RocksDB's thread pools are the process's.
  bool low_priority_background = true;
  // The least time between the starts of two fsyncs of the log (0: fsync as soon as a group is
  // written and none is running). Requests written meanwhile wait for the next fsync and are
  // answered after it, as always. For a disk that stalls above some rate of flushes (a cloud
  // volume's IOPS budget, a throttled VM): on such a machine 1 ms took the steady 10,000 msg/s
  // p99 from 17.2 to 9.3 ms, at +0.4 ms of p50 and 4-7 % less closed-loop throughput
  // (docs/BENCHMARKS.md, twenty-second round).
  std::chrono::microseconds min_fsync_interval{0};
  // Upper bound of the bytes one commit group merges (the queue keeps the rest for the next;
  // a single larger request is a group of its own). Why not more: with a client's requests in
  // flight capped (1,000 messages, say), they come back as one burst after each fsync, and one
  // group of the whole burst keeps the stages in lockstep: the writer idle while the syncer
  // fsyncs, and the other way round. A cap splits the burst, so the first part's fsync runs
  // while the writer applies the rest, and its answers go out sooner (issue #15, fourteenth
  // round: docs/BENCHMARKS.md).
  std::size_t max_group_bytes = 128u << 10;
  std::size_t block_cache_bytes = 64u << 20;
  // Memtable size of the message log and of the transaction records and their due index (the
  // other families get a quarter), and the budget of all memtables together.
  std::size_t write_buffer_bytes = 16u << 20;
  std::size_t memtable_budget_bytes = 64u << 20;
  // Unix milliseconds; tests inject a fake clock. Default: the system clock.
  std::function<std::int64_t()> clock;
  // Below this many free bytes on the file system of `dir`, append and prepare fail with
  // errc::store_full (acks, resolutions, group updates and retention still run, so space can
  // be freed). 0: no minimum. Measured by the writer thread every disk_check_interval (also
  // when idle) and after each eighth of the minimum written (at least 1 MiB), never per request.
  std::uint64_t min_free_bytes = 0;
  std::chrono::milliseconds disk_check_interval{1000};
  // The free bytes of the data directory's file system; tests inject a fake disk. Default:
  // statvfs(dir) (an in-memory store without one has no disk to fill: never full).
  std::function<std::optional<std::uint64_t>()> free_bytes;
  // Wraps each burst of completions that the store runs on its own thread (those of every
  // commit group one fsync made durable): it must call run() once, on the calling thread. A
  // caller whose completions post to its own executor can gather the burst's posts into one
  // (the broker does: io_thread.h). Default: run() alone.
  std::function<void(const std::function<void()>& run)> around_completions;
  // Stage timings of the commit pipeline, for finding where a slow answer waited (issue #15):
  // observe_fsync gets each WAL fsync's duration; observe_queue, per request, submit() until
  // the writer takes it into a group; observe_commit, per request, submit() until it is durable
  // (queue, apply, write, the fsync in progress before its own, its fsync), just before its
  // completion runs. Called on the store's threads: they must be cheap and thread-safe (the
  // broker's are histogram observations). Unset: not measured.
  std::function<void(std::chrono::nanoseconds)> observe_fsync;
  std::function<void(std::chrono::nanoseconds)> observe_queue;
  std::function<void(std::chrono::nanoseconds)> observe_commit;
  // Retention of a topic that an append or a prepare creates (auto_create_partitions): the
  // broker's `retention` and `retention_bytes`. 0 = no limit. A create_topic passes its own.
  std::int64_t auto_create_retention_ms = 0;
  std::uint64_t auto_create_retention_bytes = 0;
  // Cluster mode: record every consumer-group change in its partition's change sequence
  // (replica.h), and fsync group updates (the leader answers an ack only once it and its ISR
  // hold it). Off (single-node mode): none of this is written.
  bool log_group_changes = false;
};

// What store::health() answers.
struct store_health {
  enum class state : std::uint8_t {
    ok,      // takes every write
    full,    // free space below min_free_bytes: append and prepare refused, the rest runs
    failed,  // takes no writes after a failed write, fsync or read inside the writer
  };
  state status = state::ok;
  // For a person, empty when ok: the first failure's text, or the free space and the minimum,
  // and what happens next.
  std::string reason;
  // failed only: the failure was a full disk, and the store resumes by itself when space is back.
  bool resumes = false;
};

// ---- Topics -------------------------------------------------------------------------------

struct topic_config {
  std::string name;
  std::uint32_t partitions = 4;
  // Messages older than this are removed by enforce_retention(); 0 keeps them by age forever.
  std::int64_t retention_ms = 7LL * 24 * 3600 * 1000;
  // Oldest batches of a partition are removed while it holds more; 0 = no byte limit.
  std::uint64_t retention_bytes = 0;
};

struct partition_info {
  std::uint64_t start_offset = 0;  // lowest offset still stored
  std::uint64_t next_offset = 0;   // offset the next message gets (high watermark)
  std::uint64_t bytes = 0;         // approximate stored bytes
};

struct topic_info {
  topic_config config;
  std::uint32_t id = 0;
  std::int64_t created_ms = 0;
  std::vector<partition_info> partitions;
};

// ---- Messages -----------------------------------------------------------------------------

struct append_request {
  std::string topic;
  // Each needs a 16-byte id. Key → partition by protocol::partition_for_key; keyless messages
  // go round-robin. publish_time_ms is set from the store clock when 0.
  std::vector<v1::Message> messages;
  // When the topic does not exist: create it with this many partitions; without it the append
  // fails with errc::unknown_topic.
  std::optional<std::uint32_t> auto_create_partitions;
  bool sync = true;
  // Empty: the store picks each message's partition as above. Otherwise one per message, the
  // caller's choice (cluster mode: the broker picks among the partitions it leads); a partition
  // the topic does not have fails the whole append with errc::unknown_partition.
  std::vector<std::uint32_t> partitions;
  // Runs on the store's writer thread once the messages are written to RocksDB, before their
  // fsync (readable then with read_request::unsynced): replication's leader wakes its parked
  // followers with it. Keep it short (post to another thread).
  std::function<void()> on_written;
};

struct position {
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
  // The id was already stored within the dedupe window: nothing was written and partition and
  // offset are those of the original.
  bool duplicate = false;
  friend bool operator==(const position&, const position&) = default;
};

struct append_result {
  std::vector<position> positions;  // one per message, in request order
};

struct read_request {
  std::string topic;
  std::uint32_t partition = 0;
  std::uint64_t from_offset = 0;  // below the partition's start: reading starts at the start
  std::size_t max_messages = 500;
  std::size_t max_bytes = 1u << 20;  // at least one message is returned if one is there
  // Replication's leader (docs/cluster.md "Replication"): read up to what the writer has
  // written to RocksDB, not only what is fsynced (high_watermark). Such messages may still be
  // lost by a crash of the machine before their fsync; nobody is told they are stored.
  bool unsynced = false;
  // Consumer-group delivery: leave `messages` empty and return each message as the log stores
  // it (read_result::raw) instead of parsing it: a delivery copies those bytes into its answer.
  bool raw = false;
};

// A message as the log stores it (read_request::raw): its txmq.v1.Message encoding, in which
// topic, partition, offset and attempt may be missing or stale. A reader appends those fields
// to the bytes: in protobuf's encoding a singular field that comes later overrides an earlier
// one. Beside it, what delivery decides on, read from the encoding without building a Message.
struct raw_message {
  std::uint64_t offset = 0;
  std::size_t begin = 0;  // the encoding: read_result::raw_bytes[begin, begin + size)
  std::size_t size = 0;
  bool has_key = false;
  std::size_t key_begin = 0;  // the key: raw_bytes[key_begin, key_begin + key_size)
  std::size_t key_size = 0;
  std::int64_t publish_time_ms = 0;
  std::int64_t deliver_at_ms = 0;
  std::size_t body_bytes = 0;
};

struct read_result {
  std::vector<v1::Message> messages;  // topic, partition and offset filled in
  std::vector<raw_message> raw;       // read_request::raw: the messages instead
  std::string raw_bytes;              // what `raw` points into
  std::uint64_t next_offset = 0;      // where the next read continues
  std::uint64_t start_offset = 0;
  std::uint64_t high_watermark = 0;   // the fsynced end
  std::uint64_t written_end = 0;      // the written end (>= high_watermark): read_request::unsynced
};

struct id_location {
  std::string topic;
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
};

// ---- Transactions (half messages) ---------------------------------------------------------

enum class tx_state : std::uint8_t { prepared = 1, committed = 2, rolled_back = 3, abandoned = 4 };
enum class tx_outcome : std::uint8_t { commit = 1, rollback = 2 };
enum class resolver : std::uint8_t { producer = 1, check = 2, operator_ = 3 };

struct ack_ref {
  std::string group;
  std::string topic;
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
  // The delivery's attempt (cluster mode's holds name it; a single node ignores it).
  std::uint32_t attempt = 0;
  friend bool operator==(const ack_ref&, const ack_ref&) = default;
};

struct tx_record {
  txid id;
  std::string producer_group;
  tx_state state = tx_state::prepared;
  // Topic set on each; partition and offset set once committed.
  std::vector<v1::Message> messages;
  // Acks applied atomically with COMMIT (read-process-write).
  std::vector<ack_ref> acks;
  std::int64_t prepared_ms = 0;
  std::uint32_t check_count = 0;
  std::int64_t next_check_ms = 0;  // 0 once no further check is due
  std::int64_t resolved_ms = 0;
  std::optional<resolver> resolved_by;
  // Cluster mode (docs/cluster.md "Transactions"): the home partition whose change sequence
  // replicates the record (home_topic empty: a single node's transaction), and whether a
  // COMMIT's messages were copied into their partitions (until then they keep their bodies)
  // and its acks applied, or a ROLLBACK's holds on its acks' deliveries released.
  std::string home_topic;
  std::uint32_t home_partition = 0;
  bool copied = false;
};

struct tx_counts {
  std::uint64_t prepared = 0;
  std::uint64_t abandoned = 0;
};

struct prepare_request {
  txid id;
  std::string producer_group;
  std::vector<v1::Message> messages;  // topic set on each; ids needed as for append
  std::vector<ack_ref> acks;
  std::int64_t first_check_ms = 0;    // when the first check-back is due; 0 = never checked
  std::optional<std::uint32_t> auto_create_partitions;
  bool sync = true;
  // Cluster mode (store_options::log_group_changes): the transaction's home partition. The
  // record is also written as a change of that partition's change sequence (replica.h), and a
  // COMMIT then writes no message locally: each message keeps the partition set here
  // (v1::Message::partition) and the broker copies it there (mark_copied when done). The home
  // partition must exist here and be owned (led); otherwise errc::invalid_argument.
  std::string home_topic;
  std::optional<std::uint32_t> home_partition;
};

struct prepare_result {
  bool duplicate = false;  // the txid was already prepared (a retried Prepare): nothing written
  // A home transaction's record written (or, for a duplicate, the change sequence's end):
  // answer once the home partition's ISR holds it.
  std::optional<group_change_ref> change;
};

struct resolve_request {
  txid id;
  tx_outcome outcome = tx_outcome::commit;
  resolver by = resolver::producer;
  bool sync = true;
};

enum class resolve_status : std::uint8_t {
  applied = 1,   // this call resolved it
  repeated = 2,  // already resolved the same way: idempotent OK, nothing written
  conflict = 3,  // already resolved the other way: nothing changed (TX_ALREADY_RESOLVED)
};

struct resolve_result {
  resolve_status status = resolve_status::applied;
  tx_state state = tx_state::prepared;  // the recorded state after the call
  std::vector<position> positions;      // committed: one per message
  // The record as the writer found it, before this call (messages without body and headers):
  // what the caller would otherwise look up with find_tx() before resolving.
  tx_record before;
  // A home transaction (cluster mode): where its home partition's change sequence ends after
  // this call (also for repeated: the outcome may not be on the ISR yet).
  std::optional<group_change_ref> change;
};

struct check_update {
  txid id;
  std::uint32_t check_count = 0;
  std::int64_t next_check_ms = 0;
  bool abandon = false;  // tx_max_checks reached: PREPARED → ABANDONED, no further checks
};

// ---- Consumer groups ----------------------------------------------------------------------

enum class group_start : std::uint8_t { earliest = 1, latest = 2 };

struct group_cursor {
  std::string topic;
  std::uint32_t partition = 0;
  // Every offset below ack_floor is done (acked or dead-lettered); kept by the store.
  std::uint64_t ack_floor = 0;
  // The next offset not yet handed to any member; moved by the caller (dispatch).
  std::uint64_t next_offset = 0;
  friend bool operator==(const group_cursor&, const group_cursor&) = default;
};

enum class delivery_status : std::uint8_t { in_flight = 1, waiting = 2, acked = 3, dead = 4 };

// State of one dispatched message in a group. in_flight: visible_at_ms is its ack deadline;
// waiting: retry or delayed delivery not before visible_at_ms.
struct delivery_record {
  std::string topic;
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
  std::uint32_t attempt = 0;
  std::int64_t visible_at_ms = 0;
  delivery_status status = delivery_status::waiting;
  // Cluster read-process-write (docs/cluster.md "Read-process-write"): the txid (16 bytes) of
  // the transaction holding this in-flight delivery, empty when none. Replicated with the
  // record, so a new leader of the partition refuses what the old one refused. Records written
  // before it existed have none.
  std::string holder;
  friend bool operator==(const delivery_record&, const delivery_record&) = default;
};

struct dead_letter {
  std::string topic;
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
  std::uint32_t attempts = 0;
  std::int64_t dead_at_ms = 0;
  std::string reason;
};

struct message_ref {
  std::string topic;
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
};

struct group_info {
  std::string name;
  std::vector<std::string> topics;
  std::int64_t created_ms = 0;
};

struct group_state {
  group_info info;
  std::vector<group_cursor> cursors;
  std::vector<delivery_record> deliveries;  // every record between floor and cursor
  std::uint64_t dead_letters = 0;
};

// One atomic change of one group's state.
struct group_update {
  std::string group;
  // Dispatch cursors to move forward (topic, partition, next_offset; ack_floor is ignored).
  std::vector<group_cursor> dispatched;
  // Upserts of in-flight / waiting records (the due-time index follows them).
  std::vector<delivery_record> deliveries;
  // Done: the record becomes acked and the floor advances over the acked prefix.
  std::vector<message_ref> acks;
  // To the dead-letter queue; counts as done for the floor.
  std::vector<dead_letter> dead;
  // Out of the dead-letter queue, back to waiting with attempt 0, visible at once.
  std::vector<message_ref> redrive;
  // Acks may be synced lazily: a lost ack only causes a redelivery.
  bool sync = false;
};

struct group_update_result {
  std::vector<group_cursor> cursors;  // every cursor the update touched, after it
  // With store_options::log_group_changes: where each touched partition's change sequence ends
  // after this update (replica.h).
  std::vector<group_change_ref> changes;
};

struct due_delivery {
  std::string group;
  delivery_record delivery;
};

// ---- Webhook subscriptions and their attempt log (docs/semantics.md §5) ---------------------
// A subscription's delivery state is an ordinary consumer group ("webhook:<id>"); the store
// keeps the subscription record (with its secrets and token) and the attempt log apart.

struct webhook_attempts_query {
  std::string webhook_id;
  std::optional<message_id> message;  // only this message's attempts
  std::size_t limit = 1000;
  // Continue after this attempt: webhook_attempt_cursor() of the last one of the previous page
  // (of a query with the same webhook_id, message and order). Empty: from the oldest (the
  // newest with newest_first).
  std::string after;
  // Newest first: the page holds the latest attempts, latest first, and `after` continues
  // with older ones (what a console showing "the last N attempts" reads).
  bool newest_first = false;
};

// Where a page of webhook_attempts() that ends with `a` continues (opaque bytes; `by_message`:
// for a query with a message). store::webhook_attempts refuses a cursor of the wrong size with
// errc::invalid_argument.
[[nodiscard]] std::string webhook_attempt_cursor(const v1::WebhookAttempt& a, bool by_message);

// ---- Principals and their grants (DESIGN §7 Authentication, Authorization) ---------------------
// The store keeps principals with the SHA-256 of their token (never the token) and the ACL
// entries; the broker keeps both in memory and checks requests against that copy.

struct principal_record {
  std::string name;
  std::string token_sha256;  // 32 raw bytes
  std::int64_t created_ms = 0;
  bool operator==(const principal_record&) const = default;
};

struct acl_entry {
  std::string principal;
  std::string permission;  // produce, consume, transact, admin (checked by the broker)
  std::string resource;    // topic:NAME, group:NAME, producer-group:NAME, cluster
  auto operator<=>(const acl_entry&) const = default;
};

// ---- Maintenance and statistics -----------------------------------------------------------

struct retention_result {
  std::uint64_t messages_removed = 0;
  std::uint64_t bytes_removed = 0;
};

struct store_stats {
  std::uint64_t commit_groups = 0;  // WriteBatches written
  std::uint64_t fsyncs = 0;         // of those, written with sync
  std::uint64_t operations = 0;     // requests applied
  std::uint64_t messages_appended = 0;
  std::uint64_t bytes_appended = 0;
  std::uint64_t largest_group = 0;  // most requests in one WriteBatch
  // RocksDB's flush and compaction threads run at low priority while writes are not held up
  // by them (store_options::low_priority_background): whether they do now, and how many times
  // a write stall raised them back.
  bool background_lowered = false;
  std::uint64_t background_raised = 0;
};

class store {
 public:
  virtual ~store() = default;

  // Topics. create_topic of an existing name with the same partition count answers its info.
  virtual void create_topic(topic_config config, completion<topic_info> done) = 0;
  [[nodiscard]] virtual std::optional<topic_info> topic(std::string_view name) const = 0;
  [[nodiscard]] virtual std::vector<topic_info> topics() const = 0;
  // Whether the topic exists, without building its topic_info (a copy of its config and of
  // every partition's offsets): the check made before every produce and Prepare.
  [[nodiscard]] virtual bool has_topic(std::string_view name) const { return topic(name).has_value(); }
  // Changes an existing topic's retention (both values, as topic_config: 0 = no limit by age /
  // by bytes), durably; the next enforce_retention applies it. Answers the topic's info.
  // Errors: unknown_topic, invalid_argument (negative retention_ms), the write's.
  virtual void set_topic_retention(std::string name, std::int64_t retention_ms, std::uint64_t retention_bytes,
                                   completion<topic_info> done) {
    (void)name, (void)retention_ms, (void)retention_bytes;
    done(errc::invalid_argument);
  }

  // Messages. Dedupe: an id stored within the dedupe window answers its original position.
  virtual void append(append_request request, completion<append_result> done) = 0;
  [[nodiscard]] virtual result<read_result> read(const read_request& request) const = 0;
  [[nodiscard]] virtual result<std::optional<id_location>> find_id(const message_id& id) const = 0;

  // Transactions. prepare stores the messages invisible; resolve makes them visible (commit,
  // with their acks, in one atomic write) or drops them (rollback). The first resolution wins.
  virtual void prepare(prepare_request request, completion<prepare_result> done) = 0;
  virtual void resolve(resolve_request request, completion<resolve_result> done) = 0;
  // Records check attempts; entries whose transaction is no longer PREPARED are ignored.
  virtual void record_checks(std::vector<check_update> updates, completion<void> done) = 0;
  // Cluster mode: a committed home transaction's messages are all in their partitions and its
  // acks applied (or a rolled-back one's holds released); its bodies are dropped and the change
  // replicated. Answers the change's ref (nullopt when there was nothing to do: unknown, not
  // resolved, or already marked).
  virtual void mark_copied(txid id, completion<std::optional<group_change_ref>> done) {
    (void)id;
    done(std::optional<group_change_ref>{});
  }
  // find_tx and list_txs read transactions as of the last durable write: a resolution shows
  // once its fsync succeeded (when its caller hears of it), never before, and a prepare or
  // resolution whose write or fsync failed does not show.
  [[nodiscard]] virtual result<std::optional<tx_record>> find_tx(const txid& id) const = 0;
  // PREPARED transactions whose next check is due in [from_ms, until_ms], earliest first. A
  // caller that scans often passes the earliest due time it still knows of as from_ms, so the
  // scan does not walk again over the deleted index entries of every transaction resolved
  // since the last compaction. For an entry the store itself wrote after the Prepare (a young
  // one's, storage/README.md), the next call reads from its check time even when that is before
  // from_ms: the caller's cursor may have passed it while the entry was not yet written.
  [[nodiscard]] virtual result<std::vector<tx_record>> due_checks(std::int64_t until_ms, std::size_t limit,
                                                                  std::int64_t from_ms = 0) const = 0;
  // Transactions in a state (all states when nullopt), in txid order after `after`. PREPARED
  // and ABANDONED are read through the index of unresolved transactions (keys.h), so they cost
  // what is unresolved, never the resolved records kept for dedupe_window: ABANDONED a page of
  // its own index, PREPARED every due-index key (16+9 bytes each, no record parsed) and then the
  // records of the page. The other states and nullopt read every record from `after` on.
  [[nodiscard]] virtual result<std::vector<tx_record>> list_txs(std::optional<tx_state> state, std::size_t limit,
                                                              std::optional<txid> after = std::nullopt) const = 0;
  // How many transactions are PREPARED and ABANDONED, as list_txs would list them (as of the last
  // durable write), counted from the index of unresolved transactions: no record is read.
  [[nodiscard]] virtual result<tx_counts> count_unresolved_txs() const = 0;

  // Consumer groups. ensure_group creates the group or adds topics to it; cursors of new
  // topics start at the earliest retained or the latest offset. Answers the group's state.
  virtual void ensure_group(group_info info, group_start start, completion<group_state> done) = 0;
  virtual void update_group(group_update update, completion<group_update_result> done) = 0;
  [[nodiscard]] virtual result<group_state> load_group(std::string_view name) const = 0;
  // One partition's part of a group's state: the group's info, the partition's cursor and its
  // delivery records; dead_letters is not counted (0). What a node that starts leading the
  // partition reloads (docs/cluster.md "Leadership changes on the io thread"): it reads that
  // partition's keys only, not the group's other partitions nor its dead-letter queue. Errors
  // as load_group.
  [[nodiscard]] virtual result<group_state> load_group_partition(std::string_view name, std::string_view topic,
                                                                 std::uint32_t partition) const {
    auto all = load_group(name);
    if (!all) return all;
    group_state out;
    out.info = all.value().info;
    for (auto& c : all.value().cursors)
      if (c.topic == topic && c.partition == partition) out.cursors.push_back(c);
    for (auto& d : all.value().deliveries)
      if (d.topic == topic && d.partition == partition) out.deliveries.push_back(d);
    return out;
  }
  [[nodiscard]] virtual std::vector<group_info> groups() const = 0;
  // Up to `limit` dead letters of the group in key order (topic, partition, offset), starting
  // after `after` (the last one of the previous page) when given: listings are paged, so that
  // no request reads a whole dead-letter queue.
  [[nodiscard]] virtual result<std::vector<dead_letter>> dead_letters(std::string_view group, std::size_t limit,
                                                                      const std::optional<message_ref>& after) const = 0;
  [[nodiscard]] result<std::vector<dead_letter>> dead_letters(std::string_view group, std::size_t limit) const {
    return dead_letters(group, limit, std::nullopt);
  }
  // In-flight and waiting deliveries of all groups with visible_at_ms ≤ until_ms, earliest first.
  [[nodiscard]] virtual result<std::vector<due_delivery>> due_deliveries(std::int64_t until_ms,
                                                                        std::size_t limit) const = 0;

  // Webhook subscriptions. put_webhook creates or replaces the record (fsynced before done);
  // delete_webhook answers false when there was none. webhooks() lists them in id order.
  virtual void put_webhook(v1::Webhook record, completion<void> done) = 0;
  virtual void delete_webhook(std::string id, completion<bool> done) = 0;
  [[nodiscard]] virtual result<std::vector<v1::Webhook>> webhooks() const = 0;
  // Appends attempts to the log (not synced: a lost log line after a crash is tolerated).
  virtual void record_webhook_attempts(std::vector<v1::WebhookAttempt> attempts, completion<void> done) = 0;
  // A subscription's attempts, oldest first (by time_ms); of one message when asked.
  [[nodiscard]] virtual result<std::vector<v1::WebhookAttempt>> webhook_attempts(
      const webhook_attempts_query& query) const = 0;
  // Deletes logged attempts older than before_ms, at most `limit` per call; answers how many.
  virtual void expire_webhook_attempts(std::int64_t before_ms, std::size_t limit, completion<std::uint64_t> done) = 0;

  // Principals and ACLs, fsynced before done. create_principal answers false (and writes
  // nothing) when the name exists, and otherwise removes any grant left under the name; delete_principal removes the principal and every ACL entry
  // naming it in one write, answering false when there was no such principal. put_acl answers
  // false when the entry existed, delete_acl when it did not. principals() lists by name,
  // acls() by (principal, permission, resource). Errors: errc::invalid_argument for an empty
  // or over-long name, errc::corruption for a damaged record, write errors as usual.
  virtual void create_principal(principal_record record, completion<bool> done) = 0;
  virtual void delete_principal(std::string name, completion<bool> done) = 0;
  [[nodiscard]] virtual result<std::vector<principal_record>> principals() const = 0;
  virtual void put_acl(acl_entry entry, completion<bool> done) = 0;
  virtual void delete_acl(acl_entry entry, completion<bool> done) = 0;
  [[nodiscard]] virtual result<std::vector<acl_entry>> acls() const = 0;

  // Replication (replica.h, docs/cluster.md). A leader records the epoch it starts leading a
  // partition at (begin_epoch: epoch → the partition's next offset; an epoch not newer than
  // the latest entry is a no-op); a follower appends the leader's batches at their offsets
  // (replica_append, answering the partition's next offset) and truncates its log to an offset
  // (truncate: messages >= offset, their dedupe ids and the epoch entries starting there go;
  // answers the new next offset). leader_epochs() reads the entries as written.
  // Default implementations refuse (errc::invalid_argument): only the RocksDB store replicates.
  virtual void begin_epoch(std::string topic, std::uint32_t partition, std::uint32_t epoch,
                           completion<std::uint64_t> done) {
    (void)topic, (void)partition, (void)epoch;
    done(make_error_code(errc::invalid_argument));
  }
  virtual void replica_append(replica_append_request request, completion<std::uint64_t> done) {
    (void)request;
    done(make_error_code(errc::invalid_argument));
  }
  virtual void truncate(std::string topic, std::uint32_t partition, std::uint64_t offset,
                        completion<std::uint64_t> done) {
    (void)topic, (void)partition, (void)offset;
    done(make_error_code(errc::invalid_argument));
  }
  // A follower whose log ends below the leader's start offset (retention removed what it
  // never fetched) cannot copy the leader's log from its own end: restart_log discards every
  // message of the partition (their dedupe ids) and its epoch entries, and makes the log empty
  // starting at `start` (the leader's start offset; Kafka's log start offset handling); the
  // topic is created with `create_partitions` partitions when missing. Answers `start`.
  virtual void restart_log(std::string topic, std::uint32_t partition, std::uint64_t start,
                           std::uint32_t create_partitions, completion<std::uint64_t> done) {
    (void)topic, (void)partition, (void)start, (void)create_partitions;
    done(make_error_code(errc::invalid_argument));
  }
  [[nodiscard]] virtual result<std::vector<epoch_entry>> leader_epochs(std::string_view topic,
                                                                      std::uint32_t partition) const {
    (void)topic, (void)partition;
    return make_error_code(errc::invalid_argument);
  }
  // A leader's read for its followers: read() (request.max_bytes counts the entries' encoded
  // bytes here) without parsing the stored messages: their stored bytes (replica.h raw_read).
  [[nodiscard]] virtual result<raw_read> read_raw(const read_request& request) const {
    (void)request;
    return make_error_code(errc::invalid_argument);
  }

  // Consumer-group replication (replica.h). group_changes reads the partition's change
  // sequence from from_seq on (at most max, only what is durable); group_snapshot reads the
  // partition's whole group state of every group, at one point of the sequence. A follower
  // applies a leader's changes (each must have the partition's next seq, else
  // errc::invalid_argument and nothing of it is written: take a snapshot) or installs a
  // snapshot (the partition's group state and change sequence replaced); both answer the
  // sequence's new end, fsynced.
  [[nodiscard]] virtual result<group_changes_read> group_changes(std::string_view topic, std::uint32_t partition,
                                                                 std::uint64_t from_seq, std::size_t max) const {
    (void)topic, (void)partition, (void)from_seq, (void)max;
    return make_error_code(errc::invalid_argument);
  }
  [[nodiscard]] virtual result<v1::GroupSnapshot> group_snapshot(std::string_view topic, std::uint32_t partition) const {
    (void)topic, (void)partition;
    return make_error_code(errc::invalid_argument);
  }
  virtual void apply_group_changes(std::string topic, std::uint32_t partition, std::vector<v1::GroupChange> changes,
                                   completion<std::uint64_t> done) {
    (void)topic, (void)partition, (void)changes;
    done(make_error_code(errc::invalid_argument));
  }
  virtual void install_group_snapshot(std::string topic, std::uint32_t partition, v1::GroupSnapshot snapshot,
                                      completion<std::uint64_t> done) {
    (void)topic, (void)partition, (void)snapshot;
    done(make_error_code(errc::invalid_argument));
  }

  // Removes messages past their topic's retention (age, bytes) with range deletes, without
  // holding up other writes for more than one commit group.
  virtual void enforce_retention(completion<retention_result> done) = 0;
  // Compacts everything now, dropping expired dedupe entries and transaction outcomes (which
  // otherwise go in background compactions). For tests and maintenance.
  [[nodiscard]] virtual result<void> compact() = 0;
  // Number of dedupe entries physically present (expired ones included until compacted).
  [[nodiscard]] virtual result<std::uint64_t> count_dedupe_entries() const = 0;

  [[nodiscard]] virtual store_stats stats() const = 0;
  // Whether the store takes writes now, and why not (see store_health). Cheap: reads state the
  // writer thread keeps; never touches the disk. Thread-safe.
  [[nodiscard]] virtual store_health health() const = 0;
  // Stops the writer after the queued writes are done; later writes fail with errc::closed.
  virtual void close() = 0;
};

// Opens (or creates, when the directory is missing or empty) the store at options.dir.
// Errors: errc::not_a_store for a directory with foreign files or a txmq store whose RocksDB
// files are missing, errc::corruption for damaged files, errc::io_error otherwise; the error's
// text is a sentence for the user naming the path and what RocksDB reported.
[[nodiscard]] result<std::unique_ptr<store>> open_store(store_options options);

// Waits for an asynchronous store call: call_sync<T>([&](auto done) { s.append(req, done); }).
// For tools and tests; never on a network thread.
template <class T, class Start>
result<T> call_sync(Start&& start);

}  // namespace txmq::storage

#include "txmq/storage/detail/call_sync.h"
