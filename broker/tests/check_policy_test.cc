// The pure check-back decisions of docs/protocol.md §9: the check schedule with ABANDONED after
// tx_max_checks, round-robin over a group's producers, and the cap on open checks per group.

#include "tx/check_policy.h"

#include <gtest/gtest.h>

namespace txmq::broker {
namespace {

using namespace std::chrono_literals;

TEST(check_schedule, gaps_follow_the_schedule_and_repeat_the_last) {
  check_schedule s({5000ms, 10000ms, 30000ms}, 15);
  EXPECT_EQ(s.gap_after(1), 5000ms);
  EXPECT_EQ(s.gap_after(2), 10000ms);
  EXPECT_EQ(s.gap_after(3), 30000ms);
  EXPECT_EQ(s.gap_after(4), 30000ms);
  EXPECT_EQ(s.gap_after(100), 30000ms);
  auto d = s.undecided(0, 1000);
  EXPECT_EQ(d.check_count, 1u);
  EXPECT_FALSE(d.abandon);
  EXPECT_EQ(d.next_check_ms, 6000);
  d = s.undecided(1, 1000);
  EXPECT_EQ(d.check_count, 2u);
  EXPECT_EQ(d.next_check_ms, 11000);
  d = s.undecided(7, 0);
  EXPECT_EQ(d.next_check_ms, 30000);
}

TEST(check_schedule, the_max_checks_th_undecided_check_abandons) {
  check_schedule s({100ms}, 3);
  EXPECT_FALSE(s.undecided(0, 0).abandon);
  EXPECT_FALSE(s.undecided(1, 0).abandon);
  auto d = s.undecided(2, 0);
  EXPECT_TRUE(d.abandon);
  EXPECT_EQ(d.check_count, 3u);
  EXPECT_EQ(d.next_check_ms, 0);
  check_schedule one({}, 1);
  EXPECT_TRUE(one.undecided(0, 0).abandon);
  EXPECT_EQ(one.gap_after(1), 10000ms) << "an empty schedule falls back to 10s";
}

TEST(producer_pool, picks_round_robin_over_the_group_only) {
  producer_pool p(100);
  p.join("a", 1);
  p.join("a", 2);
  p.join("a", 2);
  p.join("b", 3);
  std::vector<std::uint64_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(*p.pick("a").connection);
  EXPECT_EQ(got, (std::vector<std::uint64_t>{1, 2, 1, 2}));
  EXPECT_EQ(*p.pick("b").connection, 3u);
  auto none = p.pick("c");
  EXPECT_FALSE(none.connection);
  EXPECT_EQ(none.why, producer_pool::refusal::no_producer);
  EXPECT_TRUE(p.has_producer("a"));
  EXPECT_FALSE(p.has_producer("c"));
}

TEST(producer_pool, a_leaving_member_keeps_the_rotation) {
  producer_pool p(100);
  p.join("a", 1);
  p.join("a", 2);
  p.join("a", 3);
  EXPECT_EQ(*p.pick("a").connection, 1u);
  p.leave("a", 1);
  EXPECT_EQ(*p.pick("a").connection, 2u);
  EXPECT_EQ(*p.pick("a").connection, 3u);
  p.leave("a", 3);
  EXPECT_EQ(*p.pick("a").connection, 2u);
  p.leave("a", 2);
  EXPECT_FALSE(p.has_producer("a"));
  EXPECT_EQ(p.pick("a").why, producer_pool::refusal::no_producer);
}

TEST(producer_pool, open_checks_per_group_are_capped_and_groups_are_independent) {
  producer_pool p(2);
  p.join("a", 1);
  p.join("b", 2);
  EXPECT_TRUE(p.pick("a").connection);
  EXPECT_TRUE(p.pick("a").connection);
  auto third = p.pick("a");
  EXPECT_FALSE(third.connection);
  EXPECT_EQ(third.why, producer_pool::refusal::at_cap);
  EXPECT_EQ(p.open("a"), 2u);
  EXPECT_TRUE(p.pick("b").connection) << "group a at its cap does not hold up group b";
  p.release("a");
  EXPECT_TRUE(p.pick("a").connection);
  // Checks still open when the last producer leaves are released later.
  p.leave("a", 1);
  EXPECT_EQ(p.open("a"), 2u);
  p.release("a");
  p.release("a");
  p.release("a");
  EXPECT_EQ(p.open("a"), 0u);
}

}  // namespace
}  // namespace txmq::broker
