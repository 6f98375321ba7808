// tx_coordinator's handlers on an in-memory store, through recording responders: Prepare, then
// EndTx commit or rollback, with the first resolution winning; and a check-back sent to a
// producer's responder and answered through service::handle_answer.

#include <gtest/gtest.h>

#include "handler_test_support.h"

namespace txmq::broker::test {
namespace {

class tx_coordinator_test : public handler_test {
 protected:
  // The messages of topic `t` a fresh group sees.
  std::vector<std::string> visible(const std::shared_ptr<recording_responder>& c, const std::string& group) {
    auto f = request(c, fetch_frame(group, "t"));
    EXPECT_TRUE(f.has_fetch_response()) << f.ShortDebugString();
    std::vector<std::string> bodies;
    for (auto& d : f.fetch_response().deliveries()) bodies.push_back(d.message().body());
    return bodies;
  }
};

TEST_F(tx_coordinator_test, commit_makes_the_messages_visible_and_a_contrary_end_tx_is_refused) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  const auto tx = protocol::uuid::make_v4();
  auto prepared = request(c, prepare_frame(tx, "pg", {message("a", std::nullopt, "t"), message("b", std::nullopt, "t")}));
  ASSERT_TRUE(prepared.has_prepare_response()) << prepared.ShortDebugString();
  EXPECT_FALSE(prepared.prepare_response().duplicate());
  EXPECT_TRUE(visible(c, "before").empty()) << "prepared messages are invisible";

  auto committed = request(c, end_tx_frame(tx, v1::COMMIT));
  ASSERT_TRUE(committed.has_end_tx_response()) << committed.ShortDebugString();
  EXPECT_EQ(committed.end_tx_response().state(), v1::COMMITTED);
  EXPECT_FALSE(committed.end_tx_response().already_resolved());
  ASSERT_EQ(committed.end_tx_response().positions_size(), 2);
  EXPECT_EQ(visible(c, "after"), (std::vector<std::string>{"a", "b"}));

  // The same outcome again is idempotent; the contrary one changes nothing.
  auto repeated = request(c, end_tx_frame(tx, v1::COMMIT));
  ASSERT_TRUE(repeated.has_end_tx_response()) << repeated.ShortDebugString();
  EXPECT_TRUE(repeated.end_tx_response().already_resolved());
  EXPECT_EQ(repeated.end_tx_response().positions(1).offset(), committed.end_tx_response().positions(1).offset());
  auto contrary = request(c, end_tx_frame(tx, v1::ROLLBACK));
  ASSERT_TRUE(contrary.has_error()) << contrary.ShortDebugString();
  EXPECT_EQ(contrary.error().code(), v1::TX_ALREADY_RESOLVED);
  EXPECT_NE(contrary.error().message().find("already committed"), std::string::npos) << contrary.error().message();
  auto shown = request(c, tx_show_frame(tx));
  EXPECT_EQ(shown.tx_info().state(), v1::COMMITTED);
  EXPECT_EQ(store_->topic("t")->partitions[0].next_offset, 2u);
}

TEST_F(tx_coordinator_test, rollback_drops_the_messages_and_a_later_commit_is_refused) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  const auto tx = protocol::uuid::make_v4();
  ASSERT_TRUE(request(c, prepare_frame(tx, "pg", {message("a", std::nullopt, "t")})).has_prepare_response());

  auto rolled_back = request(c, end_tx_frame(tx, v1::ROLLBACK));
  ASSERT_TRUE(rolled_back.has_end_tx_response()) << rolled_back.ShortDebugString();
  EXPECT_EQ(rolled_back.end_tx_response().state(), v1::ROLLED_BACK);
  auto late_commit = request(c, end_tx_frame(tx, v1::COMMIT));
  ASSERT_TRUE(late_commit.has_error()) << late_commit.ShortDebugString();
  EXPECT_EQ(late_commit.error().code(), v1::TX_ALREADY_RESOLVED);
  EXPECT_TRUE(visible(c, "g").empty());
  EXPECT_EQ(store_->topic("t")->partitions[0].next_offset, 0u);

  // A Prepare of the resolved txid is a reuse, refused.
  auto reused = request(c, prepare_frame(tx, "pg", {message("a", std::nullopt, "t")}));
  EXPECT_EQ(reused.error().code(), v1::TX_ALREADY_RESOLVED);
  // A txid never prepared is unknown.
  EXPECT_EQ(request(c, end_tx_frame(protocol::uuid::make_v4(), v1::COMMIT)).error().code(), v1::UNKNOWN_TX);
}

TEST_F(tx_coordinator_test, an_unended_transaction_is_checked_with_its_producer_and_resolved_by_the_answer) {
  settings.tx.scan_interval = std::chrono::milliseconds(5);
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  auto producer = client("pg");
  auto bystander = client("other-group");
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  const auto tx = protocol::uuid::make_v4();
  ASSERT_TRUE(request(c, prepare_frame(tx, "pg", {message("a", std::nullopt, "t")}, 1)).has_prepare_response());

  // No EndTx: after tx_timeout_ms the broker asks a connection of group "pg".
  ASSERT_TRUE(run_until([&] { return !producer->requests.empty(); }, 5s));
  const auto check = producer->requests.front();
  ASSERT_TRUE(check.has_check_tx()) << check.ShortDebugString();
  EXPECT_EQ(check.check_tx().txid(), std::string(tx.raw()));
  EXPECT_EQ(check.check_tx().check_number(), 1u);
  EXPECT_NE(check.correlation_id() & tx_coordinator::k_request_id_bit, 0u);
  EXPECT_TRUE(bystander->requests.empty()) << "only the transaction's producer group is asked";

  v1::Frame answer;
  answer.set_correlation_id(check.correlation_id());
  answer.mutable_check_tx_result()->set_txid(check.check_tx().txid());
  answer.mutable_check_tx_result()->set_outcome(v1::COMMIT);
  svc_->handle_answer(producer, std::move(answer));
  ASSERT_TRUE(run_until([&] { return request(c, tx_show_frame(tx)).tx_info().state() == v1::COMMITTED; }, 5s));
  auto shown = request(c, tx_show_frame(tx));
  EXPECT_EQ(shown.tx_info().resolved_by(), v1::RESOLVED_BY_CHECK);
  EXPECT_TRUE(producer->answers.empty()) << "an answer to a check gets no answer";
  // The producer's late EndTx ROLLBACK loses to the check's COMMIT.
  EXPECT_EQ(request(c, end_tx_frame(tx, v1::ROLLBACK)).error().code(), v1::TX_ALREADY_RESOLVED);
}

}  // namespace
}  // namespace txmq::broker::test
