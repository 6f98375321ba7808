#include "txmq/common/signals.h"

#include <pthread.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>

namespace txmq::common {
namespace {

TEST(stop_signals, a_signal_sent_to_the_process_is_taken_by_the_waiting_thread) {
  const auto signals = block_stop_signals();
  stop_signal seen = stop_signal::interrupt;
  // Started after blocking, so it inherits the mask, as the servers' threads do.
  std::thread waiter([&] { seen = wait_for_stop_signal(signals); });
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  waiter.join();  // returns only once the signal was taken; the process was not stopped by it
  EXPECT_EQ(seen, stop_signal::terminate);
}

TEST(stop_signals, tells_sigint_from_sigterm) {
  const auto signals = block_stop_signals();
  ASSERT_EQ(pthread_kill(pthread_self(), SIGINT), 0);
  EXPECT_EQ(wait_for_stop_signal(signals), stop_signal::interrupt);
  ASSERT_EQ(pthread_kill(pthread_self(), SIGTERM), 0);
  EXPECT_EQ(wait_for_stop_signal(signals), stop_signal::terminate);
  EXPECT_EQ(to_string(stop_signal::interrupt), "SIGINT");
  EXPECT_EQ(to_string(stop_signal::terminate), "SIGTERM");
}

TEST(stop_signals, sigpipe_is_ignored) {
  (void)block_stop_signals();
  struct sigaction action {};
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &action), 0);
  EXPECT_EQ(action.sa_handler, SIG_IGN);
}

}  // namespace
}  // namespace txmq::common
