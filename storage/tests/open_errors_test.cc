// A store that is damaged or missing files must refuse to open with an error that names the
// path; it must never open as a new, empty store.

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "txmq/storage/store.h"

namespace fs = std::filesystem;
using namespace txmq;

namespace {

class open_errors_test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("txmq-open-" + std::to_string(::getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A store with `n` messages, flushed to table files and closed.
  void make_store(int n) {
    storage::store_options o;
    o.dir = dir_;
    auto s = storage::open_store(o);
    ASSERT_TRUE(s);
    for (int i = 0; i < n; ++i) {
      storage::append_request req;
      req.topic = "t";
      req.auto_create_partitions = 1;
      v1::Message m;
      m.set_id(std::string(protocol::uuid::make_v7().raw()));
      m.set_body(std::string(200, static_cast<char>('a' + i % 26)));
      req.messages.push_back(m);
      auto r = storage::call_sync<storage::append_result>([&](auto done) { s.value()->append(req, done); });
      ASSERT_TRUE(r);
    }
    ASSERT_TRUE(s.value()->compact());  // flushes the memtables into table files
    s.value()->close();
  }

  std::vector<fs::path> files_ending(const std::string& suffix) {
    std::vector<fs::path> out;
    for (auto& e : fs::directory_iterator(dir_)) {
      if (e.path().string().ends_with(suffix)) out.push_back(e.path());
    }
    return out;
  }

  // Opens and expects failure with `code`, the message naming the directory.
  void expect_refused(std::error_code code) {
    storage::store_options o;
    o.dir = dir_;
    auto s = storage::open_store(o);
    const std::string why = s ? std::string() : s.error().message;
    ASSERT_FALSE(s) << "a damaged store opened";
    EXPECT_EQ(s.error(), code) << s.error();
    EXPECT_NE(why.find(dir_.string()), std::string::npos) << "error does not name the path: " << why;
  }

  fs::path dir_;
};

TEST_F(open_errors_test, missing_directory_is_created_as_a_new_store) {
  storage::store_options o;
  o.dir = dir_ / "nested" / "data";
  auto s = storage::open_store(o);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s.value()->topics().empty());
}

TEST_F(open_errors_test, foreign_files_are_not_a_store) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "notes.txt") << "not a database";
  expect_refused(storage::errc::not_a_store);
  EXPECT_TRUE(fs::exists(dir_ / "notes.txt")) << "refusing must leave the directory untouched";
}

TEST_F(open_errors_test, a_file_instead_of_a_directory_is_refused) {
  std::ofstream(dir_.string()) << "x";
  storage::store_options o;
  o.dir = dir_;
  auto s = storage::open_store(o);
  const std::string why = s ? std::string() : s.error().message;
  ASSERT_FALSE(s);
  EXPECT_NE(why.find(dir_.string()), std::string::npos) << why;
  fs::remove(dir_);
}

TEST_F(open_errors_test, missing_current_file_is_refused_not_recreated) {
  make_store(50);
  fs::remove(dir_ / "CURRENT");
  expect_refused(storage::errc::not_a_store);
  EXPECT_FALSE(fs::exists(dir_ / "CURRENT")) << "the refused open must not create a new database";
}

TEST_F(open_errors_test, missing_table_file_is_refused) {
  make_store(50);
  auto ssts = files_ending(".sst");
  ASSERT_FALSE(ssts.empty());
  fs::remove(ssts.front());
  storage::store_options o;
  o.dir = dir_;
  auto s = storage::open_store(o);
  const std::string why = s ? std::string() : s.error().message;
  ASSERT_FALSE(s);
  EXPECT_NE(why.find(dir_.string()), std::string::npos) << why;
}

TEST_F(open_errors_test, truncated_table_file_is_refused) {
  make_store(50);
  auto ssts = files_ending(".sst");
  ASSERT_FALSE(ssts.empty());
  for (auto& f : ssts) fs::resize_file(f, fs::file_size(f) / 2);
  expect_refused(storage::errc::corruption);
}

TEST_F(open_errors_test, flipped_bytes_in_a_table_file_are_found_at_open) {
  make_store(400);
  auto ssts = files_ending(".sst");
  ASSERT_FALSE(ssts.empty());
  // The biggest table file holds the message log; damage a data block in its first half.
  auto target = *std::max_element(ssts.begin(), ssts.end(),
                                  [](auto& a, auto& b) { return fs::file_size(a) < fs::file_size(b); });
  {
    std::fstream f(target, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(target) / 4));
    f.write("\xde\xad\xbe\xef\xde\xad\xbe\xef", 8);
  }
  expect_refused(storage::errc::corruption);
}

// Without the pass at open (the broker's verify_store_on_start = false) the same damage is
// found by the first read that reaches the block: an error, never a message made of it.
TEST_F(open_errors_test, flipped_bytes_without_the_open_pass_fail_the_read_that_reaches_them) {
  make_store(400);
  auto ssts = files_ending(".sst");
  ASSERT_FALSE(ssts.empty());
  auto target = *std::max_element(ssts.begin(), ssts.end(),
                                  [](auto& a, auto& b) { return fs::file_size(a) < fs::file_size(b); });
  {
    std::fstream f(target, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(target) / 4));
    f.write("\xde\xad\xbe\xef\xde\xad\xbe\xef", 8);
  }
  storage::store_options o;
  o.dir = dir_;
  o.verify_checksums_on_open = false;
  auto s = storage::open_store(o);
  ASSERT_TRUE(s) << s.error().message;
  bool failed = false;
  std::uint64_t from = 0;
  for (int pass = 0; pass < 1000 && !failed; ++pass) {
    storage::read_request req;
    req.topic = "t";
    req.from_offset = from;
    auto r = s.value()->read(req);
    if (!r) {
      failed = true;
      EXPECT_EQ(r.error(), storage::errc::corruption) << r.error().message;
      break;
    }
    if (r.value().messages.empty()) break;
    from = r.value().next_offset;
  }
  EXPECT_TRUE(failed) << "all 400 messages were read back from a damaged table file";
  s.value()->close();
}

TEST_F(open_errors_test, missing_manifest_is_refused) {
  make_store(10);
  for (auto& e : fs::directory_iterator(dir_)) {
    if (e.path().filename().string().starts_with("MANIFEST-")) fs::remove(e.path());
  }
  storage::store_options o;
  o.dir = dir_;
  auto s = storage::open_store(o);
  const std::string why = s ? std::string() : s.error().message;
  ASSERT_FALSE(s);
  EXPECT_NE(why.find(dir_.string()), std::string::npos) << why;
}

TEST_F(open_errors_test, corruption_in_the_middle_of_the_write_ahead_log_is_refused) {
  // Messages that only reached the WAL (no flush), then a damaged record followed by good ones:
  // dropping everything after the damage would lose acknowledged messages silently.
  {
    storage::store_options o;
    o.dir = dir_;
    auto s = storage::open_store(o);
    ASSERT_TRUE(s);
    for (int i = 0; i < 200; ++i) {
      storage::append_request req;
      req.topic = "t";
      req.auto_create_partitions = 1;
      v1::Message m;
      m.set_id(std::string(protocol::uuid::make_v7().raw()));
      m.set_body(std::string(300, 'x'));
      req.messages.push_back(m);
      ASSERT_TRUE(storage::call_sync<storage::append_result>([&](auto done) { s.value()->append(req, done); }));
    }
    s.value()->close();
  }
  auto logs = files_ending(".log");
  ASSERT_FALSE(logs.empty());
  auto wal = *std::max_element(logs.begin(), logs.end(),
                               [](auto& a, auto& b) { return fs::file_size(a) < fs::file_size(b); });
  ASSERT_GT(fs::file_size(wal), 20000u);
  {
    std::fstream f(wal, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(wal) / 3));
    f.write("\xde\xad\xbe\xef\xde\xad\xbe\xef", 8);
  }
  expect_refused(storage::errc::corruption);
}

TEST_F(open_errors_test, intact_store_reopens_with_its_messages) {
  make_store(30);
  storage::store_options o;
  o.dir = dir_;
  auto s = storage::open_store(o);
  ASSERT_TRUE(s);
  auto info = s.value()->topic("t");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->partitions[0].next_offset, 30u);
}

}  // namespace
