// The store's opening: the RocksDB options, refusal of what is not a txmq store or is damaged,
// the in-memory state rebuilt from the database, and open_store().

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <rocksdb/compaction_filter.h>
#include <rocksdb/convenience.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/sst_partitioner.h>
#include <rocksdb/table.h>
#include <rocksdb/write_buffer_manager.h>

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <set>

#include "background_priority.h"
#include "info_log.h"
#include "open_store_on_env.h"
#include "rocksdb_store.h"
#include "tx_expiry.h"

namespace txmq::storage {
namespace detail {

// The layout of keys and values (keys.h, records.proto) this build writes, and the oldest one it
// reads. A change that an older build would misread raises k_format_version; reading an older
// layout means converting it here at open.
//   2: the index of unresolved transactions (keys.h, CF index): 'a' entries for ABANDONED ones,
//      and a due entry for every PREPARED one, also those with no check scheduled. A format-1
//      store gets it built at its first open (build_tx_index). An older build must not run on
//      a format-2 store: it would resolve abandoned transactions and leave their entries.
//   3: young Prepares (rocksdb_store.h, young_): a PREPARED transaction may have no due entry
//      for its first second, and "ty" bounds where such records sort; the open after a crash
//      writes their entries. Nothing to convert from 2. An older build must not run on a
//      format-3 store: after a crash it would never check those transactions.
constexpr int k_format_version = 3;
constexpr int k_oldest_readable_format = 1;
const char* const k_cf_names[cf_count] = {"default", "log", "dedupe", "tx", "index", "groups"};

std::int64_t system_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The two fields it needs are read with protobuf's wire-format reader, every other field
// skipped. A parse of the whole record built its messages (a Prepare's bodies), checked their
// strings' UTF-8 and freed them again, for every record a compaction rewrote. Unlike that parse,
// this does not look inside the skipped fields: a record whose other fields are damaged (its
// strings not UTF-8, say) can expire, where the parse kept it for ever.
bool resolved_before(std::string_view bytes, std::int64_t cutoff_ms) {
  namespace wire = google::protobuf::internal;
  const int size = static_cast<int>(bytes.size());
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const std::uint8_t*>(bytes.data()), size);
  constexpr auto varint = wire::WireFormatLite::WIRETYPE_VARINT;
  constexpr std::uint32_t state_tag = wire::WireFormatLite::MakeTag(records::TxRecord::kStateFieldNumber, varint);
  constexpr std::uint32_t resolved_tag =
      wire::WireFormatLite::MakeTag(records::TxRecord::kResolvedMsFieldNumber, varint);
  std::uint32_t state = 0;
  std::uint64_t resolved_ms = 0;
  // A field given twice counts with its last value, as in a parse.
  while (in.CurrentPosition() < size) {
    const std::uint32_t tag = in.ReadTag();
    if (tag == 0) return false;
    if (tag == state_tag) {
      if (!in.ReadVarint32(&state)) return false;
    } else if (tag == resolved_tag) {
      if (!in.ReadVarint64(&resolved_ms)) return false;
    } else if (!wire::WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  const auto st = static_cast<tx_state>(state);
  return (st == tx_state::committed || st == tx_state::rolled_back) && static_cast<std::int64_t>(resolved_ms) < cutoff_ms;
}

// Drops dedupe entries older than the window and resolved transaction outcomes older than it,
// during compaction, so expiry never costs a foreground write.
class expiry_filter final : public rocksdb::CompactionFilter {
 public:
  enum class kind { dedupe, tx };
  expiry_filter(kind k, std::int64_t cutoff_ms) : kind_(k), cutoff_ms_(cutoff_ms) {}

  bool Filter(int, const rocksdb::Slice&, const rocksdb::Slice& value, std::string*, bool*) const override {
    const std::string_view v(value.data(), value.size());
    if (kind_ == kind::tx) return resolved_before(v, cutoff_ms_);
    dedupe_entry e;
    return decode(v, e) && e.stored_ms < cutoff_ms_;
  }
  const char* Name() const override { return name(kind_); }
  // The filter's and its factory's name (RocksDB's LOG and options file show it).
  static const char* name(kind k) { return k == kind::dedupe ? "txmq.dedupe_expiry" : "txmq.tx_expiry"; }

 private:
  kind kind_;
  std::int64_t cutoff_ms_;
};

// One filter per compaction, its cutoff read from the clock when the compaction starts. A
// single filter for the store read the clock for every key (clock_gettime was a tenth of the
// compaction thread under transactions, issue #15, docs/BENCHMARKS.md "Fifteenth round"); an
// entry that expires during a compaction goes at the next one instead.
class expiry_filter_factory final : public rocksdb::CompactionFilterFactory {
 public:
  expiry_filter_factory(expiry_filter::kind k, std::function<std::int64_t()> clock, std::int64_t window_ms)
      : kind_(k), clock_(std::move(clock)), window_ms_(window_ms) {}

  std::unique_ptr<rocksdb::CompactionFilter> CreateCompactionFilter(const rocksdb::CompactionFilter::Context&) override {
    return std::make_unique<expiry_filter>(kind_, clock_() - window_ms_);
  }
  const char* Name() const override { return expiry_filter::name(kind_); }

 private:
  expiry_filter::kind kind_;
  std::function<std::int64_t()> clock_;
  std::int64_t window_ms_;
};

// Where a memtable insert starts its skip-list walk: RocksDB keeps one insert position per
// prefix this returns (memtable_insert_with_hint_prefix_extractor), beside the one it keeps
// for the whole memtable. A COMMIT writes the due index's delete and the record's outcome among
// the entries its Prepare wrote ~13 ms earlier, while the Prepares of the same group write at
// the newest end: with one position, every group walked from the one end to the other and back
// (RecomputeSpliceLevels: two thirds of the memtable deletes' time, docs/BENCHMARKS.md
// "Fourteenth round: transactions"). The prefix is the millisecond a key is ordered by: the
// due time of a 't' or 'd' index entry, the UUIDv7 time of a txid. Keys without one (a txid of
// another version: random, one position per key) take RocksDB's default path.
// Never a DeleteRange in a family that has it: until facebook/rocksdb#12558 (2024; Debian
// ships 7.8), RocksDB shares the positions between point keys and range tombstones, whose skip
// lists differ, and loses keys (facebook/rocksdb#5118). Neither family takes one today.
class insert_position_prefix final : public rocksdb::SliceTransform {
 public:
  explicit insert_position_prefix(bool txids) : txids_(txids) {}
  const char* Name() const override { return txids_ ? "txmq.txid_ms" : "txmq.index_ms"; }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return rocksdb::Slice(key.data(), txids_ ? k_uuid_ms_bytes : k_index_prefix_bytes);
  }
  bool InDomain(const rocksdb::Slice& key) const override {
    if (txids_) {
      // UUIDv7: version nibble 7 in byte 6, the first 6 bytes a big-endian Unix time in ms.
      return key.size() == k_txid_bytes && (static_cast<unsigned char>(key[6]) >> 4) == 7;
    }
    return key.size() >= k_index_prefix_bytes && (key[0] == 't' || key[0] == 'd');
  }

 private:
  static constexpr std::size_t k_uuid_ms_bytes = 6;
  static constexpr std::size_t k_index_prefix_bytes = 1 + 8;  // kind, time:8
  bool txids_;
};

// A stored format version this build can read, or the error naming both versions.
namespace {
result<int> check_format_version(const fs::path& path, std::string_view stored) {
  int version = 0;
  const auto [end, ec] = std::from_chars(stored.data(), stored.data() + stored.size(), version);
  if (ec != std::errc() || end != stored.data() + stored.size() || version < 1) {
    return error(errc::corruption, "the txmq store at " + path.string() + " has an unreadable format version '" +
                                       std::string(stored) + "' (refusing to start; restore it from a backup)");
  }
  const std::string reads = "this txmq reads format versions " + std::to_string(k_oldest_readable_format) + " to " +
                            std::to_string(k_format_version);
  if (version > k_format_version) {
    return error(errc::unsupported_format,
                 "the txmq store at " + path.string() + " has format version " + std::to_string(version) +
                     ", written by a newer txmq; " + reads +
                     ". Run the newer txmq on it (going back to an older one needs a backup made before the upgrade)");
  }
  if (version < k_oldest_readable_format) {
    return error(errc::unsupported_format, "the txmq store at " + path.string() + " has format version " +
                                               std::to_string(version) + ", older than " + reads +
                                               ". Open it with a txmq release that reads both first");
  }
  return version;
}
}  // namespace

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
  // RocksDB deletes a WAL only once every family with data in it has flushed, and its own limit
  // on the WALs kept is four times every family's buffers together (720 MB with the defaults).
  // A 60 s transaction run left 45 WAL files (512 MB) that a restart after SIGKILL replayed for
  // 14.9 s. Past twice the memtable budget, the families holding the oldest WAL flush instead,
  // which bounds recovery time and disk.
  db_options.max_total_wal_size = 2 * options_.memtable_budget_bytes;
  db_options.bytes_per_sync = 1 << 20;
  db_options.keep_log_file_num = 5;
  if (env_) {
    db_options.env = env_.get();
  } else if (auto log = info_log::open(path)) {
    // Not RocksDB's own LOG writer: it aborts on the line after a failed one (info_log.h).
    db_options.info_log = std::move(log);
  }
  if (!env_ && options_.low_priority_background && background_priority::can_raise_back()) {
    background_ = std::make_shared<background_priority>(::getpriority(PRIO_PROCESS, 0));
    db_options.listeners.push_back(background_);
  }

  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache_;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.cache_index_and_filter_blocks = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  // The tx family's filter and index blocks stay in the cache for every level, not only L0:
  // every Prepare looks its new txid up, which probes one filter per level. With room in the
  // cache alone (below) a tx profile on a store of 500,000 transactions still spent 9.5 % of
  // the broker's samples reading them back (a cache shard's share of the memtables' entries
  // fills it); unpinned and without that room, 57 % (issue #15, docs/BENCHMARKS.md "Sixth
  // round"). Pinned blocks are charged to the cache: about 1.25 bytes per stored transaction
  // for the filter, plus the index.
  rocksdb::BlockBasedTableOptions tx_table = table;
  tx_table.metadata_cache_options.unpartitioned_pinning = rocksdb::PinningTier::kAll;

  const auto supported = rocksdb::GetSupportedCompressions();
  log_lz4_ = std::find(supported.begin(), supported.end(), rocksdb::kLZ4Compression) != supported.end();
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (std::size_t i = 0; i < cf_count; ++i) {
    rocksdb::ColumnFamilyOptions cf;
    // The log and the transaction families (records and their due index) take a whole write
    // buffer, the others a quarter (the budget above bounds them together). With a quarter
    // size, the tx family (a Prepare writes its record with the bodies, the commit overwrites
    // it moments later) filled five times a second at 33,000 tx/s, each flush starting a new
    // WAL, and its L0->L1 compactions rewrote L1 each time: 82 MB compacted for 29 MB flushed
    // in an 8 s run, 18 MB at full size (issue #15, docs/BENCHMARKS.md "Fifth round"). The
    // dedupe family stays small: a whole buffer for it cost publish CPU in an A/B.
    const bool whole = i == cf_log || i == cf_tx || i == cf_index_;
    cf.write_buffer_size = whole ? options_.write_buffer_bytes : std::max<std::size_t>(options_.write_buffer_bytes / 4, 2 << 20);
    cf.max_write_buffer_number = 3;
    cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(i == cf_tx ? tx_table : table));
    cf.compression = rocksdb::kNoCompression;
    if (i == cf_log) {
      // A log key is (topic id, partition, offset): every flushed file spans all partitions of
      // the topics written, so an L0->L1 compaction overlaps, and rewrote, every L1 file of the
      // partitions in between (65, 130, 195 MB written by the 1st, 2nd, 3rd compaction of one
      // publish run: issue #15, docs/BENCHMARKS.md). Cut compaction output per (topic,
      // partition) and keep L1 small: a partition's L1 file then has no overlap below it (its
      // older offsets sort before it), so it moves down to L2 by a trivial move (metadata
      // only), and the next L0->L1 compaction finds an almost empty L1. Options only: stores
      // written before keep their files and are read as before.
      cf.sst_partitioner_factory = rocksdb::NewSstPartitionerFixedPrefixFactory(log_prefix(0, 0).size());
      cf.max_bytes_for_level_base = options_.write_buffer_bytes;
      // Uncompressed at open; the writer switches LZ4 on while the messages stored compress
      // well, and off again when they stop (sample_log_record(), log_compression.h).
    }
    if (i == cf_dedupe || i == cf_tx) {
      // Expired entries leave through the compaction filter, so only when their file is
      // compacted. Time-ordered keys (UUIDv7 message ids, and txids since the libraries make
      // them UUIDv7: issue #15, docs/BENCHMARKS.md "Seventh round") let files move down the
      // levels without a rewrite, and a file at the last level may wait for RocksDB's default
      // periodic compaction (30 days) before the filter sees it: a file older than the window is
      // rewritten through the filter instead, so an entry is gone at most about two windows
      // after it expired. At least an hour, so a short window (tests) never rewrites constantly.
      const auto window_s = std::chrono::duration_cast<std::chrono::seconds>(options_.dedupe_window).count();
      cf.periodic_compaction_seconds = static_cast<std::uint64_t>(std::max<std::int64_t>(window_s, 3600));
    }
    if (i == cf_groups) {
      // An ack looks up the delivery record of its message and of the next offset (does the
      // ack floor move on?); a first delivery writes no record, so nearly every lookup misses:
      // a memtable bloom filter answers those without walking the skip list, as for dedupe.
      cf.memtable_prefix_bloom_size_ratio = 0.05;
      cf.memtable_whole_key_filtering = true;
    }
    if (i == cf_dedupe) {
      cf.compaction_filter_factory = filters_[0];
      // Nearly every lookup is for a new id: a memtable bloom filter answers those misses
      // without walking the skip list.
      cf.memtable_prefix_bloom_size_ratio = 0.05;
      cf.memtable_whole_key_filtering = true;
      // Not memtable_insert_with_hint_prefix_extractor: with it, ids from concurrent producers
      // (not strictly increasing) were answered as duplicates of other ids in the crash test.
    }
    if (i == cf_tx) {
      cf.compaction_filter_factory = filters_[1];
      // A Prepare whose txid is not above every stored one (any txid a client did not make
      // UUIDv7, or one from a producer whose clock lags) is looked up to tell a retry from a
      // new transaction; nearly all are new, and the skip-list walk for those misses was the
      // top frame of the transaction profile when txids were random (docs/BENCHMARKS.md, issue
      // #15). The bloom filter answers them instead.
      cf.memtable_prefix_bloom_size_ratio = 0.05;
      cf.memtable_whole_key_filtering = true;
      // Small files below L0. Records are keyed by UUIDv7 txids (time-ordered), so an
      // L0->L1 compaction overlaps only the newest L1 file: the one whose range the outcomes
      // of transactions prepared before the flush fall into. At the default 64 MiB that file
      // was rewritten by every L0->L1 compaction (720 MB compacted for 217 MB flushed in a
      // 33 s transaction run, a quarter of a core); at 4 MiB, 314 MB for 285 MB (issue #15,
      // docs/BENCHMARKS.md "Twelfth round"). Options only: existing files are read as before.
      cf.target_file_size_base = 4u << 20;
      cf.memtable_insert_with_hint_prefix_extractor = std::make_shared<insert_position_prefix>(true);
    }
    if (i == cf_index_) {
      cf.memtable_insert_with_hint_prefix_extractor = std::make_shared<insert_position_prefix>(false);
    }
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

  // Format version: a new store gets it; an existing one must have one this build reads, unless
  // it is an empty database left by a crash during its own creation. Checked here, in the one
  // open every entry point goes through (open_store, the tests' open_store_on_env).
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
    s = db_->Put(wo, handles_[cf_default], "v", std::to_string(k_format_version));
    if (!s.ok()) return fail(to_error(s), "cannot initialise the txmq store at " + path.string() + ": " + s.ToString());
  } else if (!s.ok()) {
    return fail(to_error(s), "cannot read the txmq store at " + path.string() + ": " + s.ToString());
  } else {
    TXMQ_TRY(auto stored, check_format_version(path, version));
    if (stored < 2) {
      TXMQ_TRY(build_tx_index());  // raises the version to this build's
    } else if (stored < k_format_version) {
      // 2 → 3: nothing stored changes meaning; an older build is kept off from now on.
      rocksdb::WriteOptions wo;
      wo.sync = true;
      s = db_->Put(wo, handles_[cf_default], "v", std::to_string(k_format_version));
      if (!s.ok()) {
        return fail(to_error(s), "cannot raise the txmq store at " + path.string() + " to format version " +
                                     std::to_string(k_format_version) + ": " + s.ToString());
      }
    }
  }
  // Young Prepares of the last run whose due entries were not written before it ended.
  if (auto r = index_young_after_open(); !r) return fail(r.error().code, r.error().message);

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
      t->retention_ms.store(t->record.retention_ms(), std::memory_order_relaxed);
      t->retention_bytes.store(t->record.retention_bytes(), std::memory_order_relaxed);
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
        ps->written_next = ps->meta.next_offset;
        // The group change sequence's end (cluster mode; absent otherwise: 0).
        if (std::string gv; db_->Get(rocksdb::ReadOptions(), handles_[cf_groups], group_seq_key(t->record.id(), p), &gv).ok() &&
                            gv.size() == 8) {
          ps->committed_group_next = get_u64(gv.data());
        }
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

  {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), handles_[cf_tx]));
    it->SeekToLast();
    if (it->Valid()) {
      max_tx_key_ = it->key().ToString();
    } else if (!it->status().ok()) {
      return fail(to_error(it->status()), "reading " + path.string() + ": " + it->status().ToString());
    }
  }

  // Everything in the database at open is durable (recovered from the WAL and the tables):
  // readers read it without a snapshot (tx_snapshot_ stays null until a group writes a
  // transaction record).
  // Named, so that top, perf and gdb tell the pipeline's threads apart (docs/BENCHMARKS.md profiles).
  syncer_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "txmq-syncer");
    // Nice -10 for this thread alone, where the process may raise a priority (root, or
    // CAP_SYS_NICE / RLIMIT_NICE; otherwise the call fails and nothing changes). Each fsync's
    // completion wakes the syncer while the writer, the io thread and RocksDB's flushes hold the
    // cores, and a whole group's answers wait for it to run. On 2 vCPUs, 6 alternating rounds
    // each: publish 100 per request +5 % (6 of 6 rounds), 1 per request +6 % (5 of 6); the
    // writer at -10 instead cost 9 %: it takes the core the others need (issue #15,
    // docs/BENCHMARKS.md "Fifteenth round: the syncer's priority").
    (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), -10);
    syncer_loop();
  });
  writer_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "txmq-writer");
    writer_loop();
  });
  return outcome::success();
}

// Format 1 → 2: every record read once; the index entries it should have are written, any
// other 't' or 'a' entry deleted (a due entry left behind by a format-1 path, such as a check
// recorded with no next time), and the version raised, in one synced batch: a crash before it
// leaves format 1, built again at the next open.
result<void> rocksdb_store::build_tx_index() {
  std::set<std::string> want;
  TXMQ_TRY(scan(cf_tx, "", "", [&](std::string_view k, std::string_view v) -> result<bool> {
    records::TxRecord rec;
    if (!rec.ParseFromArray(v.data(), static_cast<int>(v.size())) || k.size() != k_txid_bytes) {
      return error(errc::corruption, "the txmq store at " + path_.string() + " holds an unreadable transaction record");
    }
    rec.set_txid(std::string(k));
    if (auto entry = tx_index_entry(rec)) want.insert(std::move(*entry));
    return true;
  }));
  rocksdb::WriteBatch batch;
  for (const char* range : {"ab", "tu"}) {
    TXMQ_TRY(scan(cf_index_, std::string(1, range[0]), std::string(1, range[1]),
                  [&](std::string_view k, std::string_view) -> result<bool> {
                    if (!want.erase(std::string(k))) batch.Delete(handles_[cf_index_], rocksdb::Slice(k.data(), k.size()));
                    return true;
                  }));
  }
  for (auto& k : want) batch.Put(handles_[cf_index_], k, "");
  batch.Put(handles_[cf_default], "v", std::to_string(k_format_version));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  auto s = db_->Write(wo, &batch);
  if (!s.ok()) {
    return error(to_error(s), "cannot upgrade the txmq store at " + path_.string() + " to format version " +
                                  std::to_string(k_format_version) + ": " + s.ToString());
  }
  return outcome::success();
}

result<std::unique_ptr<store>> open_store_on_env(store_options options, std::unique_ptr<rocksdb::Env> env) {
  if (!options.clock) options.clock = system_now_ms;
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
  // The memtables are charged to this cache (write_buffer_manager above) as entries that cannot
  // be evicted, so it holds room for them on top of block_cache_bytes. Sized at
  // block_cache_bytes alone, the memtables of a busy store filled it: every block read was
  // dropped as soon as it was used, and each Prepare read the transaction family's filter
  // blocks from their files again (pread and checksum) to look its new txid up, 7.5 % of the
  // broker's CPU on the writer thread under transactions (issue #15, docs/BENCHMARKS.md
  // "Sixth round"). Memory stays bounded: memtables up to their budget, blocks up to
  // block_cache_bytes.
  auto cache = rocksdb::NewLRUCache(options.block_cache_bytes + options.memtable_budget_bytes);
  std::vector<std::shared_ptr<rocksdb::CompactionFilterFactory>> filters;
  filters.push_back(std::make_shared<expiry_filter_factory>(expiry_filter::kind::dedupe, options.clock,
                                                            options.dedupe_window.count()));
  filters.push_back(std::make_shared<expiry_filter_factory>(expiry_filter::kind::tx, options.clock,
                                                            options.dedupe_window.count()));
  auto s = std::make_unique<rocksdb_store>(options, std::move(env), std::move(cache), std::move(filters));
  TXMQ_TRY(s->open(path, fresh));
  return std::unique_ptr<store>(std::move(s));
}

}  // namespace detail

result<std::unique_ptr<store>> open_store(store_options options) {
  return detail::open_store_on_env(std::move(options), nullptr);
}

}  // namespace txmq::storage
