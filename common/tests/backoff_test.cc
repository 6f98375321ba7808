#include "txmq/common/backoff.h"

#include <vector>

#include <gtest/gtest.h>

namespace txmq::common {
namespace {

using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;

std::vector<ms> take(backoff& b, int n) {
  std::vector<ms> out;
  for (int i = 0; i < n; ++i) out.push_back(b.next());
  return out;
}

TEST(backoff, doubles_from_initial_up_to_max) {
  backoff b(100ms, 5000ms);
  EXPECT_EQ(take(b, 8), (std::vector<ms>{100ms, 200ms, 400ms, 800ms, 1600ms, 3200ms, 5000ms, 5000ms}));
}

TEST(backoff, reset_starts_again_at_initial) {
  backoff b(50ms, 5000ms);
  (void)take(b, 5);
  b.reset();
  EXPECT_EQ(b.peek(), 50ms);
  EXPECT_EQ(take(b, 3), (std::vector<ms>{50ms, 100ms, 200ms}));
}

TEST(backoff, an_initial_above_max_is_used_once_then_max) {
  // As the hand-written loops did (min(d * 2, max) after the first wait).
  backoff b(10s, 1s);
  EXPECT_EQ(take(b, 3), (std::vector<ms>{10s, 1s, 1s}));
}

TEST(backoff, large_delays_do_not_overflow) {
  const ms huge = ms::max() / 2 + ms(1);
  backoff b(huge, ms::max());
  EXPECT_EQ(b.next(), huge);
  EXPECT_EQ(b.next(), ms::max());
  EXPECT_EQ(b.next(), ms::max());
}

TEST(backoff, zero_delays_stay_zero) {
  backoff b;
  EXPECT_EQ(take(b, 3), (std::vector<ms>{0ms, 0ms, 0ms}));
}

TEST(backoff, jitter_stays_within_its_fraction_of_each_step) {
  backoff b(1000ms, 8000ms, 0.2);
  const std::vector<ms> steps{1000ms, 2000ms, 4000ms, 8000ms, 8000ms};
  bool varied = false;
  for (int round = 0; round < 50; ++round) {
    b.reset();
    for (const ms step : steps) {
      const ms d = b.next();
      EXPECT_GE(d.count(), step.count() * 8 / 10);
      EXPECT_LE(d.count(), step.count() * 12 / 10);
      varied = varied || d != step;
    }
  }
  EXPECT_TRUE(varied) << "250 jittered delays all equal to their step";
}

}  // namespace
}  // namespace txmq::common
