#include "txmq/common/backoff.h"

#include <cstdint>

namespace txmq::common {

backoff::backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, double jitter)
    : initial_(initial), max_(max), current_(initial), jitter_(jitter) {
  // Each owner its own sequence: clients started together must not draw the same delays.
  if (jitter_ > 0.0) rng_.seed(std::random_device{}());
}

std::chrono::milliseconds backoff::next() {
  const auto base = current_;
  // Doubling without overflow: once past half of max, the next step is max.
  current_ = current_ > max_ / 2 ? max_ : current_ * 2;
  if (jitter_ <= 0.0) return base;
  std::uniform_real_distribution<double> spread(1.0 - jitter_, 1.0 + jitter_);
  return std::chrono::milliseconds(static_cast<std::int64_t>(static_cast<double>(base.count()) * spread(rng_)));
}

}  // namespace txmq::common
