// round.h's sort_failures: which failures of a settled round stop shards (a topic the broker
// refuses) and which are the broker's (back off). Label unit.

#include <algorithm>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "round.h"
#include "round_statements.h"
#include "txmq/protocol/errc.h"

namespace txmq::relay::detail {
namespace {

// A settled round of messages (shard, topic, outcome: nullopt = acked), ids 1, 2, ...
round settled(const std::vector<std::tuple<int, std::string, std::optional<client::error>>>& messages) {
  round r;
  r.acks = std::make_shared<round_acks>();
  for (const auto& [shard, topic, outcome] : messages) {
    r.shards.push_back(shard);
    auto t = std::find(r.topic_names.begin(), r.topic_names.end(), topic);
    if (t == r.topic_names.end()) t = r.topic_names.insert(r.topic_names.end(), topic);
    r.topic_of.push_back(static_cast<std::uint32_t>(t - r.topic_names.begin()));
    std::string id(k_id_bytes, '\0');
    id.back() = static_cast<char>(r.shards.size());
    r.ids += id;
    if (outcome) {
      r.acks->results.emplace_back(*outcome);
    } else {
      r.acks->results.emplace_back(producer::send_result{});
    }
  }
  r.sent = messages.size();
  return r;
}

const client::error k_refused(protocol::errc::not_authorized, "principal 'relay' may not produce to topic 'b'");
const client::error k_given_up(client::errc::delivery_timeout, "given up too: an earlier message was given up");

TEST(round_failures, a_refused_topic_stops_the_shards_whose_first_unacked_row_targets_it) {
  auto r = settled({{0, "a", std::nullopt},
                    {0, "b", k_refused},
                    {0, "b", k_given_up},
                    {1, "b", k_given_up},
                    {2, "a", std::nullopt}});
  const auto f = sort_failures(r);
  EXPECT_FALSE(f.broker_error) << "only a topic was refused";
  EXPECT_EQ(f.refused, (std::set<int>{0, 1}));
  ASSERT_TRUE(r.stopped.contains(0));
  EXPECT_EQ(r.stopped.at(0).code, protocol::errc::not_authorized);
  EXPECT_NE(r.stopped.at(0).message.find("outbox row 00000000-0000-0000-0000-000000000002"), std::string::npos)
      << r.stopped.at(0).message;
  EXPECT_NE(r.stopped.at(0).message.find("topic 'b'"), std::string::npos);
  EXPECT_NE(r.stopped.at(1).message.find("NOT_AUTHORIZED"), std::string::npos) << r.stopped.at(1).message;
  EXPECT_FALSE(r.stopped.contains(2));
}

TEST(round_failures, an_outage_is_the_brokers_even_beside_a_refused_topic) {
  const client::error down(protocol::errc::store_unavailable, "the store is unavailable");
  auto r = settled({{0, "b", k_refused}, {1, "a", down}});
  const auto f = sort_failures(r);
  ASSERT_TRUE(f.broker_error);
  EXPECT_EQ(f.broker_error->code, protocol::errc::store_unavailable);
  EXPECT_EQ(f.refused, (std::set<int>{0}));
}

TEST(round_failures, which_codes_refuse_a_topic) {
  for (auto c : {protocol::errc::not_authorized, protocol::errc::unknown_topic, protocol::errc::invalid_argument,
                 protocol::errc::message_too_large}) {
    EXPECT_TRUE(refuses_topic(client::error(c, ""))) << protocol::errc_name(c);
  }
  for (auto c : {protocol::errc::store_unavailable, protocol::errc::store_full, protocol::errc::not_leader,
                 protocol::errc::shutting_down, protocol::errc::not_authenticated, protocol::errc::storage_error}) {
    EXPECT_FALSE(refuses_topic(client::error(c, ""))) << protocol::errc_name(c);
  }
  EXPECT_FALSE(refuses_topic(client::error(client::errc::delivery_timeout, "")));
  EXPECT_FALSE(refuses_topic(client::error(client::errc::connection_lost, "")));
}

}  // namespace
}  // namespace txmq::relay::detail
