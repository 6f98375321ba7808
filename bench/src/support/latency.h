#pragma once

// Latency samples and their percentiles, for the benchmark reports.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace txmq::bench {

struct percentiles {
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, p999_ms = 0, max_ms = 0;
};

class latency_recorder {
 public:
  void reserve(std::size_t n) { samples_ns_.reserve(n); }
  void add(std::chrono::nanoseconds d) { samples_ns_.push_back(d.count()); }
  // With the time it belongs to (kept only once keep_times() was called: for a latency log).
  void add(std::chrono::nanoseconds d, std::int64_t at_ns) {
    samples_ns_.push_back(d.count());
    if (keep_times_) times_ns_.push_back(at_ns);
  }
  void keep_times() { keep_times_ = true; }
  // "at_ns latency_ns" per sample, in the order added; call before compute(), which sorts.
  // Returns false when the file cannot be written.
  [[nodiscard]] bool write_log(const std::string& path) const;
  void merge(const latency_recorder& other);
  [[nodiscard]] std::size_t count() const { return samples_ns_.size(); }
  // Sorts the samples; call once recording is over.
  [[nodiscard]] percentiles compute();

 private:
  std::vector<std::int64_t> samples_ns_;
  std::vector<std::int64_t> times_ns_;
  bool keep_times_ = false;
};

// A request pair's latencies (txmq-bench tx: the Prepare's, then the EndTx's), and when the
// second ended, in ns from the measured window's start.
struct step_sample {
  std::int64_t end_ns = 0, first_ns = 0, second_ns = 0;
};
// Writes "# start_unix_us N" (the window's start by the wall clock, to line the log up with
// the broker's, e.g. RocksDB's LOG) and "end_ns first_ns second_ns" per sample. Returns false
// when the file cannot be written.
[[nodiscard]] bool write_step_log(const std::string& path, std::chrono::system_clock::time_point window_start,
                                  const std::vector<step_sample>& samples);

// Median of a set of figures (several runs of one workload).
[[nodiscard]] double median(std::vector<double> v);

// Durations as "5s", "300ms", "0.5" (seconds).
[[nodiscard]] std::chrono::nanoseconds parse_seconds(const std::string& text);

}  // namespace txmq::bench
