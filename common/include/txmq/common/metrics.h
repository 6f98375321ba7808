#pragma once

// A small metrics registry rendered in the Prometheus text exposition format 0.0.4
// (served by the admin HTTP server at /metrics).
//
// A *family* is one metric name with its HELP text and TYPE; a *series* is one label set of
// it ({group="g1"}). Counters, gauges and histograms are objects that the owner of a hot path
// keeps a reference to and updates with relaxed atomics (no lock, no allocation). Values that
// are cheaper to compute at scrape time (lag, queue sizes) are registered as callbacks.
//
// Thread-safety: every member of metrics_registry may be called from any thread. counter,
// gauge and histogram updates are lock-free and may run concurrently with render(). Callbacks
// run on the thread that calls render(), outside the registry's lock (so they may take locks
// of their own, and may even register metrics); they must be thread-safe with respect to the
// state they read.
//
// Errors: a metric or label name that Prometheus would reject, a family name without the
// `txmq_` prefix, or re-registering a name with another type or other histogram buckets is a
// programming error and throws std::invalid_argument (at registration, never on an update).

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace txmq::common {

// Label name/value pairs; the order does not matter (the registry sorts them by name).
using label_set = std::vector<std::pair<std::string, std::string>>;

enum class metric_type { counter, gauge, histogram };

namespace detail {
struct metric_family;  // defined in metrics.cc
}  // namespace detail

// Buckets for latencies in seconds: 100 µs .. 10 s.
inline constexpr std::array<double, 16> k_latency_buckets_seconds = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   5.0,  10.0};

// A monotonically increasing count. Lock-free.
class counter {
 public:
  void inc(std::uint64_t n = 1) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t value() const noexcept {
    return value_.load(std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uint64_t> value_{0};
};

// A value that goes up and down. Lock-free.
class gauge {
 public:
  void set(double v) noexcept { value_.store(v, std::memory_order_relaxed); }
  void add(double d) noexcept { value_.fetch_add(d, std::memory_order_relaxed); }
  void inc() noexcept { add(1.0); }
  void dec() noexcept { add(-1.0); }
  [[nodiscard]] double value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Observations counted in fixed buckets (upper bounds, inclusive, ascending) plus their sum.
// observe() is lock-free: a binary search and two atomic adds.
class histogram {
 public:
  struct snapshot {
    std::vector<std::uint64_t> cumulative;  // per upper bound, then +Inf (== count)
    double sum = 0.0;
    std::uint64_t count = 0;
  };

  // `upper_bounds` must be finite, strictly ascending and non-empty (std::invalid_argument).
  explicit histogram(std::span<const double> upper_bounds);

  void observe(double value) noexcept;
  // Observes a duration in seconds.
  template <class Rep, class Period>
  void observe(std::chrono::duration<Rep, Period> d) noexcept {
    observe(std::chrono::duration<double>(d).count());
  }

  [[nodiscard]] const std::vector<double>& upper_bounds() const noexcept { return bounds_; }
  // Counts read one bucket at a time: consistent with itself (count == +Inf bucket), but
  // observations racing with collect() may be in the buckets and not yet in the sum.
  [[nodiscard]] snapshot collect() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;  // bounds_.size() + 1 (overflow)
  std::atomic<double> sum_{0.0};
};

class metrics_registry {
 public:
  metrics_registry();
  ~metrics_registry();
  metrics_registry(const metrics_registry&) = delete;
  metrics_registry& operator=(const metrics_registry&) = delete;

  // Returns the series `labels` of family `name`, creating family and series when missing.
  // Calling again with the same name and labels returns the same object, so it is fine to
  // look a series up lazily (per consumer group, per topic). The reference stays valid until
  // remove() of that series or the registry's destruction. The HELP text of the first
  // registration wins.
  counter& add_counter(std::string_view name, std::string_view help, label_set labels = {});
  gauge& add_gauge(std::string_view name, std::string_view help, label_set labels = {});
  histogram& add_histogram(std::string_view name, std::string_view help,
                           std::span<const double> upper_bounds = k_latency_buckets_seconds,
                           label_set labels = {});

  // A series whose value `read` computes at scrape time (lag, queue depth, bytes on disk).
  // Replaces an earlier callback of the same series. A callback that throws is skipped for that
  // scrape. `read` is destroyed on remove() or with the registry, perhaps on another thread.
  void add_gauge_callback(std::string_view name, std::string_view help, label_set labels,
                          std::function<double()> read);
  void add_counter_callback(std::string_view name, std::string_view help, label_set labels,
                            std::function<double()> read);

  // Series that one function computes together at scrape time: a value per consumer group, say,
  // when the groups share the work (one read of every topic's end offsets instead of one per
  // group). `collect` returns (labels, value) pairs; they are rendered sorted by labels, and a
  // pair whose labels Prometheus would reject is skipped, as is the whole family for a scrape
  // when `collect` throws. The family holds only this collector (adding a series to it, or a
  // collector to a family with series, throws std::invalid_argument); registering again
  // replaces it. `collect` runs on the thread that calls render(), like a callback.
  using collected_series = std::vector<std::pair<label_set, double>>;
  void add_gauge_collector(std::string_view name, std::string_view help,
                           std::function<collected_series()> collect);
  // Removes a collector's family; false when there was none.
  bool remove_collector(std::string_view name);

  // Removes one series (e.g. when a consumer group is deleted); the family goes when its last
  // series does. Returns false when there was no such series. References to the removed
  // series' object must no longer be used (a render() already running keeps it alive).
  bool remove(std::string_view name, const label_set& labels);

  // The whole registry in text format 0.0.4: families sorted by name, series by labels.
  [[nodiscard]] std::string render() const;


 private:
  void add_callback(metric_type type, std::string_view name, std::string_view help,
                    label_set labels, std::function<double()> read);

  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<detail::metric_family>, std::less<>> families_;
};

// The Content-Type of render()'s output.
inline constexpr std::string_view k_metrics_content_type =
    "text/plain; version=0.0.4; charset=utf-8";

}  // namespace txmq::common
