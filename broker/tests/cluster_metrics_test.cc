// Cluster mode's metrics (cluster_mode/cluster_metrics.h), pure: ISR shrinks and expands of the
// partitions a node leads, counted from two successive cluster states, and its under-replicated
// partitions.

#include "cluster_mode/cluster_metrics.h"

#include <gtest/gtest.h>

namespace txmq::broker::cluster_mode {
namespace {

cluster::cluster_state with(std::vector<std::pair<std::int32_t, cluster::partition_state>> parts) {
  cluster::cluster_state s;
  s.topics = {{"t", static_cast<std::int32_t>(parts.size()), 3}};
  for (auto& [p, state] : parts) s.partitions[{"t", p}] = {std::move(state), 0};
  return s;
}

TEST(cluster_metrics, isr_changes_of_partitions_led_here_are_counted_once_per_change) {
  const auto before = with({{0, {1, 1, {1, 2, 3}, {1, 2, 3}}},
                            {1, {1, 1, {1, 2, 3}, {1, 2}}},
                            {2, {2, 1, {2, 3, 1}, {2, 3, 1}}},
                            {3, {1, 1, {1, 2, 3}, {1, 2, 3}}}});
  const auto after = with({{0, {1, 1, {1, 2, 3}, {1, 2}}},        // 3 left: a shrink
                           {1, {1, 1, {1, 2, 3}, {1, 2, 3}}},     // 3 back: an expand
                           {2, {2, 1, {2, 3, 1}, {2}}},           // led by node 2: not node 1's
                           {3, {1, 1, {1, 2, 3}, {1, 3, 2}}},     // same members, other order: nothing
                           {4, {1, 1, {1, 2, 3}, {1}}}});         // new here: nothing to compare
  const auto c = compare_isr(before, after, 1);
  EXPECT_EQ(c.shrinks, 1u);
  EXPECT_EQ(c.expands, 1u);
  const auto for_2 = compare_isr(before, after, 2);
  EXPECT_EQ(for_2.shrinks, 1u);
  EXPECT_EQ(for_2.expands, 0u);
}

TEST(cluster_metrics, a_new_leader_that_drops_the_old_one_from_the_isr_counts_a_shrink) {
  const auto before = with({{0, {1, 1, {1, 2, 3}, {1, 2, 3}}}});
  const auto after = with({{0, {2, 2, {1, 2, 3}, {2, 3}}}});
  EXPECT_EQ(compare_isr(before, after, 2).shrinks, 1u);
  EXPECT_EQ(compare_isr(before, after, 1).shrinks, 0u);
}

TEST(cluster_metrics, under_replicated_partitions_are_those_led_here_with_a_smaller_isr) {
  const auto s = with({{0, {1, 1, {1, 2, 3}, {1, 2}}},
                       {1, {1, 1, {1, 2, 3}, {1, 2, 3}}},
                       {2, {2, 1, {2, 3, 1}, {2}}},
                       {3, {cluster::k_no_leader, 2, {1}, {1}}}});
  EXPECT_EQ(under_replicated_led_by(s, 1), 1u);
  EXPECT_EQ(under_replicated_led_by(s, 2), 1u);
  EXPECT_EQ(under_replicated_led_by(s, 3), 0u);
}

}  // namespace
}  // namespace txmq::broker::cluster_mode
