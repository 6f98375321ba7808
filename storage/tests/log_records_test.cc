// The log's reads bypass RocksDB's block cache (storage/src/log_records.h): a consumer reads
// each block once, and filling the cache cost a copy and an eviction per block and pushed out
// the blocks acks and publishes look up (issue #15, docs/BENCHMARKS.md "Ninth round: the log's
// blocks stay out of the block cache").
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/table.h>

#include "keys.h"
#include "log_records.h"

namespace {

namespace fs = std::filesystem;
using txmq::storage::detail::log_key;
using txmq::storage::detail::log_records;

TEST(log_records, reading_a_partitions_records_from_table_files_leaves_the_block_cache_as_it_was) {
  const fs::path dir = fs::temp_directory_path() / ("txmq-log-records-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto cache = rocksdb::NewLRUCache(64u << 20);
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  table.cache_index_and_filter_blocks = true;
  rocksdb::Options options;
  options.create_if_missing = true;
  options.compression = rocksdb::kNoCompression;
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, dir.string(), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);

  // 2,000 records of 1 KiB in table files (about 500 data blocks), none left in the memtable.
  constexpr std::uint64_t n = 2000;
  const std::string value(1024, 'x');
  for (std::uint64_t offset = 0; offset < n; ++offset) {
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), log_key(7, 0, offset), value).ok());
  }
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());

  const std::size_t before = cache->GetUsage();
  std::uint64_t seen = 0;
  std::size_t bytes = 0;
  for (log_records records(*db, db->DefaultColumnFamily(), 7, 0, 0, n); records.valid(); records.it().Next()) {
    ++seen;
    bytes += records.it().value().size();
  }
  EXPECT_EQ(seen, n);
  EXPECT_EQ(bytes, n * value.size());
  // Not one data block kept (a block is 4 KiB; with the cache filled this grew by ~2 MiB).
  EXPECT_LT(cache->GetUsage(), before + 4096) << "before " << before << " after " << cache->GetUsage();

  db.reset();
  fs::remove_all(dir);
}

}  // namespace
