#include "txmq/common/log_limiter.h"

#include <algorithm>
#include <utility>

namespace txmq::common::log {

std::string log_limiter::verdict::suppressed_note() const {
  if (suppressed == 0) return {};
  return " (" + std::to_string(suppressed) + " more suppressed since the last line)";
}

log_limiter::log_limiter(std::size_t lines, clock::duration window)
    : lines_(std::max<std::size_t>(lines, 1)), window_(std::max<clock::duration>(window, clock::duration(1))) {}

void log_limiter::roll(clock::time_point now) {
  if (!started_ || now - window_start_ >= window_) {
    started_ = true;
    window_start_ = now;
    used_ = 0;
  }
}

log_limiter::verdict log_limiter::admit(clock::time_point now) {
  std::lock_guard lock(mutex_);
  roll(now);
  if (used_ >= lines_) {
    ++suppressed_;
    return {};
  }
  ++used_;
  verdict v;
  v.allowed = true;
  v.suppressed = suppressed_;
  suppressed_ = 0;
  return v;
}

std::uint64_t log_limiter::flush(clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (suppressed_ == 0 || !started_ || now - window_start_ < window_) return 0;
  // The window that left them out is over: report them now, and start afresh.
  started_ = false;
  return std::exchange(suppressed_, 0);
}

}  // namespace txmq::common::log
