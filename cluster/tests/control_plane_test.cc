// The controller's pure decisions: replica assignment, leader election from the ISR, and the
// JSON of what it keeps in etcd.

#include <gtest/gtest.h>

#include "txmq/cluster/control_plane.h"

namespace txmq::cluster {
namespace {

TEST(control_plane, replicas_are_distinct_live_nodes_and_leaderships_spread) {
  std::map<node_id, int> leaders;
  for (std::int32_t p = 0; p < 6; ++p) {
    const auto r = assign_replicas("orders", p, 3, {3, 1, 2});
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(std::set<node_id>(r.begin(), r.end()), (std::set<node_id>{1, 2, 3}));
    ++leaders[r.front()];
  }
  EXPECT_EQ(leaders.size(), 3u);
  for (const auto& [id, n] : leaders) EXPECT_EQ(n, 2) << "node " << id;
  EXPECT_EQ(assign_replicas("t", 0, 3, {7}).size(), 1u);  // fewer live nodes than replicas
  EXPECT_TRUE(assign_replicas("t", 0, 3, {}).empty());
  const auto s = initial_state({2, 3});
  EXPECT_EQ(s.leader, 2);
  EXPECT_EQ(s.leader_epoch, 1);
  EXPECT_EQ(s.isr, (std::vector<node_id>{2, 3}));
}

TEST(control_plane, a_dead_leader_is_replaced_by_the_next_live_isr_member_with_a_new_epoch) {
  const partition_state s{1, 4, {1, 2, 3}, {1, 2, 3}};
  const auto next = after_membership_change(s, {2, 3});
  ASSERT_TRUE(next);
  EXPECT_EQ(next->leader, 2);
  EXPECT_EQ(next->leader_epoch, 5);
  EXPECT_EQ(next->isr, (std::vector<node_id>{2, 3}));
  EXPECT_EQ(next->replicas, s.replicas);
}

TEST(control_plane, a_replica_outside_the_isr_never_leads) {
  // Node 3 is a replica but not in sync: it must not lead even though it is the only one alive.
  const partition_state s{1, 4, {1, 2, 3}, {1, 2}};
  const auto next = after_membership_change(s, {3});
  ASSERT_TRUE(next);
  EXPECT_EQ(next->leader, k_no_leader);
  EXPECT_EQ(next->leader_epoch, 5);
  EXPECT_EQ(next->isr, (std::vector<node_id>{1, 2}));  // kept: who may lead again
  // Nothing changes while it stays so, and an ISR member's return gives it the lead.
  EXPECT_FALSE(after_membership_change(*next, {3}));
  const auto back = after_membership_change(*next, {2, 3});
  ASSERT_TRUE(back);
  EXPECT_EQ(back->leader, 2);
  EXPECT_EQ(back->leader_epoch, 6);
  EXPECT_EQ(back->isr, (std::vector<node_id>{2}));
}

TEST(control_plane, a_dead_follower_leaves_the_isr_and_the_epoch_stays) {
  const partition_state s{1, 4, {1, 2, 3}, {1, 2, 3}};
  const auto next = after_membership_change(s, {1, 2});
  ASSERT_TRUE(next);
  EXPECT_EQ(next->leader, 1);
  EXPECT_EQ(next->leader_epoch, 4);
  EXPECT_EQ(next->isr, (std::vector<node_id>{1, 2}));
  EXPECT_FALSE(after_membership_change(s, {1, 2, 3}));
}

TEST(control_plane, states_round_trip_through_json_and_foreign_values_are_refused) {
  const partition_state s{2, 7, {1, 2, 3}, {2, 3}};
  const auto back = decode_partition(encode(s));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back.value(), s);
  const auto n = decode_node(encode(node_info{3, "127.0.0.1:7878"}));
  ASSERT_TRUE(n);
  EXPECT_EQ(n.value().advertise, "127.0.0.1:7878");
  const auto t = decode_topic("orders", encode(topic_config{"orders", 8, 3}));
  ASSERT_TRUE(t);
  EXPECT_EQ(t.value(), (topic_config{"orders", 8, 3}));
  EXPECT_FALSE(decode_partition("not json"));
  EXPECT_FALSE(decode_partition(R"({"isr":["x"]})"));
  EXPECT_FALSE(decode_topic("t", R"({"partitions":0,"replicas":1})"));
  // Per-topic settings (docs/cluster.md "Topic settings"): written only when set, read back,
  // the effective min_insync; a record without them reads as the defaults.
  const topic_config strict{"strict", 1, 3, 3, 60'000, 65'536};
  EXPECT_EQ(decode_topic("strict", encode(strict)).value(), strict);
  EXPECT_EQ(encode(topic_config{"orders", 8, 3}), R"({"partitions":8,"replicas":3})");
  EXPECT_EQ(min_insync_replicas(strict), 3u);
  EXPECT_EQ(min_insync_replicas(topic_config{"t", 1, 3}), 2u);
  EXPECT_EQ(min_insync_replicas(topic_config{"t", 1, 2}), 1u);
  EXPECT_FALSE(decode_topic("t", R"({"partitions":1,"replicas":2,"min_insync_replicas":3})"));
  const key_layout keys("prod");
  EXPECT_EQ(keys.partition("orders", 3), "/prod/partitions/orders/3");
  EXPECT_EQ(keys.node(2), "/prod/nodes/2");
  EXPECT_EQ(keys.controller(), "/prod/controller");
}

}  // namespace
}  // namespace txmq::cluster
