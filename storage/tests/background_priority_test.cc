// RocksDB's flush and compaction threads run at nice 19 while no write waits for them and at the
// process's priority while RocksDB delays or stops writes (src/background_priority.h): lowered
// for good, a flush beside other busy processes barely ran and writes stopped (issue #15,
// docs/BENCHMARKS.md "Twentieth round").

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "background_priority.h"
#include "eventually.h"
#include "txmq/storage/store.h"

namespace txmq::storage::test {
namespace {

namespace fs = std::filesystem;
using detail::background_priority;

int nice_of(pid_t tid) {
  errno = 0;
  return ::getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
}

// A stand-in for one of RocksDB's background threads: it starts a "flush" (the listener adopts
// it) and then waits until the test ends it.
class pool_thread {
 public:
  explicit pool_thread(background_priority& listener) {
    thread_ = std::thread([this, &listener] {
      listener.OnFlushBegin(nullptr, rocksdb::FlushJobInfo{});
      std::unique_lock lk(mu_);
      tid_ = ::gettid();
      cv_.notify_all();
      cv_.wait(lk, [&] { return done_; });
    });
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return tid_ != 0; });
  }
  ~pool_thread() {
    {
      std::lock_guard lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  [[nodiscard]] int nice() const { return nice_of(tid_); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  pid_t tid_ = 0;
  bool done_ = false;
  std::thread thread_;
};

rocksdb::WriteStallInfo stall(const std::string& cf, rocksdb::WriteStallCondition cur) {
  rocksdb::WriteStallInfo info;
  info.cf_name = cf;
  info.condition.cur = cur;
  info.condition.prev = rocksdb::WriteStallCondition::kNormal;
  return info;
}

TEST(background_priority_test, pool_threads_are_lowered_while_writes_flow_and_raised_while_any_family_is_held_up) {
  if (!background_priority::can_raise_back()) GTEST_SKIP() << "raising a thread back needs root or CAP_SYS_NICE";
  const int own = nice_of(::gettid());
  background_priority listener(own);
  pool_thread flush(listener);
  EXPECT_EQ(flush.nice(), background_priority::k_low_nice);
  EXPECT_TRUE(listener.lowered());

  listener.OnStallConditionsChanged(stall("log", rocksdb::WriteStallCondition::kStopped));
  EXPECT_EQ(flush.nice(), own) << "writes stopped: the flush must run at the process's priority";
  EXPECT_FALSE(listener.lowered());
  EXPECT_EQ(listener.raised_count(), 1u);
  // A thread that starts its first job meanwhile runs at the process's priority too.
  pool_thread compaction(listener);
  EXPECT_EQ(compaction.nice(), own);

  // Lowered again only once no family is held up.
  listener.OnStallConditionsChanged(stall("dedupe", rocksdb::WriteStallCondition::kDelayed));
  listener.OnStallConditionsChanged(stall("log", rocksdb::WriteStallCondition::kNormal));
  EXPECT_EQ(flush.nice(), own) << "dedupe is still delayed";
  listener.OnStallConditionsChanged(stall("dedupe", rocksdb::WriteStallCondition::kNormal));
  EXPECT_EQ(flush.nice(), background_priority::k_low_nice);
  EXPECT_EQ(compaction.nice(), background_priority::k_low_nice);
  EXPECT_TRUE(listener.lowered());
  EXPECT_EQ(listener.raised_count(), 1u);
}

// The nice values of this process's threads named `name` (RocksDB's "rocksdb:high"
// flush and "rocksdb:low" compaction threads).
std::vector<int> nice_of_threads_named(const std::string& name) {
  std::vector<int> out;
  for (const auto& t : fs::directory_iterator("/proc/self/task")) {
    std::ifstream comm(t.path() / "comm");
    std::string c;
    std::getline(comm, c);
    if (c == name) out.push_back(nice_of(static_cast<pid_t>(std::stoi(t.path().filename().string()))));
  }
  return out;
}

TEST(background_priority_test, a_store_on_disk_flushes_and_compacts_at_low_priority) {
  if (!background_priority::can_raise_back()) GTEST_SKIP() << "raising a thread back needs root or CAP_SYS_NICE";
  const fs::path dir = fs::temp_directory_path() / ("txmq-bgprio-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  store_options o;
  o.dir = dir;
  auto store = open_store(o);
  ASSERT_TRUE(store) << store.error().message;
  EXPECT_TRUE(store.value()->stats().background_lowered);
  // A manual compaction flushes the memtables first: one job in each pool.
  ASSERT_TRUE(store.value()->compact());
  const auto low_nice = [](const std::string& name) {
    const auto nices = nice_of_threads_named(name);
    return std::find(nices.begin(), nices.end(), background_priority::k_low_nice) != nices.end();
  };
  EXPECT_TRUE(txmq::test::eventually([&] { return low_nice("rocksdb:high") && low_nice("rocksdb:low"); }))
      << "no flush or compaction thread at nice 19";
  EXPECT_EQ(store.value()->stats().background_raised, 0u);
  store.value()->close();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace txmq::storage::test
