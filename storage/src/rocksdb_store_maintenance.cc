// Maintenance: retention passes, compaction, counts and statistics.

#include "background_priority.h"
#include "rocksdb_store.h"

namespace txmq::storage::detail {

// Retention judges at most this many batches per partition per pass so one pass never holds the
// writer for long; the next pass continues.
constexpr std::size_t k_retention_batches_per_pass = 4096;

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
        if (!it->status().ok()) return status_error(it->status(), "scanning for expired messages");
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
    if (!s.ok()) return status_error(s, "compacting the store");
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

std::uint64_t rocksdb_store::snapshots_held() const {
  std::uint64_t n = 0;
  return db_->GetIntProperty(rocksdb::DB::Properties::kNumSnapshots, &n) ? n : 0;
}

std::uint64_t rocksdb_store::index_writes_in_memtable() const {
  std::uint64_t n = 0;
  return db_->GetIntProperty(handles_[cf_index_], rocksdb::DB::Properties::kNumEntriesActiveMemTable, &n) ? n : 0;
}

std::uint64_t rocksdb_store::log_table_bytes() const {
  std::uint64_t n = 0;
  return db_->GetIntProperty(handles_[cf_log], rocksdb::DB::Properties::kLiveSstFilesSize, &n) ? n : 0;
}

store_stats rocksdb_store::stats() const {
  store_stats out;
  {
    std::lock_guard lk(stats_mu_);
    out = stats_;
  }
  if (background_) {
    out.background_lowered = background_->lowered();
    out.background_raised = background_->raised_count();
  }
  return out;
}

}  // namespace txmq::storage::detail
