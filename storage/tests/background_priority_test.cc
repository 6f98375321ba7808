// A store opened on disk runs RocksDB's compactions at low CPU priority and its flushes at the
// process's own (rocksdb_store_open.cc: on 2 cores a compaction took the core the writer waited
// for, and every transaction above the p99 fell in a window with one running; issue #15,
// docs/BENCHMARKS.md "Fifteenth round").

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <future>
#include <optional>

#include <gtest/gtest.h>
#include <rocksdb/env.h>

#include "txmq/storage/store.h"

namespace fs = std::filesystem;
using namespace txmq;

namespace {

// The nice value of the calling thread (Linux: per thread).
int own_nice() {
  errno = 0;
  return ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
}

// The nice value a job of RocksDB's `pool` runs at, or nullopt when none ran within 30 s. The
// pool's threads lower their priority when they take their next job, so a job run there tells.
std::optional<int> nice_of_a_job_in(rocksdb::Env::Priority pool) {
  std::promise<int> seen;
  auto answered = seen.get_future();
  rocksdb::Env::Default()->Schedule([](void* arg) { static_cast<std::promise<int>*>(arg)->set_value(own_nice()); },
                                    &seen, pool);
  if (answered.wait_for(std::chrono::seconds(30)) != std::future_status::ready) return std::nullopt;
  return answered.get();
}

TEST(background_priority_test, compactions_run_at_low_cpu_priority_and_flushes_at_the_processs) {
  const fs::path dir = fs::temp_directory_path() / ("txmq-bgprio-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  storage::store_options o;
  o.dir = dir;
  auto store = storage::open_store(o);
  ASSERT_TRUE(store) << store.error().message;
  const int own = own_nice();
  const auto low = nice_of_a_job_in(rocksdb::Env::Priority::LOW);
  const auto high = nice_of_a_job_in(rocksdb::Env::Priority::HIGH);
  ASSERT_TRUE(low && high) << "RocksDB's pools ran no job within 30 s";
  EXPECT_EQ(*low, 19) << "compaction pool";
  EXPECT_EQ(*high, own) << "flush pool";
  store.value()->close();
  fs::remove_all(dir);
}

}  // namespace
