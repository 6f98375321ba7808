#pragma once

// Exponential back-off between retries: `initial`, then each delay twice the one before, at
// most `max`; reset() after a success starts again at `initial`. With jitter j > 0 every delay
// is drawn uniformly from [d * (1 - j), d * (1 + j)], so that many clients that failed together
// do not retry together (the client connection uses j = 0.2).
//
// Used by every retry loop of txmq: the client's reconnects, the producer's batch retries, the
// transactional producer's Prepare/EndTx retries, the consumer's fetch retries and the relay's
// PostgreSQL and broker retries.
//
// Thread-safety: none; one owner calls next() and reset() (a retry loop, an io thread).

#include <chrono>
#include <random>

namespace txmq::common {

class backoff {
 public:
  // Zero delays (a placeholder until a real one is assigned).
  backoff() = default;
  // `jitter` is a fraction in [0, 1).
  backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, double jitter = 0.0);

  // The delay to wait before the next attempt; the delay after it doubles, up to max.
  [[nodiscard]] std::chrono::milliseconds next();
  // After a success: the next delay is `initial` again.
  void reset() noexcept { current_ = initial_; }
  // The delay next() returns, before jitter.
  [[nodiscard]] std::chrono::milliseconds peek() const noexcept { return current_; }

 private:
  std::chrono::milliseconds initial_{0};
  std::chrono::milliseconds max_{0};
  std::chrono::milliseconds current_{0};
  double jitter_ = 0.0;
  std::minstd_rand rng_;
};

}  // namespace txmq::common
