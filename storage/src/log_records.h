#pragma once

// What both readers of a partition's log share (rocksdb_store::read for consumers,
// rocksdb_store::read_raw for followers): the window a read may return, and an iterator over
// the stored records (one per batch, keyed by its base offset) from the one holding the
// window's first offset.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include <rocksdb/db.h>

#include "keys.h"
#include "rocksdb_store.h"

namespace txmq::storage::detail {

struct log_window {
  std::uint64_t high_watermark = 0;  // the fsynced end
  std::uint64_t written_end = 0;     // the written end (>= high_watermark)
  std::uint64_t start_offset = 0;
  std::uint64_t from = 0;  // [from, end): what the read may return
  std::uint64_t end = 0;
  [[nodiscard]] bool empty() const noexcept { return from >= end; }
};

// The window a read of `req` may return from topic `t` (null: unknown): the fsynced end, or
// (replication's leader, read_request::unsynced) what is written.
inline result<log_window> read_window(const topic_state* t, const read_request& req) {
  if (!t) return errc::unknown_topic;
  if (req.partition >= t->partitions.size()) return errc::unknown_partition;
  const partition_state& ps = *t->partitions[req.partition];
  log_window w;
  w.high_watermark = ps.committed_next.load(std::memory_order_acquire);
  w.written_end = std::max(w.high_watermark, ps.written_next.load(std::memory_order_acquire));
  w.start_offset = ps.start_offset.load(std::memory_order_acquire);
  w.end = req.unsynced ? w.written_end : w.high_watermark;
  w.from = std::max(req.from_offset, w.start_offset);
  return w;
}

// A read's answer (read_result, raw_read) starts with the window's ends; nothing read yet.
template <class Out>
void start_answer(Out& out, const log_window& w) {
  out.high_watermark = w.high_watermark;
  out.written_end = w.written_end;
  out.start_offset = w.start_offset;
  out.next_offset = w.from;
}

// The partition's stored records below `end`, from the last one starting at or before `from`
// (a batch may begin before the first offset wanted). Not copyable: the bound's slice points
// into this object.
class log_records {
 public:
  log_records(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* cf, std::uint32_t tid, std::uint32_t partition,
              std::uint64_t from, std::uint64_t end)
      : upper_(log_key(tid, partition, end)), upper_slice_(upper_), prefix_(log_prefix(tid, partition)) {
    rocksdb::ReadOptions ro;
    ro.iterate_upper_bound = &upper_slice_;
    // The log's data blocks stay out of the block cache: a consumer or follower reads each block
    // once (more groups read it from the page cache), and filling the cache made every block read
    // an allocation, an LRU insert and an eviction, pushed out the blocks of the families every
    // ack and publish looks up (groups, dedupe), and grew a fresh broker by the whole cache.
    // Consume from a backlog, A/B: 1.60x-1.77x the rate at 0.49-0.60x the broker's CPU per
    // message (issue #15, docs/BENCHMARKS.md "Ninth round: the log's blocks stay out of the
    // block cache"). Index and filter blocks are loaded into the cache when a table opens.
    ro.fill_cache = false;
    it_.reset(db.NewIterator(ro, cf));
    it_->SeekForPrev(log_key(tid, partition, from));
    if (!it_->Valid() || !it_->key().starts_with(prefix_)) it_->Seek(log_key(tid, partition, from));
  }
  log_records(const log_records&) = delete;
  log_records& operator=(const log_records&) = delete;

  [[nodiscard]] bool valid() const { return it_->Valid() && it_->key().starts_with(prefix_); }
  [[nodiscard]] rocksdb::Iterator& it() { return *it_; }

 private:
  std::string upper_;
  rocksdb::Slice upper_slice_;
  std::string prefix_;
  std::unique_ptr<rocksdb::Iterator> it_;
};

}  // namespace txmq::storage::detail
