// Store unit tests: a failed write or fsync of the write-ahead log stops the store taking
// writes, and both the failing call and every later refused one say what failed and why;
// health() says the same. A write that found the disk full is the one failure the store
// resumes from by itself once there is room; below min_free_bytes appends and prepares are
// refused while other writes run. The failures come from a file system that fails the WAL on
// demand (as RocksDB's FaultInjectionTestFS), under the store opened through its test hook,
// and the free space from a fake disk the test sets.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

#include "eventually.h"
#include "open_store_on_env.h"
#include "store_test_fixture.h"

namespace txmq::storage::test {
namespace {

constexpr const char* k_injected = "injected by wal_fault_fs";

// The default file system, except that the write-ahead log (*.log) fails its appends or its
// syncs while the test asks for it.
class wal_fault_fs final : public rocksdb::FileSystemWrapper {
 public:
  wal_fault_fs() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}

  static const char* kClassName() { return "txmq_wal_fault_fs"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* file,
                                    rocksdb::IODebugContext* dbg) override {
    return wrap(name, target()->NewWritableFile(name, options, file, dbg), file);
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* file,
                                       rocksdb::IODebugContext* dbg) override {
    return wrap(name, target()->ReopenWritableFile(name, options, file, dbg), file);
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string& name, const std::string& old_name,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* file,
                                      rocksdb::IODebugContext* dbg) override {
    return wrap(name, target()->ReuseWritableFile(name, old_name, options, file, dbg), file);
  }

  std::atomic<bool> fail_append{false};
  std::atomic<bool> fail_sync{false};
  // Appends to the WAL fail as on a full disk (ENOSPC: RocksDB's NoSpace).
  std::atomic<bool> no_space{false};

 private:
  class wal_file final : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    wal_file(std::unique_ptr<rocksdb::FSWritableFile> file, const wal_fault_fs& fs)
        : FSWritableFileOwnerWrapper(std::move(file)), fs_(fs) {}

    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
      if (auto s = injected(); !s.ok()) return s;
      return target()->Append(data, options, dbg);
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             const rocksdb::DataVerificationInfo& info, rocksdb::IODebugContext* dbg) override {
      if (auto s = injected(); !s.ok()) return s;
      return target()->Append(data, options, info, dbg);
    }
    rocksdb::IOStatus Sync(const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg) override {
      if (fs_.fail_sync) return rocksdb::IOStatus::IOError("sync of the WAL", k_injected);
      return target()->Sync(options, dbg);
    }
    rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg) override {
      if (fs_.fail_sync) return rocksdb::IOStatus::IOError("fsync of the WAL", k_injected);
      return target()->Fsync(options, dbg);
    }

   private:
    rocksdb::IOStatus injected() const {
      if (fs_.fail_append) return rocksdb::IOStatus::IOError("append to the WAL", k_injected);
      if (fs_.no_space) return rocksdb::IOStatus::NoSpace("append to the WAL", k_injected);
      return rocksdb::IOStatus::OK();
    }
    const wal_fault_fs& fs_;
  };

  rocksdb::IOStatus wrap(const std::string& name, rocksdb::IOStatus s,
                         std::unique_ptr<rocksdb::FSWritableFile>* file) const {
    if (s.ok() && name.ends_with(".log")) *file = std::make_unique<wal_file>(std::move(*file), *this);
    return s;
  }
};

// The store fixture, reopened on the fault-injecting file system.
class store_write_failure_test : public store_test {
 protected:
  void SetUp() override {
    store_test::SetUp();
    store_->close();
    store_.reset();
    fs_ = std::make_shared<wal_fault_fs>();
    open_on_fault_fs();
    create_topic("orders");
  }

  store_options fault_options() {
    store_options o = options();
    o.min_free_bytes = k_min_free;
    o.disk_check_interval = std::chrono::milliseconds(2);
    o.free_bytes = [this] {
      disk_checks_ += 1;
      return std::optional<std::uint64_t>(free_.load());
    };
    return o;
  }

  void open_on_fault_fs() {
    auto r = detail::open_store_on_env(fault_options(), rocksdb::NewCompositeEnv(fs_));
    ASSERT_THAT(r, is_ok());
    store_ = std::move(r).value();
  }

  void reopen_on_fault_fs() {
    store_->close();
    store_.reset();
    open_on_fault_fs();
  }

  // Waits until the store measured the disk at least twice more (so a decision of its writer
  // after the test's last change has been taken).
  bool disk_checked() {
    const int seen = disk_checks_.load();
    return txmq::test::eventually([&] { return disk_checks_.load() >= seen + 2; });
  }

  static constexpr std::uint64_t k_min_free = 1u << 20;
  std::atomic<std::uint64_t> free_{1ull << 40};
  std::atomic<int> disk_checks_{0};

  result<append_result> try_append_one() {
    append_request req;
    req.topic = "orders";
    req.messages = {make_message("body")};
    return try_append(std::move(req));
  }

  std::shared_ptr<wal_fault_fs> fs_;
};

MATCHER_P2(fails_saying, code, text, "fails with " + make_error_code(code).message() + " saying '" + text + "'") {
  if (arg) {
    *result_listener << "succeeds";
    return false;
  }
  *result_listener << "fails with " << arg.error();
  return arg.error() == make_error_code(code) && arg.error().message.find(text) != std::string::npos;
}

TEST_F(store_write_failure_test, a_failed_fsync_is_reported_with_its_cause_by_the_call_and_every_later_one) {
  ASSERT_THAT(try_append_one(), is_ok());
  fs_->fail_sync = true;

  auto failed = try_append_one();
  EXPECT_THAT(failed, fails_saying(errc::io_error, "fsync of the write-ahead log failed: IO error: "));
  EXPECT_THAT(failed, fails_saying(errc::io_error, k_injected));

  // The file system works again, but the store does not pretend the lost fsync never happened.
  fs_->fail_sync = false;
  const std::string cause = "the store stopped taking writes after: fsync of the write-ahead log failed: IO error: ";
  auto later = try_append_one();
  EXPECT_THAT(later, fails_saying(errc::store_failed, cause));
  EXPECT_THAT(later, fails_saying(errc::store_failed, k_injected));
  EXPECT_THAT(later, fails_saying(errc::store_failed, "restart after fixing the cause"));
  EXPECT_THAT(try_create_topic({"other", 1}), fails_saying(errc::store_failed, cause));
}

// Transaction records are read at the last durable write (issue #13): a commit written to
// RocksDB whose fsync then failed was refused to its caller, and must not be listed or shown as
// COMMITTED either (before, find_tx and list_txs read the memtable, which held it).
TEST_F(store_write_failure_test, a_commit_whose_fsync_failed_is_not_shown_as_committed) {
  const txid id = protocol::uuid::make_v7();
  prepare(id, {make_message("debit", "acct-1", "orders")}, now() + 60'000);
  fs_->fail_sync = true;
  EXPECT_THAT(try_resolve(id, tx_outcome::commit), fails_saying(errc::io_error, "fsync of the write-ahead log failed"));
  fs_->fail_sync = false;

  auto rec = find_tx(id);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->state, tx_state::prepared) << "a commit refused at its fsync reads as committed";
  EXPECT_EQ(list_tx_ids(tx_state::committed), std::vector<txid>{});
  EXPECT_EQ(list_tx_ids(tx_state::prepared), std::vector<txid>{id});
}

TEST_F(store_write_failure_test, a_failed_write_is_reported_with_its_cause_by_the_call_and_every_later_one) {
  fs_->fail_append = true;

  auto failed = try_append_one();
  EXPECT_THAT(failed, fails_saying(errc::io_error, "writing a commit group to RocksDB failed: IO error: "));
  EXPECT_THAT(failed, fails_saying(errc::io_error, k_injected));

  fs_->fail_append = false;
  const std::string cause = "the store stopped taking writes after: writing a commit group to RocksDB failed: ";
  auto later = try_append_one();
  EXPECT_THAT(later, fails_saying(errc::store_failed, cause));
  EXPECT_THAT(later, fails_saying(errc::store_failed, k_injected));
  // A request that needs no fsync (a consumer's ack, say) is refused the same way.
  auto unsynced = call_sync<void>([&](auto done) { store_->record_webhook_attempts({}, done); });
  EXPECT_THAT(unsynced, fails_saying(errc::store_failed, cause));
}

TEST_F(store_write_failure_test, health_names_the_first_failure_and_an_io_error_stays_latched) {
  EXPECT_EQ(store_->health().status, store_health::state::ok);
  EXPECT_EQ(store_->health().reason, "");
  fs_->fail_append = true;
  ASSERT_THAT(try_append_one(), fails_saying(errc::io_error, k_injected));

  auto h = store_->health();
  EXPECT_EQ(h.status, store_health::state::failed);
  EXPECT_FALSE(h.resumes);
  EXPECT_NE(h.reason.find("writing a commit group to RocksDB failed: IO error: "), std::string::npos) << h.reason;
  EXPECT_NE(h.reason.find(k_injected), std::string::npos) << h.reason;
  EXPECT_NE(h.reason.find("restart after fixing the cause"), std::string::npos) << h.reason;

  // The file system works and the disk has room, yet an I/O error is never resumed from.
  fs_->fail_append = false;
  ASSERT_TRUE(disk_checked());
  EXPECT_EQ(store_->health().status, store_health::state::failed);
  EXPECT_THAT(try_append_one(), fails_saying(errc::store_failed, k_injected));
}

TEST_F(store_write_failure_test, a_failed_fsync_is_never_resumed_from) {
  fs_->fail_sync = true;
  ASSERT_THAT(try_append_one(), fails_saying(errc::io_error, "fsync of the write-ahead log failed"));
  fs_->fail_sync = false;
  ASSERT_TRUE(disk_checked());
  auto h = store_->health();
  EXPECT_EQ(h.status, store_health::state::failed);
  EXPECT_FALSE(h.resumes);
  EXPECT_THAT(try_append_one(), fails_saying(errc::store_failed, "restart after fixing the cause"));
}

TEST_F(store_write_failure_test, a_write_that_found_the_disk_full_resumes_by_itself_once_there_is_room) {
  auto first = append("orders", {make_message("before")});
  const std::uint64_t before_offset = first.positions[0].offset;

  // The disk is full: appends would be refused before reaching it, but creating a topic is not
  // (as a commit or an ack is not), and that write fails.
  free_ = 0;
  fs_->no_space = true;
  auto failed = try_create_topic({"other", 1});
  EXPECT_THAT(failed, fails_saying(errc::io_error, "writing a commit group to RocksDB failed: IO error: No space"));
  EXPECT_THAT(failed, fails_saying(errc::io_error, "it takes writes again by itself once the disk has free space"));
  auto h = store_->health();
  EXPECT_EQ(h.status, store_health::state::failed);
  EXPECT_TRUE(h.resumes);
  EXPECT_NE(h.reason.find(k_injected), std::string::npos) << h.reason;
  // A latched store answers its failure, not the full disk (the refused append still took an
  // offset in the writer's memory).
  EXPECT_THAT(try_append_one(), fails_saying(errc::store_failed, "No space"));
  // Still no room: it stays latched.
  ASSERT_TRUE(disk_checked());
  EXPECT_EQ(store_->health().status, store_health::state::failed);

  // Space is back: no restart, the next write is taken and gets the offset after the last
  // acknowledged one (the failed write handed out offsets in memory only).
  fs_->no_space = false;
  free_ = 1ull << 40;
  ASSERT_TRUE(txmq::test::eventually([&] { return store_->health().status == store_health::state::ok; }))
      << store_->health().reason;
  auto after = append("orders", {make_message("after")});
  EXPECT_EQ(after.positions[0].offset, before_offset + 1);
  EXPECT_FALSE(store_->topic("other")) << "created by the failed write only";
  EXPECT_THAT(try_create_topic({"other", 1}), is_ok());

  // Both acknowledged messages survive a reopen, nothing else is there.
  reopen_on_fault_fs();
  auto all = read_all("orders", 0);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].body(), "before");
  EXPECT_EQ(all[1].body(), "after");
}

TEST_F(store_write_failure_test, below_min_free_bytes_appends_and_prepares_are_refused_while_resolutions_run) {
  const txid tx = protocol::uuid::make_v4();
  prepare(tx, {make_message("in tx", std::nullopt, "orders")}, 0);

  free_ = k_min_free - 1;
  ASSERT_TRUE(txmq::test::eventually([&] { return store_->health().status == store_health::state::full; }));
  auto h = store_->health();
  EXPECT_NE(h.reason.find(std::to_string(k_min_free - 1) + " bytes free, below the minimum of " +
                          std::to_string(k_min_free)),
            std::string::npos)
      << h.reason;

  EXPECT_THAT(try_append_one(), fails_saying(errc::store_full, "new messages are refused until space is freed"));
  prepare_request req;
  req.id = protocol::uuid::make_v4();
  req.producer_group = "producers";
  req.messages = {make_message("other tx", std::nullopt, "orders")};
  EXPECT_THAT(try_prepare(req), fails_saying(errc::store_full, "bytes free"));
  // Committing what was prepared, and retention, still run: they are how space comes back.
  EXPECT_THAT(try_resolve(tx, tx_outcome::commit), is_ok());
  EXPECT_THAT(call_sync<retention_result>([&](auto done) { store_->enforce_retention(done); }), is_ok());
  ASSERT_EQ(read_all("orders", 0).size(), 1u);

  free_ = k_min_free;
  ASSERT_TRUE(txmq::test::eventually([&] { return store_->health().status == store_health::state::ok; }));
  EXPECT_THAT(try_append_one(), is_ok());
}

}  // namespace
}  // namespace txmq::storage::test
