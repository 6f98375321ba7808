#pragma once

// Private to storage/src: the RocksDB implementation of txmq::storage::store, declared here as
// one piece (one class whose members every section uses) and defined one section per file
// (_open.cc, _commit_pipeline.cc, _topics.cc, _messages.cc, _tx.cc, _groups.cc, _maintenance.cc, ...).
//
// Writes are a two-stage pipeline. The writer thread (the group committer) drains the request
// queue and applies every request to one WriteBatch; reads inside the writer go through an
// overlay of that batch, so a request sees the effects of the requests before it. It writes the
// batch without sync and hands the group to the syncer thread. The syncer takes every group
// written meanwhile, makes them durable with one WAL fsync, then publishes the new high
// watermarks and runs the completions, in order. So applying group N+1 overlaps the fsync of
// group N, one fsync covers several groups under load, offsets, dedupe decisions and
// transaction resolutions are decided by one thread in one order, and nothing is acknowledged
// or shown to readers before its fsync: high watermarks and new topics are published by the
// syncer, and transaction records are read as the last durable group left them
// (read_durable_txs(): a snapshot only while one that wrote them waits for its fsync), since
// the batch is in the memtable before its fsync.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <rocksdb/cache.h>
#include <rocksdb/compaction_filter.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/write_batch.h>

#include "keys.h"
#include "log_compression.h"
#include "txmq/storage/store.h"
#include "txmq/storage/v1/records.pb.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::storage::detail {

namespace fs = std::filesystem;

constexpr std::size_t k_max_topic_name = 249;
constexpr std::size_t k_max_group_name = 255;
constexpr std::uint32_t k_max_partitions = 1024;

enum cf_index : std::size_t { cf_default, cf_log, cf_dedupe, cf_tx, cf_index_, cf_groups, cf_count };

// A transaction record's entry in the index of unresolved transactions (keys.h): its due entry
// when PREPARED, its 'a' entry when ABANDONED, none once resolved.
inline std::optional<std::string> tx_index_entry(const records::TxRecord& rec) {
  switch (static_cast<tx_state>(rec.state())) {
    case tx_state::prepared: return tx_due_entry(rec.next_check_ms(), rec.txid());
    case tx_state::abandoned: return tx_abandoned_key(rec.txid());
    default: return std::nullopt;
  }
}

inline std::error_code to_error(const rocksdb::Status& s) {
  if (s.IsCorruption()) return errc::corruption;
  if (s.IsShutdownInProgress()) return errc::closed;
  return errc::io_error;
}

// The same, with RocksDB's text and what the store was doing: "reading partition 3 of 'orders':
// IO error: ...". Every failed RocksDB call reaches the caller with its reason.
inline error status_error(const rocksdb::Status& s, std::string_view doing) {
  return {to_error(s), std::string(doing) + ": " + s.ToString()};
}

inline bool valid_name(std::string_view name, std::size_t max) {
  if (name.empty() || name.size() > max) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f; });
}

struct partition_state {
  // Writer-only: the offset the next appended message gets.
  std::uint64_t next = 0;
  // Published after each write, read by readers.
  std::atomic<std::uint64_t> committed_next{0};
  // Published right after each write to RocksDB, before its fsync: what a replication leader
  // may already send to its followers (read_request::unsynced). >= committed_next except while
  // a truncation is on its way to the disk (only followers truncate; they serve no such reads).
  std::atomic<std::uint64_t> written_next{0};
  std::atomic<std::uint64_t> start_offset{0};
  std::atomic<std::uint64_t> bytes{0};
  // Writer-only copy of the durable meta.
  partition_meta meta;
  // Consumer-group change sequence (store_options::log_group_changes): the writer's next seq
  // (loaded on first use) and the end published once durable (rocksdb_store_group_replica.cc).
  std::optional<std::uint64_t> group_next;
  std::atomic<std::uint64_t> committed_group_next{0};
  // Writer-only: whether this node's own group changes may be written for the partition. A
  // follower's group state is the leader's (apply_group_changes and install_group_snapshot
  // clear it, begin_epoch sets it): local updates of a followed partition are dropped, so that
  // its change sequence never holds a change the leader did not make.
  bool group_owner = true;
};

struct topic_state {
  // Writer-only once the topic is published, but for its name and partition count (never
  // change): readers see the retention through the two atomics below.
  records::TopicRecord record;
  std::atomic<std::int64_t> retention_ms{0};
  std::atomic<std::uint64_t> retention_bytes{0};
  std::vector<std::unique_ptr<partition_state>> partitions;
  std::atomic<std::uint32_t> round_robin{0};
  std::int64_t created_ms = 0;
};

// A message serialized on the caller's thread, so the writer thread only copies bytes.
struct encoded_message {
  protocol::uuid id;
  std::optional<std::string> key;
  std::string bytes;  // txmq.v1.Message without topic, partition, offset, attempt
  std::int64_t publish_ms = 0;
  std::size_t body_bytes = 0;
};

encoded_message encode_message(v1::Message&& m, std::int64_t now_ms);
// Every message has a 16-byte id that is not all zeros.
bool valid_messages(const std::vector<v1::Message>& messages);
// What a request of these messages weighs against store_options::max_group_bytes.
std::size_t request_bytes(const std::vector<v1::Message>& messages);

inline void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Messages appended to one partition in the current commit group; written as one log record:
// the batch header, then a txmq.v1.MessageBatch built field by field (base_offset, then each
// message as field 2), which parses exactly like one serialized by protobuf.
struct pending_log {
  std::uint32_t topic_id = 0;
  std::uint32_t partition = 0;
  partition_state* state = nullptr;
  std::uint64_t base = 0;
  std::uint32_t count = 0;
  std::int64_t max_publish_ms = 0;
  std::string value;

  void start(std::uint64_t base_offset) {
    base = base_offset;
    value.assign(batch_header_bytes, '\0');  // patched by finish()
    value.push_back(0x08);                    // field 1 (base_offset), varint
    put_varint(value, base_offset);
  }
  void add(const encoded_message& m) {
    value.push_back(0x12);  // field 2 (messages), length-delimited
    put_varint(value, m.bytes.size());
    value.append(m.bytes);
    ++count;
    max_publish_ms = std::max(max_publish_ms, m.publish_ms);
  }
  // Entries already in stored form (raw_messages::entries), n messages.
  void add_raw(std::string_view entries, std::uint32_t n, std::int64_t max_publish) {
    value.append(entries);
    count += n;
    max_publish_ms = std::max(max_publish_ms, max_publish);
  }
  void finish() {
    std::string header;
    encode(batch_header{1, count, max_publish_ms}, header);
    value.replace(0, batch_header_bytes, header);
  }
};

// One commit group's writes, with an overlay so reads inside the writer see them.
struct group_ctx {
  explicit group_ctx(const std::vector<rocksdb::ColumnFamilyHandle*>& h) : handles(h) {}

  // The value by value: a caller's temporary (a record serialized for this put) moves into
  // the overlay instead of being copied there (issue #15, tenth round).
  void put(cf_index cf, const std::string& key, std::string value) {
    wrote_tx = wrote_tx || cf == cf_tx;
    if (sorted_at_end(cf)) return defer(cf, key, std::move(value));
    batch.Put(handles[cf], key, value);
    overlay[cf][key] = std::move(value);
  }
  void del(cf_index cf, const std::string& key) {
    wrote_tx = wrote_tx || cf == cf_tx;
    if (sorted_at_end(cf)) return defer(cf, key, std::nullopt);
    batch.Delete(handles[cf], key);
    overlay[cf][key] = std::nullopt;
  }

  // The writes of the transaction and index families reach the batch at the end of the group
  // (rocksdb_store::finalize()), each key once with its last write, in key order. RocksDB
  // inserts a batch into the memtables in the batch's order, and a skip-list insert is cheap
  // next to the one before it but walks the list from the top for a key far from it. The tx
  // family's keys are random txids; the index family's are times, a Prepare's a tx_timeout
  // ahead and a COMMIT's delete a few thousand entries behind it. In arrival order every
  // insert walked (FindSpliceForLevel, the top frame of the tx profile: issue #15,
  // docs/BENCHMARKS.md "Sixth round"); sorted, neighbours follow each other. One atomic batch:
  // nobody sees the order, and a key written twice in a group is written once.
  static constexpr bool sorted_at_end(cf_index cf) { return cf == cf_tx || cf == cf_index_; }
  void defer(cf_index cf, const std::string& key, std::optional<std::string> value) {
    auto [it, first] = overlay[cf].insert_or_assign(key, std::move(value));
    if (first) deferred[cf].push_back(&*it);
  }

  const std::vector<rocksdb::ColumnFamilyHandle*>& handles;
  rocksdb::WriteBatch batch;
  std::unordered_map<std::string, std::optional<std::string>> overlay[cf_count];
  // A delivery key of the groups family that apply_ack's walk of the ack floor found absent
  // (not in the overlay, not in the store): the next in-order ack looks that same key up, and
  // is answered here instead of by a second RocksDB read (issue #15, consume with acks).
  std::string absent_delivery;
  // Per sorted_at_end() family, its keys written in this group: pointers into overlay[cf],
  // whose elements never move (nothing is erased from it during a group).
  std::vector<const std::pair<const std::string, std::optional<std::string>>*> deferred[cf_count];
  // Dedupe entries of this group, kept apart from the generic overlay: it is the hot path.
  std::unordered_map<protocol::uuid, dedupe_entry, protocol::uuid_hash> dedupe;
  std::map<std::pair<std::uint32_t, std::uint32_t>, pending_log> logs;
  std::vector<std::shared_ptr<topic_state>> new_topics;
  std::vector<partition_state*> touched;
  // Partitions whose group change sequence moved in this group (published once durable).
  std::vector<partition_state*> group_touched;
  // A read inside the writer failed (with what failed and RocksDB's text): fail the group.
  std::optional<error> poisoned;
  std::int64_t now_ms = 0;
  bool sync = false;
  bool wrote_tx = false;  // a transaction record changed: readers see it once durable
  // Young Prepares (rocksdb_store::young_): a Prepare became young in this group (the bounds are
  // written), and the young txids whose entry was written or whose record changed in it.
  bool young_changed = false;
  std::vector<protocol::uuid> young_done;
  // The earliest check time among the young due entries written in this group (none: max).
  std::int64_t young_due_min = std::numeric_limits<std::int64_t>::max();
  std::uint64_t messages = 0;
  std::uint64_t bytes = 0;
};

// One queued write request: the writer applies it to the group's batch, then whoever makes
// the group durable finishes it (runs its completion with its result, or with the group's write
// or fsync error). One object (one allocation) per request from submit() to its completion.
struct write_op {
  virtual ~write_op() = default;
  virtual void apply(group_ctx& ctx) = 0;
  virtual void finish(const error* write_error) = 0;
  std::size_t bytes = 0;
  bool sync = false;
  std::chrono::steady_clock::time_point submitted;  // for store_options::observe_queue/commit
  // Run by the writer right after the request's group is written to RocksDB (before its fsync).
  std::function<void()> on_written;
};

// A write_op of a request answering T, applied by fn(group_ctx&) -> result<T>.
template <class T, class Fn>
struct typed_write_op final : write_op {
  template <class F>
  typed_write_op(F&& f, completion<T>&& d) : fn(std::in_place, std::forward<F>(f)), done(std::move(d)) {}

  void apply(group_ctx& ctx) override {
    try {
      r.emplace((*fn)(ctx));
    } catch (const std::exception& e) {
      // The request may have left part of its writes in the batch: the group cannot be written.
      ctx.poisoned = error(errc::store_failed, std::string("a request failed half-way through its writes: ") + e.what());
      r.emplace(*ctx.poisoned);
    }
    fn.reset();  // what the request carried (its messages) is in the batch now: free it on the writer
  }
  void finish(const error* write_error) override {
    if (write_error && r->has_value()) {
      done(*write_error);
    } else {
      done(std::move(*r));
    }
  }

  std::optional<Fn> fn;
  completion<T> done;
  std::optional<result<T>> r;
};

using pending_op = std::unique_ptr<write_op>;

// A group written to RocksDB (not yet synced), on its way through the syncer.
struct written_group {
  std::vector<pending_op> finishers;
  std::vector<std::pair<partition_state*, partition_meta>> publish;
  std::vector<std::pair<partition_state*, std::uint64_t>> group_publish;
  std::vector<std::shared_ptr<topic_state>> new_topics;
  std::optional<error> failure;  // the group was not written
  // Taken right after the write when the group changed a transaction record; becomes the
  // readers' view of transactions once the group is durable while a later group that wrote one
  // is not (dropped otherwise: rocksdb_store::tx_snapshot_).
  std::shared_ptr<const rocksdb::Snapshot> tx_snapshot;
  // Counted in tx_groups_unsynced_ (begin_tx_write() before its write).
  bool tx_pending = false;
  // Leave rocksdb_store::young_ids_ once this group is durable (group_ctx::young_done).
  std::vector<protocol::uuid> young_done;
  // Lowers rocksdb_store::young_due_floor_ once this group is durable (group_ctx::young_due_min).
  std::int64_t young_due_min = std::numeric_limits<std::int64_t>::max();
  bool sync = false;
  bool wrote = false;
  std::size_t operations = 0;
  std::uint64_t messages = 0;
  std::uint64_t bytes = 0;
};

class rocksdb_store;
class background_priority;
// True while the calling thread holds a txmq::storage::batched_wakeups: the store is noted for a
// wake-up at its end, and submit() does not wake the writer now (batched_wakeups.cc).
bool hold_writer_wakeup(rocksdb_store* store);

class rocksdb_store final : public store {
 public:
  rocksdb_store(store_options options, std::unique_ptr<rocksdb::Env> env, std::shared_ptr<rocksdb::Cache> cache,
                std::vector<std::shared_ptr<rocksdb::CompactionFilterFactory>> filters)
      : options_(std::move(options)),
        env_(std::move(env)),
        cache_(std::move(cache)),
        filters_(std::move(filters)) {}

  ~rocksdb_store() override {
    close();
    tx_snapshot_.reset();  // released while the DB is open
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
    handles_.clear();
    if (db_) db_->Close().PermitUncheckedError();
  }

  result<void> open(const fs::path& path, bool fresh);

  void create_topic(topic_config config, completion<topic_info> done) override;
  void set_topic_retention(std::string name, std::int64_t retention_ms, std::uint64_t retention_bytes,
                           completion<topic_info> done) override;
  std::optional<topic_info> topic(std::string_view name) const override;
  std::vector<topic_info> topics() const override;
  bool has_topic(std::string_view name) const override { return find_topic(name) != nullptr; }
  void append(append_request request, completion<append_result> done) override;
  result<read_result> read(const read_request& request) const override;
  result<std::optional<id_location>> find_id(const message_id& id) const override;
  void prepare(prepare_request request, completion<prepare_result> done) override;
  void resolve(resolve_request request, completion<resolve_result> done) override;
  void record_checks(std::vector<check_update> updates, completion<void> done) override;
  void mark_copied(txid id, completion<std::optional<group_change_ref>> done) override;
  result<std::optional<tx_record>> find_tx(const txid& id) const override;
  result<std::vector<tx_record>> due_checks(std::int64_t until_ms, std::size_t limit, std::int64_t from_ms) const override;
  result<std::vector<tx_record>> list_txs(std::optional<tx_state> state, std::size_t limit,
                                          std::optional<txid> after) const override;
  result<tx_counts> count_unresolved_txs() const override;
  void ensure_group(group_info info, group_start start, completion<group_state> done) override;
  void update_group(group_update update, completion<group_update_result> done) override;
  result<group_state> load_group_record(std::string_view name) const;
  result<group_state> load_group(std::string_view name) const override;
  result<group_state> load_group_partition(std::string_view name, std::string_view topic,
                                           std::uint32_t partition) const override;
  std::vector<group_info> groups() const override;
  result<std::vector<dead_letter>> dead_letters(std::string_view group, std::size_t limit,
                                               const std::optional<message_ref>& after) const override;
  using store::dead_letters;
  result<std::vector<due_delivery>> due_deliveries(std::int64_t until_ms, std::size_t limit) const override;
  void put_webhook(v1::Webhook record, completion<void> done) override;
  void delete_webhook(std::string id, completion<bool> done) override;
  result<std::vector<v1::Webhook>> webhooks() const override;
  void record_webhook_attempts(std::vector<v1::WebhookAttempt> attempts, completion<void> done) override;
  result<std::vector<v1::WebhookAttempt>> webhook_attempts(const webhook_attempts_query& query) const override;
  void expire_webhook_attempts(std::int64_t before_ms, std::size_t limit, completion<std::uint64_t> done) override;
  void create_principal(principal_record record, completion<bool> done) override;
  void delete_principal(std::string name, completion<bool> done) override;
  result<std::vector<principal_record>> principals() const override;
  void put_acl(acl_entry entry, completion<bool> done) override;
  void delete_acl(acl_entry entry, completion<bool> done) override;
  result<std::vector<acl_entry>> acls() const override;
  void begin_epoch(std::string topic, std::uint32_t partition, std::uint32_t epoch,
                   completion<std::uint64_t> done) override;
  void replica_append(replica_append_request request, completion<std::uint64_t> done) override;
  void truncate(std::string topic, std::uint32_t partition, std::uint64_t offset,
                completion<std::uint64_t> done) override;
  void restart_log(std::string topic, std::uint32_t partition, std::uint64_t start, std::uint32_t create_partitions,
                   completion<std::uint64_t> done) override;
  result<std::vector<epoch_entry>> leader_epochs(std::string_view topic, std::uint32_t partition) const override;
  result<raw_read> read_raw(const read_request& request) const override;
  result<group_changes_read> group_changes(std::string_view topic, std::uint32_t partition, std::uint64_t from_seq,
                                           std::size_t max) const override;
  result<v1::GroupSnapshot> group_snapshot(std::string_view topic, std::uint32_t partition) const override;
  void apply_group_changes(std::string topic, std::uint32_t partition, std::vector<v1::GroupChange> changes,
                           completion<std::uint64_t> done) override;
  void install_group_snapshot(std::string topic, std::uint32_t partition, v1::GroupSnapshot snapshot,
                              completion<std::uint64_t> done) override;
  void enforce_retention(completion<retention_result> done) override;
  result<void> compact() override;
  result<std::uint64_t> count_dedupe_entries() const override;
  store_stats stats() const override;
  store_health health() const override;
  void close() override;
  // Wakes the writer thread for requests queued without a wake-up (txmq/storage/batched_wakeups.h).
  void wake_writer() { queue_cv_.notify_one(); }
  // For tests (storage_snapshot_test): RocksDB snapshots held now ("rocksdb.num-snapshots"),
  // and the live table bytes of the log family ("rocksdb.live-sst-files-size").
  std::uint64_t snapshots_held() const;
  // For tests (storage_young_tx_test): puts and deletes in the index family's active memtable.
  std::uint64_t index_writes_in_memtable() const;
  std::uint64_t log_table_bytes() const;

 private:
  // The readers' view of transaction records (read_durable_txs(); storage/README.md "The
  // transaction snapshot"). A RocksDB snapshot keeps on disk every entry it can see (what
  // retention and acks delete), and releasing one marks every bottommost table file below it
  // for a rewrite (RocksDB 7.8's BottommostFiles compaction), so one is held only while needed:
  // while a group that wrote a transaction record is written but not yet durable
  // (tx_groups_unsynced_ > 0). Then tx_snapshot_ is the state before the oldest such group (or,
  // once it is durable, right after it); otherwise it is null and readers read the latest state,
  // whose transaction records are all durable. The writer takes it (and bumps tx_epoch_) before
  // writing such a group when none is held; the syncer replaces it as groups become durable and
  // drops it when none is left. A reader that read without one retries with one if tx_epoch_
  // moved meanwhile (a group with transaction records may have been written during its read).
  mutable std::mutex tx_snapshot_mu_;
  std::shared_ptr<const rocksdb::Snapshot> tx_snapshot_;
  std::size_t tx_groups_unsynced_ = 0;
  std::atomic<std::uint64_t> tx_epoch_{0};
  // Writer thread, before writing a group that changes a transaction record.
  void begin_tx_write();
  // Syncer, for each group begin_tx_write() counted, in order; `durable`: no error for it.
  void end_tx_write(written_group& g, bool durable);

  // ---- writer side
  template <class T, class Fn>
  void submit(bool sync, std::size_t bytes, completion<T> done, Fn&& fn, std::function<void()> on_written = {});
  void writer_loop();
  void run_group(std::vector<pending_op>& ops);
  void syncer_loop();
  // Fsyncs (when any group asked for it), publishes and completes the groups, in order.
  void make_durable(std::deque<written_group>& groups);

  // Replication (rocksdb_store_replica.cc): the writer's copy of a partition's leader-epoch
  // entries, loaded from the DB on first use.
  std::vector<epoch_entry>& writer_epochs(std::uint32_t tid, std::uint32_t p);
  // replica_append's raw form (the leader's stored records), and the checks both forms make on
  // the writer: the batch starts at the partition's next offset, its epoch is not older than
  // the partition's latest (a newer one is recorded as starting at `base`).
  void replica_append_raw(replica_append_request request, completion<std::uint64_t> done);
  result<void> check_replica_batch(group_ctx& ctx, const std::string& topic, std::uint32_t partition,
                                   partition_state& ps, std::uint32_t tid, std::uint64_t base, std::uint32_t epoch);
  result<std::vector<epoch_entry>> load_epochs(std::uint32_t tid, std::uint32_t p) const;
  // truncate()'s work inside a commit group: messages >= offset (their dedupe ids) and the
  // epoch entries starting there go; answers the partition's new next offset.
  result<std::uint64_t> truncate_in(group_ctx& ctx, topic_state& t, std::uint32_t partition, std::uint64_t offset);
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<epoch_entry>> epochs_;  // writer-only
  // Group replication (rocksdb_store_group_replica.cc): appends one change to the partition's
  // change sequence (its seq set here) and returns the sequence's new end.
  std::uint64_t log_group_change(group_ctx& ctx, std::uint32_t tid, std::uint32_t p, partition_state& ps,
                                 v1::GroupChange& change);
  // Transaction replication (rocksdb_store_tx_replica.cc): a home transaction's record after a
  // change, written into its home partition's change sequence; nullopt for a single node's
  // transaction (no home) or a home partition missing here.
  std::optional<group_change_ref> log_tx_change(group_ctx& ctx, const records::TxRecord& rec);
  // The current end of a home transaction's change sequence (what a retried Prepare or EndTx
  // waits for on the ISR: its first answer may have been lost); nullopt as log_tx_change.
  std::optional<group_change_ref> tx_home_end(group_ctx& ctx, const records::TxRecord& rec);
  // A follower's side: the leader's record of a transaction stored as it is (due index moved).
  result<void> apply_tx_change(group_ctx& ctx, const std::string& value);
  // The index of unresolved transactions (keys.h, CF index): a record's change from a record
  // whose entry was `from` to one whose entry is `to` (tx_index_entry), in the same batch as the
  // record's write, so a crash never separates them.
  void move_tx_index(group_ctx& ctx, const std::optional<std::string>& from, const std::optional<std::string>& to);
  // Format 1 → 2 (rocksdb_store_open.cc): the index built from every record, once.
  result<void> build_tx_index();
  // Young Prepares (young_ below; rocksdb_store_tx_young.cc). defer_due_entry: instead of the due
  // entry of a Prepare being written, notes it as young when it may be; true if it did.
  // take_young: a write about to change a young record's entry learns it has none (and the
  // record stops being young); true if it was young. index_young: writes the due entry of every
  // Prepare young for k_young_ms, and the bounds of those still young (writer, each group).
  // index_young_after_open: after a crash (or a failed group), the due entry of every PREPARED
  // record the stored bounds cover; young_ is empty after it. young_due_in: how long until the
  // oldest young Prepare's entry is due (writer_loop wakes for it), if any is young.
  bool defer_due_entry(group_ctx& ctx, const txid& id, const records::TxRecord& rec);
  bool take_young(group_ctx& ctx, const records::TxRecord& rec);
  void index_young(group_ctx& ctx);
  result<void> index_young_after_open();
  std::optional<std::chrono::milliseconds> young_due_in() const;
  std::vector<protocol::uuid> young_ids() const;  // in txid order
  // Listings of the index (rocksdb_store_tx.cc), read at `at` (read_durable_txs()).
  result<std::vector<tx_record>> list_indexed_txs(tx_state state, std::size_t limit, std::optional<txid> after,
                                                  std::span<const protocol::uuid> young,
                                                  const rocksdb::Snapshot* at) const;
  // Snapshots: the home partition's transactions read at `snap`, and a follower's replaced.
  result<void> snapshot_txs(std::string_view topic, std::uint32_t partition, const rocksdb::Snapshot* snap,
                            v1::GroupSnapshot& out) const;
  result<void> install_txs(group_ctx& ctx, const std::string& topic, std::uint32_t partition,
                           const v1::GroupSnapshot& snap);
  // Whether update_group and ensure_group may change this partition's group state here.
  bool group_owned(const topic_state& t, std::uint32_t p) const {
    return !options_.log_group_changes || t.partitions[p]->group_owner;
  }
  // update_group's part: each touched partition's change (after the update's effects).
  void log_update(group_ctx& ctx, const group_update& u, const std::string& group_record,
                  std::unordered_map<std::string, std::shared_ptr<topic_state>>& topics,
                  std::map<std::pair<std::uint32_t, std::uint32_t>, cursor_value>& cursors, group_update_result& out);
  // Creates the group's record, or adds the topic to it (a follower learning a group).
  void ensure_group_record(group_ctx& ctx, const std::string& group, const std::string& topic,
                           std::int64_t created_ms, const std::vector<std::string>& more_topics = {});

  // Reads inside the writer: through the current batch, then the DB.
  std::optional<std::string> wget(group_ctx& ctx, cf_index cf, const std::string& key);
  std::shared_ptr<topic_state> writer_topic(group_ctx& ctx, std::string_view name);
  result<std::shared_ptr<topic_state>> writer_topic_or_create(group_ctx& ctx, std::string_view name,
                                                              std::optional<std::uint32_t> partitions);
  std::shared_ptr<topic_state> make_topic(group_ctx& ctx, const topic_config& config);
  // `partition`: the caller's choice (checked against the topic); nullopt: the store's.
  position append_one(group_ctx& ctx, topic_state& t, const encoded_message& msg,
                      std::optional<std::uint32_t> partition = std::nullopt);
  void apply_ack(group_ctx& ctx, std::string_view group, std::uint32_t tid, std::uint32_t p, std::uint64_t offset,
                 std::optional<dead_letter> dead, std::map<std::pair<std::uint32_t, std::uint32_t>, cursor_value>& cursors);
  cursor_value& cursor_for(group_ctx& ctx, std::string_view group, std::uint32_t tid, std::uint32_t p,
                           std::map<std::pair<std::uint32_t, std::uint32_t>, cursor_value>& cursors);
  void put_delivery(group_ctx& ctx, std::string_view group, std::uint32_t tid, std::uint32_t p, std::uint64_t offset,
                    const delivery_value& v);
  void erase_delivery_due(group_ctx& ctx, std::string_view group, std::uint32_t tid, std::uint32_t p,
                          std::uint64_t offset);
  void finalize(group_ctx& ctx);
  // Feeds a log record to log_sampler_ and switches the log family's compression when it
  // says so (writer thread; log_compression.h).
  void sample_log_record(std::string_view record);
  // Drops the cached record of a prepared transaction (prepared_): its stored record changes.
  void forget_prepared(const txid& id) {
    if (auto it = prepared_.find(id); it != prepared_.end()) {
      prepared_bytes_ -= it->second.bytes;
      prepared_.erase(it);
    }
  }
  // Deletes every ACL entry naming `principal` (stored, or put earlier in this group).
  void drop_grants(group_ctx& ctx, const std::string& principal);
  std::int64_t now() const { return options_.clock(); }
  // The store takes no more writes after its first failed write, fsync or read inside the
  // writer. Latches that (the first failure's text is kept) and returns the error for the
  // requests it failed: what failed, RocksDB's text, what to do.
  // `no_space`: the failure was RocksDB's NoSpace on a write, the one failure the store
  // resumes from (see resume_if_space()).
  error latch_failure(error first, bool no_space = false);
  // The error of a write refused after the latch: store_failed, naming the first failure.
  error refusal() const;
  // The error of an append or prepare while the disk is full: store_full, with the numbers.
  error full_refusal() const;
  // Writer thread, before each group and at least every disk_check_interval when idle:
  // measures the free space (store_full below min_free_bytes) and resumes a store latched by
  // a full disk once there is room.
  void check_disk();
  void resume_if_space(std::optional<std::uint64_t> free);
  // After DB::Resume(): the writer's partition state back to what the database holds (a group
  // that failed had advanced it in memory only), published to readers.
  result<void> reload_partition_state();

  // A snapshot of the database now, released when the last holder drops it.
  std::shared_ptr<const rocksdb::Snapshot> take_snapshot() const;
  // ---- reader side
  // Runs fn(snapshot) reading transaction records as the last durable group left them
  // (find_tx, list_txs, due_checks, count_unresolved_txs): a commit written but not yet
  // fsynced, or whose fsync failed, still reads PREPARED. `snapshot` is null while every
  // written transaction record is durable; fn may run more than once (it starts afresh).
  template <class Fn>
  auto read_durable_txs(Fn&& fn) const -> decltype(fn(nullptr));
  result<std::optional<tx_record>> find_tx_at(const txid& id, const rocksdb::Snapshot* at) const;
  std::shared_ptr<topic_state> find_topic(std::string_view name) const;
  std::shared_ptr<topic_state> find_topic(std::uint32_t id) const;
  topic_info info_of(const topic_state& t) const;
  result<tx_record> to_tx_record(std::string_view value) const;
  // The record without message bodies and headers (resolve_result::before).
  result<tx_record> summary_of(const records::TxRecord& rec) const;
  template <class Fn>
  result<void> scan(cf_index cf, const std::string& from, const std::string& upper, Fn&& fn,
                    const rocksdb::Snapshot* at = nullptr) const;

  store_options options_;
  std::unique_ptr<rocksdb::Env> env_;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::vector<std::shared_ptr<rocksdb::CompactionFilterFactory>> filters_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  fs::path path_;

  mutable std::shared_mutex topics_mu_;
  std::unordered_map<std::string, std::shared_ptr<topic_state>> topics_;
  std::unordered_map<std::uint32_t, std::shared_ptr<topic_state>> topics_by_id_;
  // The writer's own view of the topics: a topic it created is there at once, while readers
  // see it in topics_ only after the syncer made its creation durable.
  std::unordered_map<std::string, std::shared_ptr<topic_state>> writer_topics_;
  std::uint32_t next_topic_id_ = 1;  // writer-only after open
  // Writer-only: the greatest message id in the dedupe index. Ids are UUIDv7, so a new one is
  // usually greater, and then it cannot be a duplicate: no lookup needed.
  protocol::uuid max_stored_id_;
  // Writer-only: whether the messages stored lately compress, and so whether the log family's
  // table files are written with LZ4 (log_compression.h). Off at open; never on without LZ4 in
  // the RocksDB linked (log_lz4_).
  log_compression_sampler log_sampler_;
  bool log_lz4_ = false;
  // Writer-only: no key of the tx family is greater (bytewise) than this one: the last key at
  // open, raised by finalize() with every group's greatest tx key, so it is never below a key
  // written since (a failed group's keys only raise it: more look-ups, none skipped wrongly).
  // A Prepare's txid above it cannot be stored yet, so its duplicate check needs no RocksDB
  // look-up: txids are UUIDv7 from the txmq clients (issue #15, tenth round).
  std::string max_tx_key_;

  // Writer-only: the records of the transactions prepared since open and not yet resolved or
  // checked, parsed, so that a resolve (EndTx) takes the record Prepare built instead of
  // reading it back from RocksDB and parsing it again. Every other write of a tx record drops
  // its entry; a full cache takes no more (the resolve then reads RocksDB, as before); a resume
  // after a failed write empties it.
  struct prepared_entry {
    records::TxRecord record;
    std::size_t bytes = 0;
  };
  std::unordered_map<protocol::uuid, prepared_entry, protocol::uuid_hash> prepared_;
  std::size_t prepared_bytes_ = 0;
  static constexpr std::size_t k_prepared_cache_bytes = 32u << 20;

 public:
  // Young Prepares (storage/README.md "Young Prepares"; issue #15, docs/BENCHMARKS.md
  // "Nineteenth round"). Most transactions are resolved within milliseconds of their Prepare,
  // long before their first check is due, and their due entry's insert at Prepare and delete
  // at COMMIT cost 15 % of the broker's CPU per transaction (a bound measured without them).
  // So the due entry of a Prepare whose txid is a UUIDv7 within k_young_skew_ms of the store's
  // clock, and whose first check is at least 2 × k_young_ms away, is written only k_young_ms
  // after the Prepare, if it is still PREPARED then. Such a txid's time bounds where its record sorts, so after a crash
  // the records of the young ones are found by a scan of the times between the stored bounds
  // ("ty" in the default family: the earliest prepared_ms still young, the latest deferred),
  // written in every group that changes them.
  static constexpr std::int64_t k_young_ms = 1000;
  static constexpr std::int64_t k_young_skew_ms = 1000;

 private:
  // Writer-only: (prepared_ms, txid) → next_check_ms of every young Prepare, oldest first.
  std::map<std::pair<std::int64_t, protocol::uuid>, std::int64_t> young_;
  std::int64_t young_max_ms_ = 0;  // the latest prepared_ms deferred since open (0: none)
  // For readers (list_txs, count_unresolved_txs): the txids that may have no due entry at a
  // reader's view. Added when deferred, removed once the group that wrote their entry or
  // changed their record (outcome, check) is durable (written_group::young_done).
  mutable std::mutex young_mu_;
  std::unordered_set<protocol::uuid, protocol::uuid_hash> young_ids_;
  // The earliest check time among the young due entries made durable since due_checks last
  // ran (none: max). A writer held up for seconds (a disk that stalls) writes an entry whose
  // check is already due, behind a caller's scan cursor (due_checks' from_ms), which would
  // then find it only at its next scan from 0. due_checks reads from here too and takes it.
  mutable std::atomic<std::int64_t> young_due_floor_{std::numeric_limits<std::int64_t>::max()};
  void lower_young_due_floor(std::int64_t ms) const noexcept;

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<pending_op> queue_;
  bool stopping_ = false;
  std::thread writer_;
  // Set once, after failure_ holds the first failure's text (under failure_mu_).
  std::atomic<bool> failed_{false};
  mutable std::mutex failure_mu_;
  std::string failure_;
  bool failure_no_space_ = false;  // under failure_mu_: the latch may be lifted (resume_if_space)
  std::string last_resume_error_;  // under failure_mu_: why the last attempt to resume failed

  // Disk space, measured by the writer thread.
  std::atomic<bool> full_{false};
  std::atomic<std::uint64_t> free_bytes_{0};
  std::chrono::steady_clock::time_point next_disk_check_{};  // writer-only
  std::uint64_t bytes_since_disk_check_ = 0;                   // writer-only

  std::mutex sync_mu_;
  std::condition_variable sync_cv_;
  std::deque<written_group> sync_queue_;
  bool sync_stopping_ = false;
  // Whoever holds the sync stage (the syncer, or the writer syncing inline when idle); the
  // stage's state below is touched only by its holder, handed over under sync_mu_.
  bool syncer_busy_ = false;
  // When the syncer's last fsync began (store_options::min_fsync_interval); the syncer's own.
  std::chrono::steady_clock::time_point last_fsync_start_{};
  bool unsynced_ = false;  // a write since the last fsync
  std::thread syncer_;
  // RocksDB's flush and compaction threads' priority (store_options::low_priority_background);
  // null when they keep the process's.
  std::shared_ptr<background_priority> background_;

  mutable std::mutex stats_mu_;
  store_stats stats_;
};

template <class T, class Fn>
void rocksdb_store::submit(bool sync, std::size_t bytes, completion<T> done, Fn&& fn, std::function<void()> on_written) {
  // Built before the lock (its one allocation is not made under it); a closed store answers
  // through the op's own completion.
  auto op = std::make_unique<typed_write_op<T, std::decay_t<Fn>>>(std::forward<Fn>(fn), std::move(done));
  op->bytes = bytes;
  op->sync = sync;
  op->submitted = std::chrono::steady_clock::now();
  op->on_written = std::move(on_written);
  std::unique_lock lk(queue_mu_);
  if (stopping_) {
    lk.unlock();
    op->done(make_error_code(errc::closed));
    return;
  }
  queue_.push_back(std::move(op));
  if (!hold_writer_wakeup(this)) queue_cv_.notify_one();
}

template <class Fn>
auto rocksdb_store::read_durable_txs(Fn&& fn) const -> decltype(fn(nullptr)) {
  for (;;) {
    std::shared_ptr<const rocksdb::Snapshot> snapshot;
    std::uint64_t epoch = 0;
    {
      std::lock_guard lk(tx_snapshot_mu_);
      snapshot = tx_snapshot_;
      epoch = tx_epoch_.load();
    }
    auto r = fn(snapshot.get());
    // Without a snapshot the read saw the latest state. If it saw a record the writer wrote
    // after this read began, RocksDB's sequence number (released by the write, acquired by the
    // read) orders the writer's epoch bump before this load: the read is done again, with the
    // snapshot the writer set before that write.
    if (snapshot || tx_epoch_.load() == epoch) return r;
  }
}

template <class Fn>
result<void> rocksdb_store::scan(cf_index cf, const std::string& from, const std::string& upper, Fn&& fn,
                                 const rocksdb::Snapshot* at) const {
  rocksdb::ReadOptions ro;
  ro.snapshot = at;
  rocksdb::Slice upper_slice(upper);
  if (!upper.empty()) ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handles_[cf]));
  for (it->Seek(from); it->Valid(); it->Next()) {
    std::string_view k(it->key().data(), it->key().size());
    std::string_view v(it->value().data(), it->value().size());
    result<bool> more = fn(k, v);
    if (!more) return more.error();
    if (!more.value()) break;
  }
  if (!it->status().ok()) return status_error(it->status(), "scanning the store");
  return outcome::success();
}

}  // namespace txmq::storage::detail
