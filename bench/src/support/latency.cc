#include "support/latency.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "txmq/common/units.h"

namespace txmq::bench {

void latency_recorder::merge(const latency_recorder& other) {
  samples_ns_.insert(samples_ns_.end(), other.samples_ns_.begin(), other.samples_ns_.end());
  times_ns_.insert(times_ns_.end(), other.times_ns_.begin(), other.times_ns_.end());
}

bool latency_recorder::write_log(const std::string& path) const {
  std::ofstream out(path);
  for (std::size_t i = 0; i < times_ns_.size() && i < samples_ns_.size(); ++i) {
    out << times_ns_[i] << ' ' << samples_ns_[i] << '\n';
  }
  return static_cast<bool>(out.flush());
}

bool write_step_log(const std::string& path, std::chrono::system_clock::time_point window_start,
                    const std::vector<step_sample>& samples) {
  std::ofstream out(path);
  out << "# start_unix_us "
      << std::chrono::duration_cast<std::chrono::microseconds>(window_start.time_since_epoch()).count() << '\n';
  for (const auto& s : samples) out << s.end_ns << ' ' << s.first_ns << ' ' << s.second_ns << '\n';
  return static_cast<bool>(out.flush());
}

percentiles latency_recorder::compute() {
  percentiles p;
  if (samples_ns_.empty()) return p;
  std::sort(samples_ns_.begin(), samples_ns_.end());
  auto at = [&](double q) {
    auto i = static_cast<std::size_t>(q * static_cast<double>(samples_ns_.size() - 1));
    return static_cast<double>(samples_ns_[i]) / 1e6;
  };
  p.p50_ms = at(0.50);
  p.p90_ms = at(0.90);
  p.p99_ms = at(0.99);
  p.p999_ms = at(0.999);
  p.max_ms = static_cast<double>(samples_ns_.back()) / 1e6;
  return p;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::chrono::nanoseconds parse_seconds(const std::string& text) {
  // A plain number counts seconds and may be fractional (--seconds 0.5, as the scripts pass);
  // anything with a unit is a duration in the grammar of every txmq binary (300ms, 5s, 2m).
  std::size_t used = 0;
  double v = -1;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == text.size() && v >= 0) return std::chrono::nanoseconds(static_cast<std::int64_t>(v * 1e9));
  auto d = common::parse_duration(text);
  if (!d) throw std::invalid_argument(d.error().message);
  return d.value();
}

}  // namespace txmq::bench
