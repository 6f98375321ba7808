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
  void merge(const latency_recorder& other);
  [[nodiscard]] std::size_t count() const { return samples_ns_.size(); }
  // Sorts the samples; call once recording is over.
  [[nodiscard]] percentiles compute();

 private:
  std::vector<std::int64_t> samples_ns_;
};

// Median of a set of figures (several runs of one workload).
[[nodiscard]] double median(std::vector<double> v);

// Durations as "5s", "300ms", "0.5" (seconds).
[[nodiscard]] std::chrono::nanoseconds parse_seconds(const std::string& text);

}  // namespace txmq::bench
