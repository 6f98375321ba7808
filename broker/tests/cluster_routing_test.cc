// Cluster mode's routing (cluster_mode/routing.h), pure: which partition each message of a
// Produce goes to on a node, NOT_LEADER with the leader's address, and the Metadata answer.

#include "cluster_mode/routing.h"

#include <gtest/gtest.h>

#include "txmq/protocol/partitioner.h"

namespace txmq::broker::cluster_mode {
namespace {

// Topic "t" with 4 partitions: 0 and 2 led by node 1, 1 by node 2, 3 without a leader.
cluster::cluster_state sample() {
  cluster::cluster_state s;
  s.nodes = {{1, "10.0.0.1:7878"}, {2, "10.0.0.2:7878"}};
  s.controller = cluster::controller_info{2, 10, 0};
  s.topics = {{"t", 4, 1}};
  s.partitions[{"t", 0}] = {{1, 1, {1}, {1}}, 0};
  s.partitions[{"t", 1}] = {{2, 1, {2}, {2}}, 0};
  s.partitions[{"t", 2}] = {{1, 3, {1}, {1}}, 0};
  s.partitions[{"t", 3}] = {{cluster::k_no_leader, 2, {3}, {3}}, 0};
  return s;
}

std::string key_for(std::uint32_t partition) {
  for (int i = 0;; ++i) {
    std::string k = "key-" + std::to_string(i);
    if (protocol::partition_for_key(k, 4) == partition) return k;
  }
}

TEST(cluster_routing, keyed_messages_go_to_their_keys_partition_when_led_here) {
  const auto s = sample();
  const auto k0 = key_for(0), k2 = key_for(2);
  std::uint32_t rr = 0;
  auto r = route_produce(s, 1, "t", {&k0, &k2, &k0}, rr);
  ASSERT_FALSE(r.refused);
  EXPECT_EQ(r.partitions, (std::vector<std::uint32_t>{0, 2, 0}));
  EXPECT_EQ(r.partition_count, 4u);
}

TEST(cluster_routing, a_keyed_message_led_elsewhere_is_refused_with_the_leaders_address) {
  const auto s = sample();
  const auto k0 = key_for(0), k1 = key_for(1);
  std::uint32_t rr = 0;
  auto r = route_produce(s, 1, "t", {&k0, &k1}, rr);
  ASSERT_TRUE(r.refused);
  EXPECT_TRUE(r.partitions.empty()) << "nothing of the batch is appended";
  EXPECT_EQ(r.refused->partition, 1);
  EXPECT_EQ(r.refused->leader, 2);
  EXPECT_EQ(r.refused->leader_address, "10.0.0.2:7878");
  v1::Error e;
  fill_not_leader(*r.refused, e);
  EXPECT_EQ(e.code(), v1::NOT_LEADER);
  EXPECT_EQ(e.leader_address(), "10.0.0.2:7878");
  EXPECT_NE(e.message().find("10.0.0.2:7878"), std::string::npos) << e.message();
}

TEST(cluster_routing, a_partition_without_leader_is_refused_without_address) {
  const auto s = sample();
  const auto k3 = key_for(3);
  std::uint32_t rr = 0;
  auto r = route_produce(s, 1, "t", {&k3}, rr);
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->leader, cluster::k_no_leader);
  EXPECT_TRUE(r.refused->leader_address.empty());
  EXPECT_NE(r.refused->text.find("no leader"), std::string::npos) << r.refused->text;
}

TEST(cluster_routing, keyless_requests_spread_over_the_partitions_led_here_only) {
  const auto s = sample();
  std::uint32_t rr = 0;
  // One partition per request (its keyless messages together), the next one for the next request.
  auto r = route_produce(s, 1, "t", {nullptr, nullptr, nullptr, nullptr}, rr);
  ASSERT_FALSE(r.refused);
  EXPECT_EQ(r.partitions, (std::vector<std::uint32_t>{0, 0, 0, 0}));
  auto second = route_produce(s, 1, "t", {nullptr, nullptr}, rr);
  EXPECT_EQ(second.partitions, (std::vector<std::uint32_t>{2, 2}));
  auto third = route_produce(s, 1, "t", {nullptr}, rr);
  EXPECT_EQ(third.partitions, (std::vector<std::uint32_t>{0}));
  // Node 3 leads nothing of t: refused, pointing at a node that leads a partition.
  auto none = route_produce(s, 3, "t", {nullptr}, rr);
  ASSERT_TRUE(none.refused);
  EXPECT_EQ(none.refused->partition, -1);
  EXPECT_FALSE(none.refused->leader_address.empty());
}

TEST(cluster_routing, an_unknown_topic_is_reported) {
  const auto s = sample();
  std::uint32_t rr = 0;
  EXPECT_TRUE(route_produce(s, 1, "missing", {nullptr}, rr).unknown_topic);
}

TEST(cluster_routing, metadata_names_nodes_controller_and_each_partitions_leader) {
  const auto s = sample();
  v1::MetadataResponse m;
  google::protobuf::RepeatedPtrField<std::string> all;
  fill_metadata(s, 1, "txmq", all, m);
  EXPECT_TRUE(m.cluster());
  EXPECT_EQ(m.node_id(), 1);
  EXPECT_EQ(m.controller(), 2);
  ASSERT_EQ(m.nodes_size(), 2);
  ASSERT_EQ(m.topics_size(), 1);
  const auto& t = m.topics(0);
  ASSERT_EQ(t.partition_info_size(), 4);
  EXPECT_EQ(t.partition_info(1).leader(), 2);
  EXPECT_EQ(t.partition_info(1).leader_address(), "10.0.0.2:7878");
  EXPECT_EQ(t.partition_info(2).leader_epoch(), 3);
  EXPECT_EQ(t.partition_info(3).leader(), cluster::k_no_leader);
  EXPECT_TRUE(t.partition_info(3).leader_address().empty());
  google::protobuf::RepeatedPtrField<std::string> other;
  *other.Add() = "other";
  v1::MetadataResponse none;
  fill_metadata(s, 1, "txmq", other, none);
  EXPECT_EQ(none.topics_size(), 0);
}

}  // namespace
}  // namespace txmq::broker::cluster_mode
