// The RocksDB implementation of txmq::storage::store.
//
// Writes are a two-stage pipeline. The writer thread (the group committer) drains the request
// queue and applies every request to one WriteBatch; reads inside the writer go through an
// overlay of that batch, so a request sees the effects of the requests before it. It writes the
// batch without sync and hands the group to the syncer thread. The syncer takes every group
// written meanwhile, makes them durable with one WAL fsync, then publishes the new high
// watermarks and runs the completions, in order. So applying group N+1 overlaps the fsync of
// group N, one fsync covers several groups under load, offsets, dedupe decisions and
// transaction resolutions are decided by one thread in one order, and nothing is acknowledged
// or shown to readers before its fsync.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

#include <rocksdb/cache.h>
#include <rocksdb/compaction_filter.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>
#include <rocksdb/write_buffer_manager.h>
#include <rocksdb/write_batch.h>

#include "keys.h"
#include "txmq/protocol/partitioner.h"
#include "txmq/storage/store.h"
#include "txmq/storage/v1/records.pb.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::storage {
namespace {

using namespace detail;
namespace fs = std::filesystem;

constexpr std::string_view k_format_version = "1";
constexpr std::size_t k_max_topic_name = 249;
constexpr std::size_t k_max_group_name = 255;
constexpr std::uint32_t k_max_partitions = 1024;
// Retention judges at most this many batches per partition per pass so one pass never holds the
// writer for long; the next pass continues.
constexpr std::size_t k_retention_batches_per_pass = 4096;

enum cf_index : std::size_t { cf_default, cf_log, cf_dedupe, cf_tx, cf_index_, cf_groups, cf_count };
const char* const k_cf_names[cf_count] = {"default", "log", "dedupe", "tx", "index", "groups"};

std::int64_t system_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::error_code to_error(const rocksdb::Status& s) {
  if (s.IsCorruption()) return errc::corruption;
  if (s.IsShutdownInProgress()) return errc::closed;
  return errc::io_error;
}

bool valid_name(std::string_view name, std::size_t max) {
  if (name.empty() || name.size() > max) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f; });
}

// Drops dedupe entries older than the window and resolved transaction outcomes older than it,
// during compaction, so expiry never costs a foreground write.
class expiry_filter final : public rocksdb::CompactionFilter {
 public:
  enum class kind { dedupe, tx };
  expiry_filter(kind k, std::function<std::int64_t()> clock, std::int64_t window_ms)
      : kind_(k), clock_(std::move(clock)), window_ms_(window_ms) {}

  bool Filter(int, const rocksdb::Slice&, const rocksdb::Slice& value, std::string*, bool*) const override {
    const std::int64_t cutoff = clock_() - window_ms_;
    if (kind_ == kind::dedupe) {
      dedupe_entry e;
      return decode(std::string_view(value.data(), value.size()), e) && e.stored_ms < cutoff;
    }
    records::TxRecord rec;
    if (!rec.ParseFromArray(value.data(), static_cast<int>(value.size()))) return false;
    const auto st = static_cast<tx_state>(rec.state());
    return (st == tx_state::committed || st == tx_state::rolled_back) && rec.resolved_ms() < cutoff;
  }
  const char* Name() const override { return kind_ == kind::dedupe ? "txmq.dedupe_expiry" : "txmq.tx_expiry"; }

 private:
  kind kind_;
  std::function<std::int64_t()> clock_;
  std::int64_t window_ms_;
};

struct partition_state {
  // Writer-only: the offset the next appended message gets.
  std::uint64_t next = 0;
  // Published after each write, read by readers.
  std::atomic<std::uint64_t> committed_next{0};
  std::atomic<std::uint64_t> start_offset{0};
  std::atomic<std::uint64_t> bytes{0};
  // Writer-only copy of the durable meta.
  partition_meta meta;
};

struct topic_state {
  records::TopicRecord record;
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

encoded_message encode_message(v1::Message&& m, std::int64_t now_ms) {
  encoded_message e;
  e.id = protocol::uuid::from_bytes(m.id()).value();  // length checked by the caller
  if (m.has_key()) e.key = m.key();
  if (m.publish_time_ms() == 0) m.set_publish_time_ms(now_ms);
  e.publish_ms = m.publish_time_ms();
  e.body_bytes = m.body().size();
  m.clear_topic();
  m.clear_partition();
  m.clear_offset();
  m.clear_attempt();
  m.SerializeToString(&e.bytes);
  return e;
}

void put_varint(std::string& out, std::uint64_t v) {
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
  void finish() {
    std::string header;
    encode(batch_header{1, count, max_publish_ms}, header);
    value.replace(0, batch_header_bytes, header);
  }
};

// One commit group's writes, with an overlay so reads inside the writer see them.
struct group_ctx {
  explicit group_ctx(const std::vector<rocksdb::ColumnFamilyHandle*>& h) : handles(h) {}

  void put(cf_index cf, const std::string& key, const std::string& value) {
    batch.Put(handles[cf], key, value);
    overlay[cf][key] = value;
  }
  void del(cf_index cf, const std::string& key) {
    batch.Delete(handles[cf], key);
    overlay[cf][key] = std::nullopt;
  }

  const std::vector<rocksdb::ColumnFamilyHandle*>& handles;
  rocksdb::WriteBatch batch;
  std::unordered_map<std::string, std::optional<std::string>> overlay[cf_count];
  // Dedupe entries of this group, kept apart from the generic overlay: it is the hot path.
  std::unordered_map<protocol::uuid, dedupe_entry, protocol::uuid_hash> dedupe;
  std::map<std::pair<std::uint32_t, std::uint32_t>, pending_log> logs;
  std::vector<std::shared_ptr<topic_state>> new_topics;
  std::vector<partition_state*> touched;
  std::optional<std::error_code> poisoned;  // a read inside the writer failed: fail the group
  std::int64_t now_ms = 0;
  bool sync = false;
  std::uint64_t messages = 0;
  std::uint64_t bytes = 0;
};

using finisher = std::function<void(const std::error_code*)>;

struct pending_op {
  std::size_t bytes = 0;
  bool sync = false;
  std::function<finisher(group_ctx&)> apply;
};

// A group written to RocksDB (not yet synced), on its way through the syncer.
struct written_group {
  std::vector<finisher> finishers;
  std::vector<std::pair<partition_state*, partition_meta>> publish;
  std::vector<std::shared_ptr<topic_state>> new_topics;
  std::error_code error;
  bool sync = false;
  bool wrote = false;
  std::size_t operations = 0;
  std::uint64_t messages = 0;
  std::uint64_t bytes = 0;
};

class rocksdb_store final : public store {
 public:
  rocksdb_store(store_options options, std::unique_ptr<rocksdb::Env> env, std::shared_ptr<rocksdb::Cache> cache,
                std::vector<std::unique_ptr<rocksdb::CompactionFilter>> filters)
      : options_(std::move(options)),
        env_(std::move(env)),
        cache_(std::move(cache)),
        filters_(std::move(filters)) {}

  ~rocksdb_store() override {
    close();
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
    handles_.clear();
    if (db_) db_->Close().PermitUncheckedError();
  }

  result<void> open(const fs::path& path, bool fresh);

  void create_topic(topic_config config, completion<topic_info> done) override;
  std::optional<topic_info> topic(std::string_view name) const override;
  std::vector<topic_info> topics() const override;
  void append(append_request request, completion<append_result> done) override;
  result<read_result> read(const read_request& request) const override;
  result<std::optional<id_location>> find_id(const message_id& id) const override;
  void prepare(prepare_request request, completion<prepare_result> done) override;
  void resolve(resolve_request request, completion<resolve_result> done) override;
  void record_checks(std::vector<check_update> updates, completion<void> done) override;
  result<std::optional<tx_record>> find_tx(const txid& id) const override;
  result<std::vector<tx_record>> due_checks(std::int64_t until_ms, std::size_t limit, std::int64_t from_ms) const override;
  result<std::vector<tx_record>> list_txs(std::optional<tx_state> state, std::size_t limit,
                                          std::optional<txid> after) const override;
  void ensure_group(group_info info, group_start start, completion<group_state> done) override;
  void update_group(group_update update, completion<group_update_result> done) override;
  result<group_state> load_group(std::string_view name) const override;
  std::vector<group_info> groups() const override;
  result<std::vector<dead_letter>> dead_letters(std::string_view group, std::size_t limit) const override;
  result<std::vector<due_delivery>> due_deliveries(std::int64_t until_ms, std::size_t limit) const override;
  void put_webhook(v1::Webhook record, completion<void> done) override;
  void delete_webhook(std::string id, completion<bool> done) override;
  result<std::vector<v1::Webhook>> webhooks() const override;
  void record_webhook_attempts(std::vector<v1::WebhookAttempt> attempts, completion<void> done) override;
  result<std::vector<v1::WebhookAttempt>> webhook_attempts(const webhook_attempts_query& query) const override;
  void expire_webhook_attempts(std::int64_t before_ms, std::size_t limit, completion<std::uint64_t> done) override;
  void enforce_retention(completion<retention_result> done) override;
  result<void> compact() override;
  result<std::uint64_t> count_dedupe_entries() const override;
  store_stats stats() const override;
  void close() override;

 private:
  // ---- writer side
  template <class T, class Fn>
  void submit(bool sync, std::size_t bytes, completion<T> done, Fn&& fn);
  void writer_loop();
  void run_group(std::vector<pending_op>& ops);
  void syncer_loop();
  // Fsyncs (when any group asked for it), publishes and completes the groups, in order.
  void make_durable(std::deque<written_group>& groups);

  // Reads inside the writer: through the current batch, then the DB.
  std::optional<std::string> wget(group_ctx& ctx, cf_index cf, const std::string& key);
  std::shared_ptr<topic_state> writer_topic(group_ctx& ctx, std::string_view name);
  result<std::shared_ptr<topic_state>> writer_topic_or_create(group_ctx& ctx, std::string_view name,
                                                              std::optional<std::uint32_t> partitions);
  std::shared_ptr<topic_state> make_topic(group_ctx& ctx, const topic_config& config);
  position append_one(group_ctx& ctx, topic_state& t, const encoded_message& msg);
  void apply_ack(group_ctx& ctx, std::string_view group, std::uint32_t tid, std::uint32_t p, std::uint64_t offset,
                 std::optional<dead_letter> dead, std::map<std::pair<std::uint32_t, std::uint32_t>, cursor_value>& cursors);
  cursor_value& cursor_for(group_ctx& ctx, std::string_view group, std::uint32_t tid, std::uint32_t p,
                           std::map<std::pair<std::uint32_t, std::uint32_t>, cursor_value>& cursors);
  void put_delivery(group_ctx& ctx, std::string_view group, std::uint32_t tid, std::uint32_t p, std::uint64_t offset,
                    const delivery_value& v);
  void erase_delivery_due(group_ctx& ctx, std::string_view group, std::uint32_t tid, std::uint32_t p,
                          std::uint64_t offset);
  void finalize(group_ctx& ctx);
  std::int64_t now() const { return options_.clock(); }

  // ---- reader side
  std::shared_ptr<topic_state> find_topic(std::string_view name) const;
  std::shared_ptr<topic_state> find_topic(std::uint32_t id) const;
  topic_info info_of(const topic_state& t) const;
  result<tx_record> to_tx_record(std::string_view value) const;
  template <class Fn>
  result<void> scan(cf_index cf, const std::string& from, const std::string& upper, Fn&& fn) const;

  store_options options_;
  std::unique_ptr<rocksdb::Env> env_;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::vector<std::unique_ptr<rocksdb::CompactionFilter>> filters_;
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

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<pending_op> queue_;
  bool stopping_ = false;
  std::thread writer_;
  std::atomic<bool> failed_{false};

  std::mutex sync_mu_;
  std::condition_variable sync_cv_;
  std::deque<written_group> sync_queue_;
  bool sync_stopping_ = false;
  // Whoever holds the sync stage (the syncer, or the writer syncing inline when idle); the
  // stage's state below is touched only by its holder, handed over under sync_mu_.
  bool syncer_busy_ = false;
  bool unsynced_ = false;  // a write since the last fsync
  std::thread syncer_;

  mutable std::mutex stats_mu_;
  store_stats stats_;
};

// ------------------------------------------------------------------------------------------
// Open

result<void> rocksdb_store::open(const fs::path& path, bool fresh) {
  path_ = path;
  auto fail = [](std::error_code ec, std::string text) -> result<void> { return error(ec, std::move(text)); };

  rocksdb::DBOptions db_options;
  db_options.create_if_missing = fresh;
  db_options.create_missing_column_families = fresh;
  db_options.paranoid_checks = true;
  // A torn last record after a crash is expected (it was never acknowledged); corruption
  // anywhere else must stop the open rather than silently drop what follows it.
  db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  db_options.max_background_jobs = 2;
  // All memtables together stay within this budget (charged to the block cache), so memory
  // is bounded whatever the number of column families and however much is stored.
  db_options.write_buffer_manager =
      std::make_shared<rocksdb::WriteBufferManager>(options_.memtable_budget_bytes, cache_);
  db_options.bytes_per_sync = 1 << 20;
  db_options.keep_log_file_num = 5;
  if (env_) db_options.env = env_.get();

  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache_;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.cache_index_and_filter_blocks = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;

  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (std::size_t i = 0; i < cf_count; ++i) {
    rocksdb::ColumnFamilyOptions cf;
    cf.write_buffer_size = i == cf_log ? options_.write_buffer_bytes : std::max<std::size_t>(options_.write_buffer_bytes / 4, 2 << 20);
    cf.max_write_buffer_number = 3;
    cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    cf.compression = rocksdb::kNoCompression;
    if (i == cf_dedupe) {
      cf.compaction_filter = filters_[0].get();
      // Nearly every lookup is for a new id: a memtable bloom filter answers those misses
      // without walking the skip list.
      cf.memtable_prefix_bloom_size_ratio = 0.05;
      cf.memtable_whole_key_filtering = true;
      // Not memtable_insert_with_hint_prefix_extractor: with it, ids from concurrent producers
      // (not strictly increasing) were answered as duplicates of other ids in the crash test.
    }
    if (i == cf_tx) cf.compaction_filter = filters_[1].get();
    cfs.emplace_back(k_cf_names[i], cf);
  }

  if (!fresh) {
    std::vector<std::string> existing;
    auto s = rocksdb::DB::ListColumnFamilies(db_options, path.string(), &existing);
    if (!s.ok()) {
      return fail(to_error(s), "cannot open the txmq store at " + path.string() + ": " + s.ToString());
    }
    for (std::size_t i = 0; i < cf_count; ++i) {
      if (std::find(existing.begin(), existing.end(), k_cf_names[i]) == existing.end()) {
        return fail(errc::not_a_store, "the RocksDB database at " + path.string() + " has no column family '" +
                                           k_cf_names[i] + "': not a txmq store, refusing to open it");
      }
    }
  }

  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(db_options, path.string(), cfs, &handles_, &raw);
  if (!s.ok()) {
    return fail(to_error(s), "cannot open the txmq store at " + path.string() + ": " + s.ToString() +
                                 " (the store is left untouched; restore it from a backup or move it aside)");
  }
  db_.reset(raw);

  if (!fresh && options_.verify_checksums_on_open) {
    s = db_->VerifyChecksum();
    if (!s.ok()) {
      return fail(to_error(s), "the txmq store at " + path.string() + " failed its checksum check: " + s.ToString() +
                                   " (refusing to start; restore it from a backup or move it aside)");
    }
  }

  // Format version: a new store gets it; an existing one must have ours, unless it is an empty
  // database left by a crash during its own creation.
  std::string version;
  s = db_->Get(rocksdb::ReadOptions(), handles_[cf_default], "v", &version);
  if (s.IsNotFound()) {
    bool empty = true;
    for (auto* h : handles_) {
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), h));
      it->SeekToFirst();
      if (it->Valid()) empty = false;
    }
    if (!empty) {
      return fail(errc::not_a_store, "the RocksDB database at " + path.string() +
                                         " has no txmq format version: not a txmq store, refusing to open it");
    }
    rocksdb::WriteOptions wo;
    wo.sync = true;
    s = db_->Put(wo, handles_[cf_default], "v", std::string(k_format_version));
    if (!s.ok()) return fail(to_error(s), "cannot initialise the txmq store at " + path.string() + ": " + s.ToString());
  } else if (!s.ok()) {
    return fail(to_error(s), "cannot read the txmq store at " + path.string() + ": " + s.ToString());
  } else if (version != k_format_version) {
    return fail(errc::not_a_store, "the txmq store at " + path.string() + " has format version " + version +
                                       ", this build reads version " + std::string(k_format_version));
  }

  // Topics and partition state.
  auto corrupt = [&](const std::string& what) {
    return fail(errc::corruption, "the txmq store at " + path.string() + " is inconsistent: " + what);
  };
  {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), handles_[cf_default]));
    for (it->Seek("t/"); it->Valid() && it->key().starts_with("t/"); it->Next()) {
      auto t = std::make_shared<topic_state>();
      if (!t->record.ParseFromArray(it->value().data(), static_cast<int>(it->value().size())) ||
          t->record.partitions() == 0 || t->record.partitions() > k_max_partitions) {
        return corrupt("unreadable topic record " + it->key().ToString());
      }
      t->created_ms = t->record.created_ms();
      for (std::uint32_t p = 0; p < t->record.partitions(); ++p) {
        auto ps = std::make_unique<partition_state>();
        std::string v;
        auto gs = db_->Get(rocksdb::ReadOptions(), handles_[cf_default], partition_meta_key(t->record.id(), p), &v);
        if (!gs.ok() || !decode(v, ps->meta)) {
          return corrupt("missing partition state of topic '" + t->record.name() + "' partition " + std::to_string(p));
        }
        // The log's last batch must end exactly where the meta says: both are written in one batch.
        std::unique_ptr<rocksdb::Iterator> li(db_->NewIterator(rocksdb::ReadOptions(), handles_[cf_log]));
        li->SeekForPrev(log_key(t->record.id(), p, UINT64_MAX));
        if (li->Valid() && li->key().starts_with(log_prefix(t->record.id(), p))) {
          batch_header h;
          if (!decode(std::string_view(li->value().data(), li->value().size()), h)) {
            return corrupt("unreadable log batch in topic '" + t->record.name() + "'");
          }
          const std::uint64_t end = get_u64(li->key().data() + 8) + h.count;
          if (end != ps->meta.next_offset) {
            return corrupt("topic '" + t->record.name() + "' partition " + std::to_string(p) + " log ends at " +
                           std::to_string(end) + " but its state says " + std::to_string(ps->meta.next_offset));
          }
        } else if (!li->status().ok()) {
          return fail(to_error(li->status()), "reading " + path.string() + ": " + li->status().ToString());
        }
        ps->next = ps->meta.next_offset;
        ps->committed_next = ps->meta.next_offset;
        ps->start_offset = ps->meta.start_offset;
        ps->bytes = ps->meta.bytes;
        t->partitions.push_back(std::move(ps));
      }
      next_topic_id_ = std::max(next_topic_id_, t->record.id() + 1);
      topics_by_id_[t->record.id()] = t;
      writer_topics_[t->record.name()] = t;
      topics_[t->record.name()] = std::move(t);
    }
    if (!it->status().ok()) {
      return fail(to_error(it->status()), "reading " + path.string() + ": " + it->status().ToString());
    }
  }

  {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), handles_[cf_dedupe]));
    it->SeekToLast();
    if (it->Valid()) {
      auto id = protocol::uuid::from_bytes(std::string_view(it->key().data(), it->key().size()));
      if (!id) return corrupt("a dedupe index key is not a message id");
      max_stored_id_ = id.value();
    } else if (!it->status().ok()) {
      return fail(to_error(it->status()), "reading " + path.string() + ": " + it->status().ToString());
    }
  }

  syncer_ = std::thread([this] { syncer_loop(); });
  writer_ = std::thread([this] { writer_loop(); });
  return outcome::success();
}

// ------------------------------------------------------------------------------------------
// The group committer

template <class T, class Fn>
void rocksdb_store::submit(bool sync, std::size_t bytes, completion<T> done, Fn&& fn) {
  // Checked and queued under one lock, before `done` moves into the op: a closed store must
  // still be able to answer through it.
  std::unique_lock lk(queue_mu_);
  if (stopping_) {
    lk.unlock();
    done(make_error_code(errc::closed));
    return;
  }
  pending_op op;
  op.bytes = bytes;
  op.sync = sync;
  op.apply = [fn = std::forward<Fn>(fn), done = std::move(done)](group_ctx& ctx) mutable -> finisher {
    result<T> r = [&]() -> result<T> {
      try {
        return fn(ctx);
      } catch (const std::exception&) {
        // The request may have left part of its writes in the batch: the group cannot be written.
        ctx.poisoned = make_error_code(errc::store_failed);
        return errc::store_failed;
      }
    }();
    return [r = std::move(r), done = std::move(done)](const std::error_code* write_error) mutable {
      if (write_error && r.has_value()) {
        done(*write_error);
      } else {
        done(std::move(r));
      }
    };
  };
  queue_.push_back(std::move(op));
  queue_cv_.notify_one();
}

void rocksdb_store::writer_loop() {
  std::vector<pending_op> ops;
  for (;;) {
    {
      std::unique_lock lk(queue_mu_);
      queue_cv_.wait(lk, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) break;  // stopping and drained
      std::size_t bytes = 0;
      while (!queue_.empty() && (ops.empty() || bytes + queue_.front().bytes <= options_.max_group_bytes)) {
        bytes += queue_.front().bytes;
        ops.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    run_group(ops);
    ops.clear();
  }
  std::lock_guard lk(sync_mu_);
  sync_stopping_ = true;
  sync_cv_.notify_one();
}

void rocksdb_store::run_group(std::vector<pending_op>& ops) {
  group_ctx ctx(handles_);
  ctx.now_ms = now();
  written_group g;
  g.finishers.reserve(ops.size());
  g.operations = ops.size();
  for (auto& op : ops) {
    ctx.sync = ctx.sync || op.sync;
    g.finishers.push_back(op.apply(ctx));
  }
  g.sync = ctx.sync;
  if (failed_) {
    g.error = errc::store_failed;
  } else if (ctx.poisoned) {
    // Offsets may have been handed out in memory for writes that will never happen: the store
    // takes no more writes, and a reopen rebuilds from what is durable.
    g.error = *ctx.poisoned;
    failed_ = true;
  } else {
    finalize(ctx);
    if (ctx.batch.Count() > 0) {
      // Not synced here: the syncer makes this and every group written meanwhile durable with
      // one fsync before anyone hears of them.
      auto s = db_->Write(rocksdb::WriteOptions(), &ctx.batch);
      if (!s.ok()) {
        g.error = to_error(s);
        failed_ = true;
      }
      g.wrote = true;
    }
    for (auto* p : ctx.touched) g.publish.emplace_back(p, p->meta);
    g.new_topics = std::move(ctx.new_topics);
    g.messages = ctx.messages;
    g.bytes = ctx.bytes;
  }
  {
    std::lock_guard lk(sync_mu_);
    // Under load, hand the group to the syncer and go on applying the next one (the fsync
    // overlaps). When nothing else is waiting and the syncer is idle, a hand-off would only add
    // a thread wake-up to this request's latency: sync here instead.
    bool inline_sync = sync_queue_.empty() && !syncer_busy_;
    if (inline_sync) {
      std::lock_guard lq(queue_mu_);
      inline_sync = queue_.empty();
    }
    if (!inline_sync) {
      sync_queue_.push_back(std::move(g));
      sync_cv_.notify_one();
      return;
    }
    syncer_busy_ = true;  // the sync stage is this thread's until it is done
  }
  std::deque<written_group> one;
  one.push_back(std::move(g));
  make_durable(one);
  std::lock_guard lk(sync_mu_);
  syncer_busy_ = false;
}

void rocksdb_store::syncer_loop() {
  std::deque<written_group> groups;
  for (;;) {
    {
      std::unique_lock lk(sync_mu_);
      syncer_busy_ = false;
      sync_cv_.wait(lk, [&] { return !sync_queue_.empty() || sync_stopping_; });
      if (sync_queue_.empty()) return;
      groups.swap(sync_queue_);
      syncer_busy_ = true;
    }
    make_durable(groups);
    groups.clear();
  }
}

void rocksdb_store::make_durable(std::deque<written_group>& groups) {
  bool need_sync = false;
  for (auto& g : groups) {
    unsynced_ = unsynced_ || g.wrote;
    need_sync = need_sync || g.sync;
  }
  std::error_code sync_error;
  // A synced answer may rest on an earlier async write (a duplicate of it, say): sync then too.
  if (need_sync && unsynced_ && !failed_) {
    // The in-memory file system has nothing to make durable (and its WAL cannot SyncWAL).
    auto s = options_.in_memory ? rocksdb::Status::OK() : db_->SyncWAL();
    if (s.ok()) {
      unsynced_ = false;
      std::lock_guard lk(stats_mu_);
      stats_.fsyncs += 1;
    } else {
      sync_error = to_error(s);
      failed_ = true;
    }
  } else if (need_sync && failed_) {
    sync_error = errc::store_failed;
  }
  for (auto& g : groups) {
    std::error_code err = g.error ? g.error : (g.sync ? sync_error : std::error_code{});
    if (!err) {
      // Publish: new topics, then high watermarks, so a reader that sees a new offset finds it.
      if (!g.new_topics.empty()) {
        std::unique_lock lk(topics_mu_);
        for (auto& t : g.new_topics) {
          topics_by_id_[t->record.id()] = t;
          topics_[t->record.name()] = t;
        }
      }
      for (auto& [p, meta] : g.publish) {
        p->start_offset.store(meta.start_offset, std::memory_order_release);
        p->bytes.store(meta.bytes, std::memory_order_release);
        p->committed_next.store(meta.next_offset, std::memory_order_release);
      }
      std::lock_guard lk(stats_mu_);
      stats_.commit_groups += g.wrote ? 1 : 0;
      stats_.operations += g.operations;
      stats_.messages_appended += g.messages;
      stats_.bytes_appended += g.bytes;
      stats_.largest_group = std::max<std::uint64_t>(stats_.largest_group, g.operations);
    }
    for (auto& f : g.finishers) f(err ? &err : nullptr);
  }
}

void rocksdb_store::close() {
  {
    std::lock_guard lk(queue_mu_);
    stopping_ = true;
    queue_cv_.notify_all();
  }
  if (writer_.joinable()) writer_.join();
  if (syncer_.joinable()) syncer_.join();
}

std::optional<std::string> rocksdb_store::wget(group_ctx& ctx, cf_index cf, const std::string& key) {
  if (auto it = ctx.overlay[cf].find(key); it != ctx.overlay[cf].end()) return it->second;
  std::string value;
  auto s = db_->Get(rocksdb::ReadOptions(), handles_[cf], key, &value);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) {
    ctx.poisoned = to_error(s);
    return std::nullopt;
  }
  return value;
}

void rocksdb_store::finalize(group_ctx& ctx) {
  for (auto& [k, log] : ctx.logs) {
    log.finish();
    ctx.batch.Put(handles_[cf_log], log_key(log.topic_id, log.partition, log.base), log.value);
    log.state->meta.bytes += log.value.size();
    log.state->meta.next_offset = log.state->next;
  }
  for (auto& [k, log] : ctx.logs) {
    ctx.put(cf_default, partition_meta_key(log.topic_id, log.partition), encode(log.state->meta));
  }
}

// ------------------------------------------------------------------------------------------
// Topics

std::shared_ptr<topic_state> rocksdb_store::find_topic(std::string_view name) const {
  std::shared_lock lk(topics_mu_);
  auto it = topics_.find(std::string(name));
  return it == topics_.end() ? nullptr : it->second;
}

std::shared_ptr<topic_state> rocksdb_store::find_topic(std::uint32_t id) const {
  std::shared_lock lk(topics_mu_);
  auto it = topics_by_id_.find(id);
  return it == topics_by_id_.end() ? nullptr : it->second;
}

std::shared_ptr<topic_state> rocksdb_store::writer_topic(group_ctx&, std::string_view name) {
  auto it = writer_topics_.find(std::string(name));
  return it == writer_topics_.end() ? nullptr : it->second;
}

std::shared_ptr<topic_state> rocksdb_store::make_topic(group_ctx& ctx, const topic_config& config) {
  auto t = std::make_shared<topic_state>();
  t->record.set_id(next_topic_id_++);
  t->record.set_name(config.name);
  t->record.set_partitions(config.partitions);
  t->record.set_retention_ms(config.retention_ms);
  t->record.set_retention_bytes(config.retention_bytes);
  t->record.set_created_ms(ctx.now_ms);
  t->created_ms = ctx.now_ms;
  ctx.put(cf_default, topic_key(config.name), t->record.SerializeAsString());
  for (std::uint32_t p = 0; p < config.partitions; ++p) {
    auto ps = std::make_unique<partition_state>();
    ctx.put(cf_default, partition_meta_key(t->record.id(), p), encode(ps->meta));
    t->partitions.push_back(std::move(ps));
  }
  ctx.new_topics.push_back(t);
  writer_topics_[config.name] = t;
  return t;
}

result<std::shared_ptr<topic_state>> rocksdb_store::writer_topic_or_create(group_ctx& ctx, std::string_view name,
                                                                          std::optional<std::uint32_t> partitions) {
  if (!valid_name(name, k_max_topic_name)) return errc::invalid_argument;
  if (auto t = writer_topic(ctx, name)) return t;
  if (!partitions) return errc::unknown_topic;
  if (*partitions == 0 || *partitions > k_max_partitions) return errc::invalid_argument;
  topic_config config;
  config.name = std::string(name);
  config.partitions = *partitions;
  return make_topic(ctx, config);
}

void rocksdb_store::create_topic(topic_config config, completion<topic_info> done) {
  submit<topic_info>(true, 256, std::move(done), [this, config = std::move(config)](group_ctx& ctx) -> result<topic_info> {
    if (!valid_name(config.name, k_max_topic_name) || config.partitions == 0 || config.partitions > k_max_partitions) {
      return errc::invalid_argument;
    }
    if (auto t = writer_topic(ctx, config.name)) {
      if (t->record.partitions() != config.partitions) return errc::topic_exists;
      return info_of(*t);
    }
    auto t = make_topic(ctx, config);
    return info_of(*t);
  });
}

topic_info rocksdb_store::info_of(const topic_state& t) const {
  topic_info info;
  info.id = t.record.id();
  info.created_ms = t.created_ms;
  info.config.name = t.record.name();
  info.config.partitions = t.record.partitions();
  info.config.retention_ms = t.record.retention_ms();
  info.config.retention_bytes = t.record.retention_bytes();
  for (auto& p : t.partitions) {
    info.partitions.push_back({p->start_offset.load(std::memory_order_acquire),
                               p->committed_next.load(std::memory_order_acquire),
                               p->bytes.load(std::memory_order_acquire)});
  }
  return info;
}

std::optional<topic_info> rocksdb_store::topic(std::string_view name) const {
  auto t = find_topic(name);
  if (!t) return std::nullopt;
  return info_of(*t);
}

std::vector<topic_info> rocksdb_store::topics() const {
  std::vector<std::shared_ptr<topic_state>> all;
  {
    std::shared_lock lk(topics_mu_);
    for (auto& [_, t] : topics_) all.push_back(t);
  }
  std::vector<topic_info> out;
  for (auto& t : all) out.push_back(info_of(*t));
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.config.name < b.config.name; });
  return out;
}

// ------------------------------------------------------------------------------------------
// Messages

position rocksdb_store::append_one(group_ctx& ctx, topic_state& t, const encoded_message& msg) {
  if (auto it = ctx.dedupe.find(msg.id); it != ctx.dedupe.end()) {
    return {it->second.partition, it->second.offset, true};
  }
  const rocksdb::Slice id_key(msg.id.raw().data(), msg.id.raw().size());
  std::string existing;
  auto s = msg.id > max_stored_id_ ? rocksdb::Status::NotFound()
                                   : db_->Get(rocksdb::ReadOptions(), handles_[cf_dedupe], id_key, &existing);
  if (s.ok()) {
    dedupe_entry e;
    if (decode(existing, e) && e.stored_ms >= ctx.now_ms - options_.dedupe_window.count()) {
      return {e.partition, e.offset, true};
    }
  } else if (!s.IsNotFound()) {
    ctx.poisoned = to_error(s);
    return {};
  }
  const std::uint32_t parts = t.record.partitions();
  const std::uint32_t p = msg.key ? protocol::partition_for_key(*msg.key, parts)
                                  : t.round_robin.fetch_add(1, std::memory_order_relaxed) % parts;
  auto& ps = *t.partitions[p];
  const std::uint64_t offset = ps.next++;

  auto [it, inserted] = ctx.logs.try_emplace({t.record.id(), p});
  auto& log = it->second;
  if (inserted) {
    log.topic_id = t.record.id();
    log.partition = p;
    log.state = &ps;
    log.start(offset);
    ctx.touched.push_back(&ps);
  }
  log.add(msg);
  ctx.messages += 1;
  ctx.bytes += msg.body_bytes;

  const dedupe_entry entry{t.record.id(), p, offset, ctx.now_ms};
  ctx.batch.Put(handles_[cf_dedupe], id_key, encode(entry));
  ctx.dedupe.emplace(msg.id, entry);
  max_stored_id_ = std::max(max_stored_id_, msg.id);
  return {p, offset, false};
}

namespace {
bool valid_messages(const std::vector<v1::Message>& messages) {
  return !messages.empty() && std::all_of(messages.begin(), messages.end(), [](const v1::Message& m) {
    const auto& id = m.id();
    return id.size() == protocol::uuid::size && id.find_first_not_of('\0') != std::string::npos;
  });
}
std::size_t request_bytes(const std::vector<v1::Message>& messages) {
  std::size_t n = 64;
  for (auto& m : messages) n += m.body().size() + m.key().size() + 48;
  return n;
}
}  // namespace

void rocksdb_store::append(append_request request, completion<append_result> done) {
  if (!valid_messages(request.messages)) return done(make_error_code(errc::invalid_argument));
  // Serialize here, on the caller's thread: the writer thread is the one everybody waits for.
  const std::int64_t received_ms = now();
  std::vector<encoded_message> messages;
  messages.reserve(request.messages.size());
  std::size_t bytes = 64;
  for (auto& m : request.messages) {
    messages.push_back(encode_message(std::move(m), received_ms));
    bytes += messages.back().bytes.size();
  }
  submit<append_result>(request.sync, bytes, std::move(done),
                        [this, topic = std::move(request.topic), create = request.auto_create_partitions,
                         messages = std::move(messages)](group_ctx& ctx) -> result<append_result> {
    TXMQ_TRY(auto t, writer_topic_or_create(ctx, topic, create));
    append_result out;
    out.positions.reserve(messages.size());
    for (auto& m : messages) {
      out.positions.push_back(append_one(ctx, *t, m));
      if (ctx.poisoned) return *ctx.poisoned;
    }
    return out;
  });
}

result<read_result> rocksdb_store::read(const read_request& req) const {
  auto t = find_topic(req.topic);
  if (!t) return errc::unknown_topic;
  if (req.partition >= t->partitions.size()) return errc::unknown_partition;
  auto& ps = *t->partitions[req.partition];
  read_result out;
  out.high_watermark = ps.committed_next.load(std::memory_order_acquire);
  out.start_offset = ps.start_offset.load(std::memory_order_acquire);
  std::uint64_t from = std::max(req.from_offset, out.start_offset);
  out.next_offset = from;
  if (from >= out.high_watermark || req.max_messages == 0) return out;

  const std::uint32_t tid = t->record.id();
  const std::string upper = log_key(tid, req.partition, out.high_watermark);
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handles_[cf_log]));
  const std::string prefix = log_prefix(tid, req.partition);
  it->SeekForPrev(log_key(tid, req.partition, from));
  if (!it->Valid() || !it->key().starts_with(prefix)) it->Seek(log_key(tid, req.partition, from));

  std::size_t bytes = 0;
  for (; it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const std::uint64_t base = get_u64(it->key().data() + 8);
    std::string_view value(it->value().data(), it->value().size());
    batch_header h;
    v1::MessageBatch batch;
    if (!decode(value, h) ||
        !batch.ParseFromArray(value.data() + batch_header_bytes, static_cast<int>(value.size() - batch_header_bytes)) ||
        batch.messages_size() != static_cast<int>(h.count)) {
      return errc::corruption;
    }
    for (int i = 0; i < batch.messages_size(); ++i) {
      const std::uint64_t offset = base + static_cast<std::uint64_t>(i);
      if (offset < from) continue;
      if (offset >= out.high_watermark) break;
      auto& m = *batch.mutable_messages(i);
      const std::size_t size = m.body().size() + m.key().size();
      if (!out.messages.empty() && (out.messages.size() >= req.max_messages || bytes + size > req.max_bytes)) {
        return out;
      }
      m.set_topic(req.topic);
      m.set_partition(req.partition);
      m.set_offset(offset);
      bytes += size;
      out.messages.push_back(std::move(m));
      out.next_offset = offset + 1;
    }
    if (out.messages.size() >= req.max_messages) break;
  }
  if (!it->status().ok()) return to_error(it->status());
  return out;
}

result<std::optional<id_location>> rocksdb_store::find_id(const message_id& id) const {
  std::string value;
  auto s = db_->Get(rocksdb::ReadOptions(), handles_[cf_dedupe], std::string(id.raw()), &value);
  if (s.IsNotFound()) return std::optional<id_location>{};
  if (!s.ok()) return to_error(s);
  dedupe_entry e;
  if (!decode(value, e)) return errc::corruption;
  if (e.stored_ms < now() - options_.dedupe_window.count()) return std::optional<id_location>{};
  auto t = find_topic(e.topic_id);
  if (!t) return errc::corruption;
  return std::optional<id_location>{id_location{t->record.name(), e.partition, e.offset}};
}

// ------------------------------------------------------------------------------------------
// Transactions

result<tx_record> rocksdb_store::to_tx_record(std::string_view value) const {
  records::TxRecord rec;
  if (!rec.ParseFromArray(value.data(), static_cast<int>(value.size()))) return errc::corruption;
  auto id = protocol::uuid::from_bytes(rec.txid());
  if (!id || rec.state() < 1 || rec.state() > 4) return errc::corruption;
  tx_record out;
  out.id = id.value();
  out.producer_group = rec.producer_group();
  out.state = static_cast<tx_state>(rec.state());
  out.messages.assign(rec.messages().begin(), rec.messages().end());
  for (auto& a : rec.acks()) out.acks.push_back({a.group(), a.topic(), a.partition(), a.offset()});
  out.prepared_ms = rec.prepared_ms();
  out.check_count = rec.check_count();
  out.next_check_ms = rec.next_check_ms();
  out.resolved_ms = rec.resolved_ms();
  if (rec.resolved_by() != 0) out.resolved_by = static_cast<resolver>(rec.resolved_by());
  return out;
}

void rocksdb_store::prepare(prepare_request request, completion<prepare_result> done) {
  const std::size_t bytes = request_bytes(request.messages);
  const bool sync = request.sync;
  submit<prepare_result>(sync, bytes, std::move(done), [this, req = std::move(request)](group_ctx& ctx) mutable -> result<prepare_result> {
    if (req.id.is_nil() || !valid_messages(req.messages) || !valid_name(req.producer_group, k_max_group_name)) {
      return errc::invalid_argument;
    }
    const std::string key(req.id.raw());
    if (auto existing = wget(ctx, cf_tx, key)) {
      records::TxRecord rec;
      if (!rec.ParseFromString(*existing)) return errc::corruption;
      if (static_cast<tx_state>(rec.state()) == tx_state::prepared) return prepare_result{true};
      return errc::tx_not_prepared;
    }
    if (ctx.poisoned) return *ctx.poisoned;
    // Everything that can refuse the request comes before the first write into the batch.
    for (auto& a : req.acks) {
      if (!valid_name(a.group, k_max_group_name) || !writer_topic(ctx, a.topic)) return errc::invalid_argument;
    }
    for (auto& m : req.messages) {
      if (!valid_name(m.topic(), k_max_topic_name)) return errc::invalid_argument;
      if (!writer_topic(ctx, m.topic()) && !req.auto_create_partitions) return errc::unknown_topic;
    }
    if (req.auto_create_partitions && (*req.auto_create_partitions == 0 || *req.auto_create_partitions > k_max_partitions)) {
      return errc::invalid_argument;
    }
    for (auto& m : req.messages) {
      TXMQ_TRY(auto t, writer_topic_or_create(ctx, m.topic(), req.auto_create_partitions));
      (void)t;
    }
    records::TxRecord rec;
    rec.set_txid(key);
    rec.set_producer_group(req.producer_group);
    rec.set_state(static_cast<std::uint32_t>(tx_state::prepared));
    for (auto& m : req.messages) *rec.add_messages() = std::move(m);
    for (auto& a : req.acks) {
      auto* r = rec.add_acks();
      r->set_group(a.group);
      r->set_topic(a.topic);
      r->set_partition(a.partition);
      r->set_offset(a.offset);
    }
    rec.set_prepared_ms(ctx.now_ms);
    rec.set_next_check_ms(req.first_check_ms);
    ctx.put(cf_tx, key, rec.SerializeAsString());
    if (req.first_check_ms != 0) ctx.put(cf_index_, tx_due_key(req.first_check_ms, key), "");
    return prepare_result{false};
  });
}

void rocksdb_store::resolve(resolve_request request, completion<resolve_result> done) {
  const bool sync = request.sync;
  submit<resolve_result>(sync, 128, std::move(done), [this, req = std::move(request)](group_ctx& ctx) -> result<resolve_result> {
    const std::string key(req.id.raw());
    auto existing = wget(ctx, cf_tx, key);
    if (ctx.poisoned) return *ctx.poisoned;
    if (!existing) return errc::unknown_tx;
    records::TxRecord rec;
    if (!rec.ParseFromString(*existing)) return errc::corruption;
    const auto state = static_cast<tx_state>(rec.state());
    const tx_state wanted = req.outcome == tx_outcome::commit ? tx_state::committed : tx_state::rolled_back;
    resolve_result out;
    if (state == tx_state::committed || state == tx_state::rolled_back) {
      out.status = state == wanted ? resolve_status::repeated : resolve_status::conflict;
      out.state = state;
      if (state == tx_state::committed) {
        for (auto& m : rec.messages()) out.positions.push_back({m.partition(), m.offset(), false});
      }
      return out;
    }
    // Validate before writing anything: every topic must still be there.
    std::vector<std::shared_ptr<topic_state>> topics;
    if (wanted == tx_state::committed) {
      for (auto& m : rec.messages()) {
        auto t = writer_topic(ctx, m.topic());
        if (!t) return errc::unknown_topic;
        topics.push_back(std::move(t));
      }
    }
    if (state == tx_state::prepared && rec.next_check_ms() != 0) {
      ctx.del(cf_index_, tx_due_key(rec.next_check_ms(), key));
    }
    if (wanted == tx_state::committed) {
      for (int i = 0; i < rec.messages_size(); ++i) {
        auto* m = rec.mutable_messages(i);
        v1::Message copy = *m;
        copy.set_txid(key);
        auto pos = append_one(ctx, *topics[static_cast<std::size_t>(i)], encode_message(std::move(copy), ctx.now_ms));
        out.positions.push_back(pos);
        m->set_partition(pos.partition);
        m->set_offset(pos.offset);
      }
      // Read-process-write: the consumed messages are done in the same atomic write.
      std::map<std::string, std::map<std::pair<std::uint32_t, std::uint32_t>, cursor_value>> cursors;
      for (auto& a : rec.acks()) {
        auto t = writer_topic(ctx, a.topic());
        if (!t || a.partition() >= t->record.partitions()) continue;
        apply_ack(ctx, a.group(), t->record.id(), a.partition(), a.offset(), std::nullopt, cursors[a.group()]);
      }
      for (auto& [group, cs] : cursors) {
        for (auto& [tp, c] : cs) ctx.put(cf_groups, cursor_key(group, tp.first, tp.second), encode(c));
      }
    }
    // Bodies live on in the log (commit) or are not wanted (rollback); keep the outcome small.
    for (auto& m : *rec.mutable_messages()) {
      m.clear_body();
      m.clear_headers();
    }
    rec.set_state(static_cast<std::uint32_t>(wanted));
    rec.set_next_check_ms(0);
    rec.set_resolved_ms(ctx.now_ms);
    rec.set_resolved_by(static_cast<std::uint32_t>(req.by));
    ctx.put(cf_tx, key, rec.SerializeAsString());
    if (ctx.poisoned) return *ctx.poisoned;
    out.status = resolve_status::applied;
    out.state = wanted;
    return out;
  });
}

void rocksdb_store::record_checks(std::vector<check_update> updates, completion<void> done) {
  const std::size_t bytes = 64 * updates.size();
  submit<void>(true, bytes, std::move(done), [this, updates = std::move(updates)](group_ctx& ctx) -> result<void> {
    for (auto& u : updates) {
      const std::string key(u.id.raw());
      auto existing = wget(ctx, cf_tx, key);
      if (ctx.poisoned) return *ctx.poisoned;
      if (!existing) continue;
      records::TxRecord rec;
      if (!rec.ParseFromString(*existing)) return errc::corruption;
      if (static_cast<tx_state>(rec.state()) != tx_state::prepared) continue;
      if (rec.next_check_ms() != 0) ctx.del(cf_index_, tx_due_key(rec.next_check_ms(), key));
      rec.set_check_count(u.check_count);
      if (u.abandon) {
        rec.set_state(static_cast<std::uint32_t>(tx_state::abandoned));
        rec.set_next_check_ms(0);
      } else {
        rec.set_next_check_ms(u.next_check_ms);
        ctx.put(cf_index_, tx_due_key(u.next_check_ms, key), "");
      }
      ctx.put(cf_tx, key, rec.SerializeAsString());
    }
    return outcome::success();
  });
}

result<std::optional<tx_record>> rocksdb_store::find_tx(const txid& id) const {
  std::string value;
  auto s = db_->Get(rocksdb::ReadOptions(), handles_[cf_tx], std::string(id.raw()), &value);
  if (s.IsNotFound()) return std::optional<tx_record>{};
  if (!s.ok()) return to_error(s);
  TXMQ_TRY(auto rec, to_tx_record(value));
  return std::optional<tx_record>{std::move(rec)};
}

template <class Fn>
result<void> rocksdb_store::scan(cf_index cf, const std::string& from, const std::string& upper, Fn&& fn) const {
  rocksdb::ReadOptions ro;
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
  if (!it->status().ok()) return to_error(it->status());
  return outcome::success();
}

result<std::vector<tx_record>> rocksdb_store::due_checks(std::int64_t until_ms, std::size_t limit,
                                                         std::int64_t from_ms) const {
  std::vector<tx_record> out;
  std::string lower(1, 't');
  put_u64(lower, time_key(from_ms));
  std::string upper(1, 't');
  put_u64(upper, time_key(until_ms) + 1);
  auto r = scan(cf_index_, lower, upper, [&](std::string_view k, std::string_view) -> result<bool> {
    if (k.size() != 1 + 8 + 16) return errc::corruption;
    auto id = protocol::uuid::from_bytes(k.substr(9));
    if (!id) return errc::corruption;
    auto rec = find_tx(id.value());
    if (!rec) return rec.error();
    if (rec.value() && rec.value()->state == tx_state::prepared) out.push_back(std::move(*rec.value()));
    return out.size() < limit;
  });
  if (!r) return r.error();
  return out;
}

result<std::vector<tx_record>> rocksdb_store::list_txs(std::optional<tx_state> state, std::size_t limit,
                                                      std::optional<txid> after) const {
  std::vector<tx_record> out;
  std::string from = after ? prefix_end(std::string(after->raw())) : std::string();
  // prefix_end of a 16-byte id is the next id, which is what "after" means.
  auto r = scan(cf_tx, from, "", [&](std::string_view, std::string_view v) -> result<bool> {
    TXMQ_TRY(auto rec, to_tx_record(v));
    if (!state || rec.state == *state) out.push_back(std::move(rec));
    return out.size() < limit;
  });
  if (!r) return r.error();
  return out;
}

// ------------------------------------------------------------------------------------------
// Consumer groups

cursor_value& rocksdb_store::cursor_for(group_ctx& ctx, std::string_view group, std::uint32_t tid, std::uint32_t p,
                                        std::map<std::pair<std::uint32_t, std::uint32_t>, cursor_value>& cursors) {
  auto [it, inserted] = cursors.try_emplace({tid, p});
  if (inserted) {
    if (auto v = wget(ctx, cf_groups, cursor_key(group, tid, p))) decode(*v, it->second);
  }
  return it->second;
}

void rocksdb_store::erase_delivery_due(group_ctx& ctx, std::string_view group, std::uint32_t tid, std::uint32_t p,
                                       std::uint64_t offset) {
  if (auto old = wget(ctx, cf_groups, message_key('d', group, tid, p, offset))) {
    delivery_value ov;
    if (decode(*old, ov) && (ov.status == 1 || ov.status == 2)) {
      ctx.del(cf_index_, delivery_due_key(ov.visible_at_ms, group, tid, p, offset));
    }
  }
}

void rocksdb_store::put_delivery(group_ctx& ctx, std::string_view group, std::uint32_t tid, std::uint32_t p,
                                 std::uint64_t offset, const delivery_value& v) {
  erase_delivery_due(ctx, group, tid, p, offset);
  const std::string value = encode(v);
  ctx.put(cf_groups, message_key('d', group, tid, p, offset), value);
  if (v.status == 1 || v.status == 2) {
    ctx.put(cf_index_, delivery_due_key(v.visible_at_ms, group, tid, p, offset), value);
  }
}

void rocksdb_store::apply_ack(group_ctx& ctx, std::string_view group, std::uint32_t tid, std::uint32_t p,
                              std::uint64_t offset, std::optional<dead_letter> dead,
                              std::map<std::pair<std::uint32_t, std::uint32_t>, cursor_value>& cursors) {
  auto& c = cursor_for(ctx, group, tid, p, cursors);
  const std::string dkey = message_key('d', group, tid, p, offset);
  auto existing = wget(ctx, cf_groups, dkey);
  if (!existing && offset < c.ack_floor && !dead) return;  // already done
  if (dead) {
    records::DeadLetterRecord rec;
    rec.set_topic(dead->topic);
    rec.set_partition(p);
    rec.set_offset(offset);
    rec.set_attempts(dead->attempts);
    rec.set_dead_at_ms(dead->dead_at_ms ? dead->dead_at_ms : ctx.now_ms);
    rec.set_reason(dead->reason);
    ctx.put(cf_groups, message_key('q', group, tid, p, offset), rec.SerializeAsString());
  }
  if (c.next_offset <= offset) c.next_offset = offset + 1;
  if (offset != c.ack_floor) {
    if (offset < c.ack_floor) {
      // A redriven message below the floor: done means gone.
      erase_delivery_due(ctx, group, tid, p, offset);
      ctx.del(cf_groups, dkey);
      return;
    }
    // Above the floor: remember it is done until the floor gets here.
    delivery_value v;
    if (existing) decode(*existing, v);
    v.status = dead ? 4 : 3;
    put_delivery(ctx, group, tid, p, offset, v);
    return;
  }
  // At the floor (the common case of in-order acks): no record to write, only the floor moves,
  // over this message and every done one after it.
  if (existing) {
    erase_delivery_due(ctx, group, tid, p, offset);
    ctx.del(cf_groups, dkey);
  }
  ++c.ack_floor;
  while (c.ack_floor < c.next_offset) {
    const std::string k = message_key('d', group, tid, p, c.ack_floor);
    auto rec = wget(ctx, cf_groups, k);
    delivery_value dv;
    if (!rec || !decode(*rec, dv) || (dv.status != 3 && dv.status != 4)) break;
    ctx.del(cf_groups, k);
    ++c.ack_floor;
  }
}

void rocksdb_store::ensure_group(group_info info, group_start start, completion<group_state> done) {
  auto inner = [this, done = std::move(done), name = info.name](result<group_state> r) {
    // The state is read back after the write so it is exactly what is stored.
    if (!r) return done(r.error());
    done(load_group(name));
  };
  submit<group_state>(true, 256, std::move(inner), [this, info = std::move(info), start](group_ctx& ctx) -> result<group_state> {
    if (!valid_name(info.name, k_max_group_name)) return errc::invalid_argument;
    std::vector<std::shared_ptr<topic_state>> topics;
    for (auto& name : info.topics) {
      auto t = writer_topic(ctx, name);
      if (!t) return errc::unknown_topic;
      topics.push_back(std::move(t));
    }
    records::GroupRecord rec;
    const std::string gkey = group_record_key(info.name);
    if (auto existing = wget(ctx, cf_default, gkey)) {
      if (!rec.ParseFromString(*existing)) return errc::corruption;
    } else {
      rec.set_name(info.name);
      rec.set_created_ms(ctx.now_ms);
    }
    if (ctx.poisoned) return *ctx.poisoned;
    bool changed = !rec.created_ms() || rec.topics_size() == 0;
    for (auto& t : topics) {
      if (std::find(rec.topics().begin(), rec.topics().end(), t->record.name()) != rec.topics().end()) continue;
      rec.add_topics(t->record.name());
      changed = true;
      for (std::uint32_t p = 0; p < t->record.partitions(); ++p) {
        auto& ps = *t->partitions[p];
        const std::uint64_t at = start == group_start::latest ? ps.next : ps.meta.start_offset;
        ctx.put(cf_groups, cursor_key(info.name, t->record.id(), p), encode(cursor_value{at, at}));
      }
    }
    if (changed || !wget(ctx, cf_default, gkey)) ctx.put(cf_default, gkey, rec.SerializeAsString());
    return group_state{};
  });
}

void rocksdb_store::update_group(group_update update, completion<group_update_result> done) {
  const std::size_t bytes = 64 + 48 * (update.deliveries.size() + update.acks.size() + update.dead.size() +
                                       update.redrive.size() + update.dispatched.size());
  const bool sync = update.sync;
  submit<group_update_result>(sync, bytes, std::move(done), [this, u = std::move(update)](group_ctx& ctx) -> result<group_update_result> {
    if (!valid_name(u.group, k_max_group_name)) return errc::invalid_argument;
    if (!wget(ctx, cf_default, group_record_key(u.group))) {
      return ctx.poisoned ? *ctx.poisoned : make_error_code(errc::unknown_group);
    }
    // Resolve every topic first so a bad request writes nothing.
    std::unordered_map<std::string, std::shared_ptr<topic_state>> topics;
    auto need = [&](const std::string& name, std::uint32_t p) -> bool {
      auto it = topics.find(name);
      if (it == topics.end()) {
        auto t = writer_topic(ctx, name);
        if (!t) return false;
        it = topics.emplace(name, std::move(t)).first;
      }
      return p < it->second->record.partitions();
    };
    for (auto& c : u.dispatched) if (!need(c.topic, c.partition)) return errc::unknown_partition;
    for (auto& d : u.deliveries) if (!need(d.topic, d.partition)) return errc::unknown_partition;
    for (auto& a : u.acks) if (!need(a.topic, a.partition)) return errc::unknown_partition;
    for (auto& d : u.dead) if (!need(d.topic, d.partition)) return errc::unknown_partition;
    for (auto& r : u.redrive) if (!need(r.topic, r.partition)) return errc::unknown_partition;
    for (auto& d : u.deliveries) {
      if (d.status == delivery_status::acked || d.status == delivery_status::dead) return errc::invalid_argument;
    }
    auto tid = [&](const std::string& name) { return topics[name]->record.id(); };

    std::map<std::pair<std::uint32_t, std::uint32_t>, cursor_value> cursors;
    for (auto& c : u.dispatched) {
      auto& cv = cursor_for(ctx, u.group, tid(c.topic), c.partition, cursors);
      cv.next_offset = std::max(cv.next_offset, c.next_offset);
    }
    for (auto& d : u.deliveries) {
      delivery_value v{d.attempt, d.visible_at_ms, static_cast<std::uint8_t>(d.status)};
      put_delivery(ctx, u.group, tid(d.topic), d.partition, d.offset, v);
    }
    for (auto& a : u.acks) apply_ack(ctx, u.group, tid(a.topic), a.partition, a.offset, std::nullopt, cursors);
    for (auto& d : u.dead) apply_ack(ctx, u.group, tid(d.topic), d.partition, d.offset, d, cursors);
    for (auto& r : u.redrive) {
      const std::uint32_t id = tid(r.topic);
      const std::string qkey = message_key('q', u.group, id, r.partition, r.offset);
      if (!wget(ctx, cf_groups, qkey)) continue;
      ctx.del(cf_groups, qkey);
      put_delivery(ctx, u.group, id, r.partition, r.offset, delivery_value{0, ctx.now_ms, 2});
    }
    if (ctx.poisoned) return *ctx.poisoned;
    std::unordered_map<std::uint32_t, std::string> names;
    for (auto& [name, t] : topics) names[t->record.id()] = name;
    group_update_result out;
    for (auto& [tp, c] : cursors) {
      ctx.put(cf_groups, cursor_key(u.group, tp.first, tp.second), encode(c));
      out.cursors.push_back({names[tp.first], tp.second, c.ack_floor, c.next_offset});
    }
    return out;
  });
}

result<group_state> rocksdb_store::load_group(std::string_view name) const {
  std::string value;
  auto s = db_->Get(rocksdb::ReadOptions(), handles_[cf_default], group_record_key(name), &value);
  if (s.IsNotFound()) return errc::unknown_group;
  if (!s.ok()) return to_error(s);
  records::GroupRecord rec;
  if (!rec.ParseFromString(value)) return errc::corruption;
  group_state out;
  out.info.name = rec.name();
  out.info.topics.assign(rec.topics().begin(), rec.topics().end());
  out.info.created_ms = rec.created_ms();

  auto topic_name = [&](std::uint32_t id) -> std::string {
    auto t = find_topic(id);
    return t ? t->record.name() : std::string();
  };
  const std::string cprefix = group_prefix('c', name);
  TXMQ_TRY(scan(cf_groups, cprefix, prefix_end(cprefix), [&](std::string_view k, std::string_view v) -> result<bool> {
    cursor_value c;
    if (k.size() != cprefix.size() + 8 || !decode(v, c)) return errc::corruption;
    out.cursors.push_back({topic_name(get_u32(k.data() + cprefix.size())), get_u32(k.data() + cprefix.size() + 4),
                           c.ack_floor, c.next_offset});
    return true;
  }));
  const std::string dprefix = group_prefix('d', name);
  TXMQ_TRY(scan(cf_groups, dprefix, prefix_end(dprefix), [&](std::string_view k, std::string_view v) -> result<bool> {
    delivery_value d;
    if (k.size() != dprefix.size() + 16 || !decode(v, d)) return errc::corruption;
    const char* p = k.data() + dprefix.size();
    out.deliveries.push_back({topic_name(get_u32(p)), get_u32(p + 4), get_u64(p + 8), d.attempt, d.visible_at_ms,
                              static_cast<delivery_status>(d.status)});
    return true;
  }));
  const std::string qprefix = group_prefix('q', name);
  TXMQ_TRY(scan(cf_groups, qprefix, prefix_end(qprefix), [&](std::string_view, std::string_view) -> result<bool> {
    ++out.dead_letters;
    return true;
  }));
  return out;
}

std::vector<group_info> rocksdb_store::groups() const {
  std::vector<group_info> out;
  auto r = scan(cf_default, "g/", prefix_end("g/"), [&](std::string_view, std::string_view v) -> result<bool> {
    records::GroupRecord rec;
    if (!rec.ParseFromArray(v.data(), static_cast<int>(v.size()))) return errc::corruption;
    out.push_back({rec.name(), {rec.topics().begin(), rec.topics().end()}, rec.created_ms()});
    return true;
  });
  (void)r;  // an unreadable record was already refused at open; a listing shows what it can
  return out;
}

result<std::vector<dead_letter>> rocksdb_store::dead_letters(std::string_view group, std::size_t limit) const {
  std::vector<dead_letter> out;
  const std::string qprefix = group_prefix('q', group);
  TXMQ_TRY(scan(cf_groups, qprefix, prefix_end(qprefix), [&](std::string_view, std::string_view v) -> result<bool> {
    records::DeadLetterRecord rec;
    if (!rec.ParseFromArray(v.data(), static_cast<int>(v.size()))) return errc::corruption;
    out.push_back({rec.topic(), rec.partition(), rec.offset(), rec.attempts(), rec.dead_at_ms(), rec.reason()});
    return out.size() < limit;
  }));
  return out;
}

result<std::vector<due_delivery>> rocksdb_store::due_deliveries(std::int64_t until_ms, std::size_t limit) const {
  std::vector<due_delivery> out;
  std::string upper(1, 'd');
  put_u64(upper, time_key(until_ms) + 1);
  TXMQ_TRY(scan(cf_index_, "d", upper, [&](std::string_view k, std::string_view v) -> result<bool> {
    delivery_value d;
    if (k.size() < 1 + 8 + 1 || !decode(v, d)) return errc::corruption;
    const std::size_t glen = static_cast<unsigned char>(k[9]);
    if (k.size() != 10 + glen + 16) return errc::corruption;
    const char* p = k.data() + 10 + glen;
    auto t = find_topic(get_u32(p));
    due_delivery dd;
    dd.group = std::string(k.substr(10, glen));
    dd.delivery = {t ? t->record.name() : std::string(), get_u32(p + 4), get_u64(p + 8), d.attempt, d.visible_at_ms,
                   static_cast<delivery_status>(d.status)};
    out.push_back(std::move(dd));
    return out.size() < limit;
  }));
  return out;
}

// ------------------------------------------------------------------------------------------
// Maintenance

void rocksdb_store::enforce_retention(completion<retention_result> done) {
  // Lost to a crash, a retention pass only means the next pass removes the same batches again.
  submit<retention_result>(false, 0, std::move(done), [this](group_ctx& ctx) -> result<retention_result> {
    retention_result out;
    for (auto& [_, t] : writer_topics_) {
      const auto& r = t->record;
      for (std::uint32_t p = 0; p < r.partitions(); ++p) {
        auto& ps = *t->partitions[p];
        auto& meta = ps.meta;
        // Only batches already in the database: this group's own appends come after them.
        const std::string upper = log_key(r.id(), p, meta.next_offset);
        rocksdb::Slice upper_slice(upper);
        rocksdb::ReadOptions ro;
        ro.iterate_upper_bound = &upper_slice;
        std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handles_[cf_log]));
        std::uint64_t cut = meta.start_offset;
        std::uint64_t bytes = meta.bytes;
        std::size_t judged = 0;
        for (it->Seek(log_key(r.id(), p, meta.start_offset)); it->Valid() && judged < k_retention_batches_per_pass;
             it->Next(), ++judged) {
          batch_header h;
          if (!decode(std::string_view(it->value().data(), it->value().size()), h)) return errc::corruption;
          const bool too_old = r.retention_ms() > 0 && h.max_publish_ms < ctx.now_ms - r.retention_ms();
          const bool too_big = r.retention_bytes() > 0 && bytes > r.retention_bytes();
          if (!too_old && !too_big) break;
          cut = get_u64(it->key().data() + 8) + h.count;
          bytes -= std::min<std::uint64_t>(bytes, it->value().size());
          out.messages_removed += h.count;
          out.bytes_removed += it->value().size();
        }
        if (!it->status().ok()) return to_error(it->status());
        if (cut == meta.start_offset) continue;
        ctx.batch.DeleteRange(handles_[cf_log], log_key(r.id(), p, meta.start_offset), log_key(r.id(), p, cut));
        meta.start_offset = cut;
        meta.bytes = bytes;
        ctx.put(cf_default, partition_meta_key(r.id(), p), encode(meta));
        if (std::find(ctx.touched.begin(), ctx.touched.end(), &ps) == ctx.touched.end()) ctx.touched.push_back(&ps);
      }
    }
    return out;
  });
}

result<void> rocksdb_store::compact() {
  rocksdb::CompactRangeOptions o;
  o.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  for (auto* h : handles_) {
    auto s = db_->CompactRange(o, h, nullptr, nullptr);
    if (!s.ok()) return to_error(s);
  }
  return outcome::success();
}

result<std::uint64_t> rocksdb_store::count_dedupe_entries() const {
  std::uint64_t n = 0;
  TXMQ_TRY(scan(cf_dedupe, "", "", [&](std::string_view, std::string_view) -> result<bool> {
    ++n;
    return true;
  }));
  return n;
}

store_stats rocksdb_store::stats() const {
  std::lock_guard lk(stats_mu_);
  return stats_;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Webhook subscriptions and attempt log

void rocksdb_store::put_webhook(v1::Webhook record, completion<void> done) {
  submit<void>(true, record.ByteSizeLong(), std::move(done), [rec = std::move(record)](group_ctx& ctx) -> result<void> {
    if (rec.id().empty() || rec.id().size() > k_max_group_name) return errc::invalid_argument;
    ctx.put(cf_default, webhook_key(rec.id()), rec.SerializeAsString());
    return outcome::success();
  });
}

void rocksdb_store::delete_webhook(std::string id, completion<bool> done) {
  submit<bool>(true, 64, std::move(done), [this, id = std::move(id)](group_ctx& ctx) -> result<bool> {
    const std::string key = webhook_key(id);
    const bool existed = wget(ctx, cf_default, key).has_value();
    if (ctx.poisoned) return *ctx.poisoned;
    if (existed) ctx.del(cf_default, key);
    return existed;
  });
}

result<std::vector<v1::Webhook>> rocksdb_store::webhooks() const {
  std::vector<v1::Webhook> out;
  TXMQ_TRY(scan(cf_default, "w/", prefix_end("w/"), [&](std::string_view, std::string_view v) -> result<bool> {
    v1::Webhook rec;
    if (!rec.ParseFromArray(v.data(), static_cast<int>(v.size()))) return errc::corruption;
    out.push_back(std::move(rec));
    return true;
  }));
  return out;
}

void rocksdb_store::record_webhook_attempts(std::vector<v1::WebhookAttempt> attempts, completion<void> done) {
  std::size_t bytes = 0;
  for (auto& a : attempts) bytes += a.ByteSizeLong() * 2;
  submit<void>(false, bytes, std::move(done), [attempts = std::move(attempts)](group_ctx& ctx) -> result<void> {
    for (auto& a : attempts) {
      if (a.webhook_id().empty() || a.webhook_id().size() > k_max_group_name) return errc::invalid_argument;
      const std::string value = a.SerializeAsString();
      // Two keys: by time (the log and its expiry) and by message (one message's attempts).
      ctx.batch.Put(ctx.handles[cf_groups], webhook_attempt_key(a), value);
      ctx.batch.Put(ctx.handles[cf_groups], webhook_message_attempt_key(a), value);
    }
    return outcome::success();
  });
}

result<std::vector<v1::WebhookAttempt>> rocksdb_store::webhook_attempts(const webhook_attempts_query& q) const {
  std::vector<v1::WebhookAttempt> out;
  std::string from = group_prefix(q.message ? 'm' : 'a', q.webhook_id);
  if (q.message) from.append(q.message->raw());
  TXMQ_TRY(scan(cf_groups, from, prefix_end(from), [&](std::string_view, std::string_view v) -> result<bool> {
    v1::WebhookAttempt a;
    if (!a.ParseFromArray(v.data(), static_cast<int>(v.size()))) return errc::corruption;
    out.push_back(std::move(a));
    return out.size() < q.limit;
  }));
  return out;
}

void rocksdb_store::expire_webhook_attempts(std::int64_t before_ms, std::size_t limit, completion<std::uint64_t> done) {
  submit<std::uint64_t>(false, 64, std::move(done), [this, before_ms, limit](group_ctx& ctx) -> result<std::uint64_t> {
    // Keys run per subscription, then by time: delete each one's prefix older than before_ms,
    // then seek to the next subscription.
    std::uint64_t removed = 0;
    const std::string upper = prefix_end("a");
    rocksdb::ReadOptions ro;
    rocksdb::Slice upper_slice(upper);
    ro.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handles_[cf_groups]));
    it->Seek("a");
    while (it->Valid() && removed < limit) {
      v1::WebhookAttempt a;
      if (!a.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) return errc::corruption;
      if (a.time_ms() >= before_ms) {
        it->Seek(prefix_end(group_prefix('a', a.webhook_id())));
        continue;
      }
      ctx.batch.Delete(handles_[cf_groups], it->key());
      ctx.batch.Delete(handles_[cf_groups], webhook_message_attempt_key(a));
      ++removed;
      it->Next();
    }
    if (!it->status().ok()) return to_error(it->status());
    return removed;
  });
}

result<std::unique_ptr<store>> open_store(store_options options) {
  if (!options.clock) options.clock = system_now_ms;
  std::unique_ptr<rocksdb::Env> env;
  fs::path path = options.dir;
  bool fresh = false;
  if (options.in_memory) {
    env.reset(rocksdb::NewMemEnv(rocksdb::Env::Default()));
    path = "/txmq-in-memory";
    fresh = true;
  } else {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      fs::create_directories(path, ec);
      if (ec) {
        return error(errc::io_error, "cannot create the data directory " + path.string() + ": " + ec.message());
      }
      fresh = true;
    } else if (!fs::is_directory(path, ec)) {
      return error(errc::not_a_store, path.string() + " is not a directory");
    } else if (fs::is_empty(path, ec)) {
      fresh = true;
    } else if (!fs::exists(path / "CURRENT", ec)) {
      // Creating a new store here would hide whatever was lost behind an empty one.
      return error(errc::not_a_store,
                   "the data directory " + path.string() +
                       " is not empty but has no RocksDB CURRENT file: either it is not a txmq store or the store's "
                       "files are missing. Refusing to start with an empty store; restore the files or point "
                       "--data-dir elsewhere");
    }
  }
  auto cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  std::vector<std::unique_ptr<rocksdb::CompactionFilter>> filters;
  filters.push_back(std::make_unique<expiry_filter>(expiry_filter::kind::dedupe, options.clock,
                                                    options.dedupe_window.count()));
  filters.push_back(std::make_unique<expiry_filter>(expiry_filter::kind::tx, options.clock,
                                                    options.dedupe_window.count()));
  auto s = std::make_unique<rocksdb_store>(options, std::move(env), std::move(cache), std::move(filters));
  TXMQ_TRY(s->open(path, fresh));
  return std::unique_ptr<store>(std::move(s));
}

}  // namespace txmq::storage
