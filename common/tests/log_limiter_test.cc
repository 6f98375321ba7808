// log_limiter: at most N lines a window, the rest counted and reported with the next line let
// through or by flush() once their window is over; nothing is lost from the count.

#include "txmq/common/log_limiter.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace txmq::common::log {
namespace {

using namespace std::chrono_literals;
using clock = log_limiter::clock;

TEST(log_limiter, one_line_a_second_and_the_count_of_the_rest) {
  log_limiter limiter(1, 1s);
  const auto t0 = clock::time_point{} + 100h;
  auto first = limiter.admit(t0);
  EXPECT_TRUE(first);
  EXPECT_EQ(first.suppressed, 0u);
  EXPECT_EQ(first.suppressed_note(), "");
  // A flood within the second: all left out, counted.
  for (int i = 0; i < 999; ++i) EXPECT_FALSE(limiter.admit(t0 + std::chrono::microseconds(i * 900)));
  EXPECT_EQ(limiter.flush(t0 + 999ms), 0u) << "the window that left them out is not over yet";
  // The next second's first line says how many were left out.
  auto next = limiter.admit(t0 + 1s);
  ASSERT_TRUE(next);
  EXPECT_EQ(next.suppressed, 999u);
  EXPECT_EQ(next.suppressed_note(), " (999 more suppressed since the last line)");
  EXPECT_FALSE(limiter.admit(t0 + 1500ms));
  // A flood that stops: flush() reports its tail once the window has passed, once.
  EXPECT_EQ(limiter.flush(t0 + 2100ms), 1u);
  EXPECT_EQ(limiter.flush(t0 + 2200ms), 0u);
  auto after = limiter.admit(t0 + 2300ms);
  EXPECT_TRUE(after);
  EXPECT_EQ(after.suppressed, 0u) << "flushed lines are not reported twice";
}

TEST(log_limiter, several_lines_per_window) {
  log_limiter limiter(10, 1s);
  const auto t0 = clock::time_point{} + 1h;
  int allowed = 0;
  for (int i = 0; i < 100; ++i) allowed += limiter.admit(t0 + std::chrono::milliseconds(i)) ? 1 : 0;
  EXPECT_EQ(allowed, 10);
  auto next = limiter.admit(t0 + 1s);
  ASSERT_TRUE(next);
  EXPECT_EQ(next.suppressed, 90u);
}

TEST(log_limiter, threads_lose_no_count) {
  log_limiter limiter(5, 1h);  // one window for the whole test
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10'000; ++i) allowed += limiter.admit() ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(allowed.load(), 5);
  EXPECT_EQ(limiter.flush(clock::now() + 2h), 40'000u - 5u);
}

}  // namespace
}  // namespace txmq::common::log
