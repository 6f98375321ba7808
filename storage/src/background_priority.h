#pragma once

// RocksDB's flush and compaction threads at low CPU priority while writes are not held up by
// them, back at the process's own while they are (issue #15, docs/BENCHMARKS.md "Twentieth
// round").
//
// Why: on a machine with few cores a flush or compaction holds a core for 100 ms and more, and
// the io, writer and syncer threads that answer requests wait for it: in two A/Bs of the built
// broker the steady-rate p99 fell by 15-20 % (per-round B/A medians 0.85 and 0.80) and the
// transaction p99 by a tenth. Why not simply nice 19: beside other busy processes in the same
// scheduling group, a flush at nice 19 barely ran, RocksDB stopped writes for want of
// memtables, and publish fell from 226,600–237,500 to 26,600–28,400 msg/s. So a pool is lowered
// only while no column family is delayed or stopped (RocksDB's write stall conditions), and
// raised back as soon as one is.
//
// Raising a thread's priority back needs root, CAP_SYS_NICE or an RLIMIT_NICE that allows it:
// without, nothing is lowered (a lowered flush could not be raised when writes stop).

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include <rocksdb/listener.h>

namespace txmq::storage::detail {

class background_priority final : public rocksdb::EventListener {
 public:
  static constexpr int k_low_nice = 19;

  // Whether this process may lower a thread's priority and raise it back again (probed once,
  // on a thread of its own).
  [[nodiscard]] static bool can_raise_back();

  // `normal_nice`: the priority to raise back to (the process's).
  explicit background_priority(int normal_nice) : normal_nice_(normal_nice) {}
  // The pools are the process's: a store opened later without this finds them as they were.
  ~background_priority() override;

  void OnFlushBegin(rocksdb::DB*, const rocksdb::FlushJobInfo&) override { adopt_calling_thread(); }
  void OnCompactionBegin(rocksdb::DB*, const rocksdb::CompactionJobInfo&) override { adopt_calling_thread(); }
  void OnStallConditionsChanged(const rocksdb::WriteStallInfo& info) override;

  // Whether the background threads run lowered now; how many times they were raised back.
  [[nodiscard]] bool lowered() const;
  [[nodiscard]] std::uint64_t raised_count() const noexcept { return raised_.load(std::memory_order_relaxed); }

 private:
  // A flush or compaction thread seen for the first time is set to the current priority.
  void adopt_calling_thread();
  void apply_locked(int nice);

  const int normal_nice_;
  mutable std::mutex mu_;
  std::set<pid_t> threads_;
  std::set<std::string> held_up_;  // column families whose writes are delayed or stopped
  std::atomic<std::uint64_t> raised_{0};
};

}  // namespace txmq::storage::detail
