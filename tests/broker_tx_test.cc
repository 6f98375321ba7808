// Transactions of docs/semantics.md §3 against the real broker binary, Prepare and EndTx: commit makes
// messages visible (a parked long poll included) and rollback never does, a transaction across
// topics becomes visible at once, EndTx is idempotent and a contrary one is refused, Prepare is
// validated like Produce.
// The check-back is in broker_tx_check_test.cc and acks carried by a transaction in
// broker_tx_ack_test.cc; the three make one test executable, broker_tx_test.

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "broker_process.h"
#include "raw_client.h"
#include "tx_requests.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;

TEST(broker_tx_test, commit_makes_messages_visible_and_rollback_never_does) {
  broker_process b;
  b.start();
  raw_client c(b.port());
  c.hello();
  const auto t1 = new_txid();
  auto m1 = tx_message("orders", "one");
  prepare(c, t1, "pg", {m1});
  EXPECT_TRUE(fetch(c, "g", "orders", 10, 0).empty()) << "a prepared message is invisible";
  EXPECT_EQ(partition_end_sum(c, "orders"), 0u) << "half messages are not stored messages";
  EXPECT_EQ(show(c, t1).state(), v1::PREPARED);

  // A parked long poll is answered by the commit.
  raw_client consumer(b.port());
  consumer.hello();
  const auto poll = consumer.send(fetch_frame("g", "orders", 10, 20'000));
  auto r = c.request(end_tx_frame(t1, v1::COMMIT));
  ASSERT_TRUE(r.has_end_tx_response()) << r.ShortDebugString();
  EXPECT_EQ(r.end_tx_response().state(), v1::COMMITTED);
  EXPECT_FALSE(r.end_tx_response().already_resolved());
  ASSERT_EQ(r.end_tx_response().positions_size(), 1);
  const auto start = std::chrono::steady_clock::now();
  auto got = consumer.receive(10s);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->correlation_id(), poll);
  ASSERT_EQ(got->fetch_response().deliveries_size(), 1);
  const auto& delivered = got->fetch_response().deliveries(0).message();
  EXPECT_EQ(delivered.id(), m1.id());
  EXPECT_EQ(delivered.body(), "one");
  EXPECT_EQ(delivered.txid(), t1);
  EXPECT_EQ(delivered.offset(), r.end_tx_response().positions(0).offset());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);

  const auto t2 = new_txid();
  prepare(c, t2, "pg", {tx_message("orders", "two")});
  r = c.request(end_tx_frame(t2, v1::ROLLBACK));
  ASSERT_TRUE(r.has_end_tx_response()) << r.ShortDebugString();
  EXPECT_EQ(r.end_tx_response().state(), v1::ROLLED_BACK);
  EXPECT_EQ(r.end_tx_response().positions_size(), 0);
  EXPECT_TRUE(fetch(c, "g2", "orders", 10, 500).size() == 1) << "only the committed message";
  EXPECT_TRUE(fetch(c, "g", "orders", 10, 300).empty()) << "the rolled-back message never comes";
  auto info = show(c, t2);
  EXPECT_EQ(info.state(), v1::ROLLED_BACK);
  EXPECT_EQ(info.resolved_by(), v1::RESOLVED_BY_PRODUCER);
  EXPECT_EQ(info.producer_group(), "pg");
  EXPECT_GT(info.resolved_ms(), 0);

  const auto metrics = http_get(b.http_port(), "/metrics");
  EXPECT_NE(metrics.find("txmq_tx_committed_total{by=\"producer\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("txmq_tx_rolled_back_total{by=\"producer\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("txmq_tx_prepared 0"), std::string::npos);
  EXPECT_NE(metrics.find("txmq_tx_resolution_seconds_count 2"), std::string::npos);
}

TEST(broker_tx_test, a_transaction_across_topics_becomes_visible_at_once) {
  broker_process b;
  b.start();
  raw_client c(b.port());
  c.hello();
  const auto tx = new_txid();
  const std::vector<std::string> topics = {"a", "b", "c"};
  std::vector<v1::Message> messages;
  for (auto& t : topics) {
    messages.push_back(tx_message(t, t + "-1"));
    messages.push_back(tx_message(t, t + "-2"));
  }
  prepare(c, tx, "pg", messages);
  for (auto& t : topics) {
    EXPECT_EQ(partition_end_sum(c, t), 0u);
    EXPECT_TRUE(fetch(c, "g", t, 10, 0).empty());
  }
  auto r = c.request(end_tx_frame(tx, v1::COMMIT));
  ASSERT_TRUE(r.has_end_tx_response()) << r.ShortDebugString();
  EXPECT_EQ(r.end_tx_response().positions_size(), 6);
  // Everything is there as soon as the commit is answered: no topic lags behind another.
  for (auto& t : topics) EXPECT_EQ(partition_end_sum(c, t), 2u) << t;
  for (auto& t : topics) {
    std::set<std::string> bodies;
    for (auto& m : fetch(c, "g", t, 10, 0)) bodies.insert(m.body());
    EXPECT_EQ(bodies, (std::set<std::string>{t + "-1", t + "-2"}));
  }
  auto info = show(c, tx);
  EXPECT_EQ(info.messages(), 6u);
  EXPECT_EQ(std::vector<std::string>(info.topics().begin(), info.topics().end()), topics);
}

TEST(broker_tx_test, repeated_end_tx_is_idempotent_and_a_contrary_one_is_refused) {
  broker_process b;
  b.start();
  raw_client c(b.port());
  c.hello();
  const auto tx = new_txid();
  auto m = tx_message("t", "m");
  prepare(c, tx, "pg", {m});
  auto retry = c.request(prepare_frame(tx, "pg", {m}));
  ASSERT_TRUE(retry.has_prepare_response()) << retry.ShortDebugString();
  EXPECT_TRUE(retry.prepare_response().duplicate());

  auto first = c.request(end_tx_frame(tx, v1::COMMIT));
  ASSERT_TRUE(first.has_end_tx_response()) << first.ShortDebugString();
  auto again = c.request(end_tx_frame(tx, v1::COMMIT));
  ASSERT_TRUE(again.has_end_tx_response()) << again.ShortDebugString();
  EXPECT_EQ(again.end_tx_response().state(), v1::COMMITTED);
  EXPECT_TRUE(again.end_tx_response().already_resolved());
  ASSERT_EQ(again.end_tx_response().positions_size(), 1);
  EXPECT_EQ(again.end_tx_response().positions(0).offset(), first.end_tx_response().positions(0).offset());
  EXPECT_EQ(again.end_tx_response().positions(0).partition(), first.end_tx_response().positions(0).partition());

  auto contrary = c.request(end_tx_frame(tx, v1::ROLLBACK));
  ASSERT_TRUE(contrary.has_error()) << contrary.ShortDebugString();
  EXPECT_EQ(contrary.error().code(), v1::TX_ALREADY_RESOLVED);
  EXPECT_NE(contrary.error().message().find("committed"), std::string::npos) << contrary.error().message();
  auto by_operator = c.request(resolve_frame(tx, v1::ROLLBACK));
  ASSERT_TRUE(by_operator.has_error());
  EXPECT_EQ(by_operator.error().code(), v1::TX_ALREADY_RESOLVED);
  auto reuse = c.request(prepare_frame(tx, "pg", {tx_message("t", "again")}));
  ASSERT_TRUE(reuse.has_error());
  EXPECT_EQ(reuse.error().code(), v1::TX_ALREADY_RESOLVED);

  EXPECT_EQ(fetch(c, "g", "t", 10, 300).size(), 1u) << "committed once, whatever was repeated";
  EXPECT_EQ(partition_end_sum(c, "t"), 1u);

  auto unknown = c.request(end_tx_frame(new_txid(), v1::COMMIT));
  ASSERT_TRUE(unknown.has_error());
  EXPECT_EQ(unknown.error().code(), v1::UNKNOWN_TX);
  auto no_outcome = c.request(end_tx_frame(tx, v1::UNKNOWN));
  ASSERT_TRUE(no_outcome.has_error());
  EXPECT_EQ(no_outcome.error().code(), v1::INVALID_ARGUMENT);
}

TEST(broker_tx_test, prepare_is_validated_like_produce) {
  broker_process b({"--max-message-bytes", "1KiB", "--max-frame-bytes", "1MiB"});
  b.start();
  raw_client c(b.port());
  c.hello();
  auto code = [&](v1::Frame f) {
    auto r = c.request(std::move(f));
    EXPECT_TRUE(r.has_error()) << r.ShortDebugString();
    return r.error().code();
  };
  EXPECT_EQ(code(prepare_frame("short", "pg", {tx_message("t", "x")})), v1::INVALID_ARGUMENT);
  EXPECT_EQ(code(prepare_frame(std::string(16, '\0'), "pg", {tx_message("t", "x")})), v1::INVALID_ARGUMENT);
  EXPECT_EQ(code(prepare_frame(new_txid(), "", {tx_message("t", "x")})), v1::INVALID_ARGUMENT);
  EXPECT_EQ(code(prepare_frame(new_txid(), "pg", {})), v1::INVALID_ARGUMENT);
  EXPECT_EQ(code(prepare_frame(new_txid(), "pg", {tx_message("bad topic", "x")})), v1::INVALID_ARGUMENT);
  auto no_id = tx_message("t", "x");
  no_id.clear_id();
  EXPECT_EQ(code(prepare_frame(new_txid(), "pg", {no_id})), v1::INVALID_ARGUMENT);
  EXPECT_EQ(code(prepare_frame(new_txid(), "pg", {tx_message("t", std::string(2000, 'x'))})), v1::MESSAGE_TOO_LARGE);
  auto acks = prepare_frame(new_txid(), "pg", {tx_message("t", "x")});
  acks.mutable_prepare()->set_ack_group("nobody");
  auto* ref = acks.mutable_prepare()->add_acks();
  ref->set_topic("t");
  EXPECT_EQ(code(acks), v1::UNKNOWN_GROUP);
}

}  // namespace
}  // namespace txmq::test
