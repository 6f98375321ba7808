// fd_limit: max_connections fits the open file limit, or is lowered with a warning.

#include "fd_limit.h"

#include <sys/resource.h>

#include <gtest/gtest.h>

namespace txmq::broker {
namespace {

TEST(fd_limit, a_limit_with_room_keeps_max_connections) {
  const auto b = plan_fd_budget(10000, 1024, 20000, 20000);
  EXPECT_EQ(b.max_connections, 10000u);
  EXPECT_FALSE(b.warning);
}

TEST(fd_limit, a_small_limit_lowers_max_connections_and_says_why) {
  const auto b = plan_fd_budget(10000, 1024, 4096, 4096);
  EXPECT_EQ(b.max_connections, 4096u - k_fd_headroom);
  ASSERT_TRUE(b.warning);
  EXPECT_NE(b.warning->find("RLIMIT_NOFILE) is 4096"), std::string::npos) << *b.warning;
  EXPECT_NE(b.warning->find("lowered to 3072"), std::string::npos) << *b.warning;
  // A tiny limit still serves someone.
  EXPECT_EQ(plan_fd_budget(10000, 256, 256, 256).max_connections, 128u);
  EXPECT_EQ(plan_fd_budget(10000, 1, 1, 1).max_connections, 1u);
}

TEST(fd_limit, the_soft_limit_is_raised_to_the_hard_one) {
  rlimit l{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &l), 0);
  if (l.rlim_max == RLIM_INFINITY || l.rlim_max < 128) GTEST_SKIP() << "no finite hard limit to raise to";
  rlimit lowered = l;
  lowered.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  const auto b = raise_fd_limit(10);
  EXPECT_EQ(b.soft_before, 64u);
  EXPECT_EQ(b.soft_after, l.rlim_max);
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(now.rlim_cur, l.rlim_max);
  EXPECT_EQ(b.max_connections, 10u);
}

}  // namespace
}  // namespace txmq::broker
