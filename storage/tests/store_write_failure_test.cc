// Store unit tests: a failed write or fsync of the write-ahead log stops the store taking
// writes, and both the failing call and every later refused one say what failed and why.
// The failures come from a file system that fails the WAL on demand (as RocksDB's
// FaultInjectionTestFS), under the store opened through its test hook.

#include <atomic>
#include <memory>
#include <string>

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

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

 private:
  class wal_file final : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    wal_file(std::unique_ptr<rocksdb::FSWritableFile> file, const wal_fault_fs& fs)
        : FSWritableFileOwnerWrapper(std::move(file)), fs_(fs) {}

    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
      if (fs_.fail_append) return rocksdb::IOStatus::IOError("append to the WAL", k_injected);
      return target()->Append(data, options, dbg);
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             const rocksdb::DataVerificationInfo& info, rocksdb::IODebugContext* dbg) override {
      if (fs_.fail_append) return rocksdb::IOStatus::IOError("append to the WAL", k_injected);
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
    auto r = detail::open_store_on_env(options(), rocksdb::NewCompositeEnv(fs_));
    ASSERT_THAT(r, is_ok());
    store_ = std::move(r).value();
    create_topic("orders");
  }

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

}  // namespace
}  // namespace txmq::storage::test
