// The store's format version (keys.h: "v" in the default column family): a store written by
// the format-v1 fixture's binary opens, reads, and is raised to the current format (its index of
// unresolved transactions built at format 2; format 3 needs nothing more); a newer version,
// and one that is not a number, are refused with a message naming the versions, and the directory is left as it was.

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/utilities/options_util.h>

#include "txmq/storage/errc.h"
#include "txmq/storage/store.h"

namespace fs = std::filesystem;
using namespace txmq;

namespace {

class format_version_test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("txmq-format-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::copy(fs::path(TXMQ_FORMAT_V1_FIXTURE) / "data", dir_, fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The stored version, read (and with `replace`, rewritten) with RocksDB directly.
  std::string version(const std::string* replace = nullptr) {
    rocksdb::DBOptions o;
    std::vector<std::string> names;
    EXPECT_TRUE(rocksdb::DB::ListColumnFamilies(o, dir_.string(), &names).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (auto& n : names) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    auto s = rocksdb::DB::Open(o, dir_.string(), cfs, &handles, &raw);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return "(cannot open)";
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string v;
    if (replace) {
      EXPECT_TRUE(db->Put(rocksdb::WriteOptions(), handles[0], "v", *replace).ok());
    }
    EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), handles[0], "v", &v).ok());
    for (auto* h : handles) EXPECT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
    return v;
  }

  result<std::unique_ptr<storage::store>> open() {
    storage::store_options o;
    o.dir = dir_;
    o.min_free_bytes = 0;
    return storage::open_store(o);
  }

  fs::path dir_;
};

TEST_F(format_version_test, the_v1_fixture_opens_and_is_raised_to_v3_with_its_tx_index) {
  EXPECT_EQ(version(), "1");
  auto s = open();
  ASSERT_TRUE(s) << s.error().message;
  auto t = s.value()->topic("orders");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->partitions.size(), 2u);
  EXPECT_EQ(s.value()->groups().size(), 3u);  // billing, audit and the webhook's group
  auto hooks = s.value()->webhooks();
  ASSERT_TRUE(hooks);
  EXPECT_EQ(hooks.value().size(), 1u);
  // Format 2's index of unresolved transactions, built at this first open: the fixture's one
  // PREPARED transaction is counted and listed from it.
  auto counts = s.value()->count_unresolved_txs();
  ASSERT_TRUE(counts) << counts.error().message;
  EXPECT_EQ(counts.value().prepared, 1u);
  EXPECT_EQ(counts.value().abandoned, 0u);
  auto prepared = s.value()->list_txs(storage::tx_state::prepared, 10);
  ASSERT_TRUE(prepared);
  ASSERT_EQ(prepared.value().size(), 1u);
  EXPECT_EQ(prepared.value()[0].producer_group, "shop");
  s.value()->close();
  s.value().reset();  // releases the database's lock
  EXPECT_EQ(version(), "3");
  // The next open finds format 3 and builds nothing again.
  s = open();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s.value()->count_unresolved_txs().value().prepared, 1u);
  s.value()->close();
}

TEST_F(format_version_test, a_newer_version_is_refused_naming_both) {
  const std::string four = "4";
  version(&four);
  auto s = open();
  ASSERT_FALSE(s) << "a store of format version 4 opened";
  EXPECT_EQ(s.error(), storage::errc::unsupported_format);
  const std::string& why = s.error().message;
  EXPECT_NE(why.find(dir_.string()), std::string::npos) << why;
  EXPECT_NE(why.find("has format version 4, written by a newer txmq"), std::string::npos) << why;
  EXPECT_NE(why.find("this txmq reads format versions 1 to 3"), std::string::npos) << why;
  EXPECT_EQ(version(), "4") << "refusing must leave the store as it was";
}

TEST_F(format_version_test, a_version_that_is_no_number_is_refused) {
  for (const std::string bad : {"", "1x", "-1", "0", "99999999999999999999"}) {
    version(&bad);
    auto s = open();
    ASSERT_FALSE(s) << "format version '" << bad << "' opened";
    EXPECT_EQ(s.error(), storage::errc::corruption) << bad;
    EXPECT_NE(s.error().message.find("unreadable format version '" + bad + "'"), std::string::npos)
        << s.error().message;
  }
}

}  // namespace

namespace {

// RocksDB's periodic compaction per column family, from the OPTIONS file the store persisted.
std::map<std::string, std::uint64_t> periodic_compaction(const fs::path& dir) {
  rocksdb::ConfigOptions config;
  config.ignore_unknown_options = true;
  rocksdb::DBOptions db;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  auto s = rocksdb::LoadLatestOptions(config, dir.string(), &db, &cfs);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::map<std::string, std::uint64_t> out;
  for (auto& cf : cfs) out[cf.name] = cf.options.periodic_compaction_seconds;
  return out;
}

}  // namespace

// Expired dedupe entries and transaction outcomes leave only through a compaction filter. With
// time-ordered keys (UUIDv7 ids and txids) files move down without a rewrite, so the families
// ask RocksDB to rewrite any file older than the window (at least an hour) instead of its
// default 30 days (issue #15, seventh round). Options only: the v1 fixture opens with them.
TEST_F(format_version_test, expiring_families_are_rewritten_through_their_filter_once_a_window) {
  for (auto [window, expected] : {std::pair{std::chrono::milliseconds(std::chrono::hours(2)), 7200ull},
                                  std::pair{std::chrono::milliseconds(std::chrono::minutes(1)), 3600ull}}) {
    storage::store_options o;
    o.dir = dir_;
    o.min_free_bytes = 0;
    o.dedupe_window = window;
    {
      auto s = storage::open_store(o);
      ASSERT_TRUE(s) << s.error().message;
      s.value()->close();
    }
    auto periodic = periodic_compaction(dir_);
    EXPECT_EQ(periodic["tx"], expected);
    EXPECT_EQ(periodic["dedupe"], expected);
    // The log keeps RocksDB's default (retention removes its batches by range deletes).
    EXPECT_EQ(periodic["log"], 0u);
  }
}
