#include "txmq/relay/shard_plan.h"

#include <gtest/gtest.h>

namespace txmq::relay {
namespace {

TEST(shard_plan, fair_share_covers_every_shard) {
  EXPECT_EQ(fair_share(16, 1), 16);
  EXPECT_EQ(fair_share(16, 3), 6);
  EXPECT_EQ(fair_share(16, 16), 1);
  EXPECT_EQ(fair_share(16, 40), 1);
  EXPECT_EQ(fair_share(0, 3), 0);
  for (int shards = 1; shards <= 64; ++shards) {
    for (int live = 1; live <= 10; ++live) EXPECT_GE(fair_share(shards, live) * live, shards);
  }
}

TEST(shard_plan, above_the_share_releases_the_surplus_only) {
  const auto moves = plan_moves({0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 2, 3, 4, 5, 6, 7}, 16, 6, "a");
  EXPECT_EQ(moves.release, (std::vector<int>{7, 6}));
  EXPECT_TRUE(moves.acquire.empty());
}

TEST(shard_plan, below_the_share_tries_only_free_shards) {
  const auto moves = plan_moves({1}, {0, 1, 2, 3}, 6, 3, "relay-b");
  EXPECT_TRUE(moves.release.empty());
  std::set<int> tried(moves.acquire.begin(), moves.acquire.end());
  EXPECT_EQ(tried, (std::set<int>{4, 5}));
}

TEST(shard_plan, at_the_share_nothing_moves) {
  const auto moves = plan_moves({0, 1}, {0, 1, 2, 3}, 4, 2, "a");
  EXPECT_TRUE(moves.release.empty());
  EXPECT_TRUE(moves.acquire.empty());
}

TEST(shard_plan, relays_start_at_different_shards) {
  std::set<int> firsts;
  for (int i = 0; i < 20; ++i) firsts.insert(plan_moves({}, {}, 16, 16, "relay-" + std::to_string(i)).acquire.front());
  EXPECT_GT(firsts.size(), 3u);
}

}  // namespace
}  // namespace txmq::relay
