#include "workloads/storage_bench.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <iostream>
#include <mutex>
#include <thread>

#include <boost/json.hpp>

#include "support/latency.h"
#include "txmq/storage/store.h"

namespace txmq::bench {
namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

struct run_figures {
  double messages_per_s = 0;
  double commit_groups_per_s = 0;
  double messages_per_fsync = 0;
  percentiles latency;
};

// Appends 256 bytes and fdatasyncs, as a write-ahead log does, for `seconds`.
double raw_fsync_rate(const fs::path& dir, double seconds) {
  const fs::path file = dir / "fsync-probe";
  const int fd = ::open(file.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_APPEND, 0644);
  if (fd < 0) return 0;
  const std::string block(256, 'f');
  std::uint64_t n = 0;
  const auto start = clock_type::now();
  const auto end = start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
  while (clock_type::now() < end) {
    if (::write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size()) || ::fdatasync(fd) != 0) break;
    ++n;
  }
  const double elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
  ::close(fd);
  fs::remove(file);
  return static_cast<double>(n) / elapsed;
}

// One run: `writers` appends kept in flight by a client thread (standing in for the broker's
// network threads) until the time is up.
run_figures run_once(const storage_bench_options& o, int writers, const fs::path& dir) {
  fs::remove_all(dir);
  storage::store_options so;
  so.dir = dir;
  auto opened = storage::open_store(so);
  if (!opened) throw std::runtime_error("cannot open a store in " + dir.string() + ": " + opened.error().message);
  auto& store = *opened.value();
  storage::topic_config tc;
  tc.name = "bench";
  tc.partitions = o.partitions;
  if (auto r = storage::call_sync<storage::topic_info>([&](auto done) { store.create_topic(tc, done); }); !r) {
    throw std::runtime_error("create topic: " + r.error().message);
  }

  const std::string body(o.message_bytes, 'x');
  std::mutex mu;
  std::condition_variable cv;
  std::deque<int> ready;  // slots whose append completed and may be issued again
  std::vector<clock_type::time_point> issued(static_cast<std::size_t>(writers));
  std::atomic<bool> measuring{false};
  std::atomic<std::uint64_t> completed{0};
  std::atomic<bool> failed{false};
  latency_recorder lat;  // only the committer thread (completions) touches it
  lat.reserve(4'000'000);
  int outstanding = 0;
  bool stopping = false;

  auto issue = [&](int slot) {
    storage::append_request req;
    req.topic = "bench";
    for (std::size_t i = 0; i < o.messages_per_append; ++i) {
      v1::Message m;
      m.set_id(std::string(protocol::uuid::make_v7().raw()));
      m.set_body(body);
      req.messages.push_back(std::move(m));
    }
    issued[static_cast<std::size_t>(slot)] = clock_type::now();
    store.append(std::move(req), [&, slot](result<storage::append_result> r) {
      if (!r) failed = true;
      if (measuring.load(std::memory_order_relaxed)) {
        lat.add(clock_type::now() - issued[static_cast<std::size_t>(slot)]);
        completed.fetch_add(o.messages_per_append, std::memory_order_relaxed);
      }
      std::lock_guard lk(mu);
      ready.push_back(slot);
      // One wake-up per burst of completions, not one per completion.
      if (ready.size() == 1) cv.notify_one();
    });
  };

  std::thread client([&] {
    for (int i = 0; i < writers; ++i) issue(i);
    std::unique_lock lk(mu);
    outstanding = writers;
    for (;;) {
      cv.wait(lk, [&] { return !ready.empty(); });
      std::deque<int> batch;
      batch.swap(ready);
      if (stopping) {
        outstanding -= static_cast<int>(batch.size());
        if (outstanding == 0) return;
        continue;
      }
      lk.unlock();
      for (int slot : batch) issue(slot);
      lk.lock();
    }
  });

  auto secs = [](double s) { return std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(s)); };
  std::this_thread::sleep_for(secs(o.warmup));  // the load generator's own pacing, not synchronisation
  const auto before = store.stats();
  const auto t0 = clock_type::now();
  measuring = true;
  std::this_thread::sleep_for(secs(o.seconds));
  measuring = false;
  const auto t1 = clock_type::now();
  const auto after = store.stats();
  {
    std::lock_guard lk(mu);
    stopping = true;
    cv.notify_one();
  }
  client.join();
  store.close();
  opened.value().reset();  // RocksDB's own threads end here, before the directory goes
  if (failed) throw std::runtime_error("an append failed during the run");

  run_figures f;
  const double elapsed = std::chrono::duration<double>(t1 - t0).count();
  f.messages_per_s = static_cast<double>(completed.load()) / elapsed;
  const double groups = static_cast<double>(after.fsyncs - before.fsyncs);
  f.commit_groups_per_s = groups / elapsed;
  f.messages_per_fsync = groups > 0 ? static_cast<double>(after.messages_appended - before.messages_appended) / groups : 0;
  f.latency = lat.compute();
  fs::remove_all(dir);
  return f;
}

}  // namespace

int run_storage_bench(const storage_bench_options& o) {
  fs::create_directories(o.dir);
  const double fsyncs = raw_fsync_rate(o.dir, 2.0);
  if (!o.json) {
    std::printf("storage append, %zu-byte messages, %zu per append, %u partitions, sync=true, %d run(s) of %.1fs; "
                "medians\n",
                o.message_bytes, o.messages_per_append, o.partitions, o.runs, o.seconds);
    std::printf("raw append+fdatasync on %s: %.0f/s\n\n", o.dir.c_str(), fsyncs);
    std::printf("%8s %12s %10s %10s %10s %10s %12s %10s\n", "writers", "msg/s", "p50 ms", "p90 ms", "p99 ms",
                "p99.9 ms", "fsyncs/s", "msg/fsync");
  } else {
    boost::json::object line{{"workload", "raw_fsync"}, {"dir", o.dir.string()}, {"fsyncs_per_s", fsyncs}};
    std::cout << boost::json::serialize(line) << "\n";
  }
  for (int w : o.writers) {
    std::vector<double> tput, p50, p90, p99, p999, groups, per_fsync;
    for (int r = 0; r < o.runs; ++r) {
      auto f = run_once(o, w, o.dir / ("w" + std::to_string(w) + "-r" + std::to_string(r)));
      tput.push_back(f.messages_per_s);
      p50.push_back(f.latency.p50_ms);
      p90.push_back(f.latency.p90_ms);
      p99.push_back(f.latency.p99_ms);
      p999.push_back(f.latency.p999_ms);
      groups.push_back(f.commit_groups_per_s);
      per_fsync.push_back(f.messages_per_fsync);
    }
    if (o.json) {
      boost::json::object line{{"workload", "storage_append"}, {"writers", w},
                               {"message_bytes", o.message_bytes}, {"runs", o.runs},
                               {"messages_per_s", median(tput)}, {"p50_ms", median(p50)},
                               {"p90_ms", median(p90)}, {"p99_ms", median(p99)},
                               {"p999_ms", median(p999)}, {"fsyncs_per_s", median(groups)},
                               {"messages_per_fsync", median(per_fsync)}};
      boost::json::array all;
      for (double t : tput) all.push_back(t);
      line["messages_per_s_each_run"] = all;
      std::cout << boost::json::serialize(line) << std::endl;
    } else {
      std::printf("%8d %12.0f %10.3f %10.3f %10.3f %10.3f %12.0f %10.1f\n", w, median(tput), median(p50), median(p90),
                  median(p99), median(p999), median(groups), median(per_fsync));
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace txmq::bench
