// Transactions of docs/semantics.md §3 against the real broker binary, read-process-write: a transaction
// that publishes to one topic and acks a delivery of another, the ack applied with COMMIT,
// durable, and refused when the delivery was acked elsewhere first.
// Part of the broker_tx_test executable (see broker_tx_test.cc).

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "broker_process.h"
#include "eventually.h"
#include "raw_client.h"
#include "tx_requests.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;

// Read-process-write: consume from "in", publish to "out" in a transaction carrying the ack.
class read_process_write : public ::testing::Test {
 protected:
  void SetUp() override {
    b_ = std::make_unique<broker_process>(std::vector<std::string>{"--retry-schedule", "100ms"});
    b_->start();
    c_ = std::make_unique<raw_client>(b_->port());
    c_->hello("worker");
    auto in = make_message("input");
    ASSERT_TRUE(c_->request(produce_frame("in", {in})).has_produce_response());
    auto got = fetch(*c_, "g", "in", 1, 1000, 1000);
    ASSERT_EQ(got.size(), 1u);
    consumed_ = got[0];
    tx_ = new_txid();
    out_ = tx_message("out", "output");
    auto f = prepare_frame(tx_, "pg", {out_});
    f.mutable_prepare()->set_ack_group("g");
    auto* ref = f.mutable_prepare()->add_acks();
    ref->set_topic(consumed_.topic());
    ref->set_partition(consumed_.partition());
    ref->set_offset(consumed_.offset());
    auto r = c_->request(f);
    ASSERT_TRUE(r.has_prepare_response()) << r.ShortDebugString();
    EXPECT_EQ(show(*c_, tx_).acks(), 1u);
  }

  std::unique_ptr<broker_process> b_;
  std::unique_ptr<raw_client> c_;
  v1::Message consumed_;
  v1::Message out_;
  std::string tx_;
};

TEST_F(read_process_write, commit_acks_the_consumed_message_and_publishes_the_new_one) {
  auto r = c_->request(end_tx_frame(tx_, v1::COMMIT));
  ASSERT_TRUE(r.has_end_tx_response()) << r.ShortDebugString();
  // Past the consumed message's deadline (1 s) and retry (100 ms): it never comes back.
  EXPECT_TRUE(fetch(*c_, "g", "in", 10, 2000).empty());
  auto out = fetch(*c_, "downstream", "out", 10, 1000);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].id(), out_.id());
  // The ack was durable in the commit write, not only in memory.
  ASSERT_EQ(b_->stop(), 0);
  b_->start();
  c_ = std::make_unique<raw_client>(b_->port());
  c_->hello();
  EXPECT_TRUE(fetch(*c_, "g", "in", 10, 500).empty());
  // The same delivery cannot be acked by a later transaction.
  auto f = prepare_frame(new_txid(), "pg", {tx_message("out", "again")});
  f.mutable_prepare()->set_ack_group("g");
  auto* ref = f.mutable_prepare()->add_acks();
  ref->set_topic(consumed_.topic());
  ref->set_partition(consumed_.partition());
  ref->set_offset(consumed_.offset());
  auto again = c_->request(f);
  ASSERT_TRUE(again.has_error()) << again.ShortDebugString();
  EXPECT_EQ(again.error().code(), v1::UNKNOWN_DELIVERY);
}

TEST_F(read_process_write, a_commit_after_the_delivery_was_acked_elsewhere_rolls_back) {
  // The delivery's deadline (1 s) passes, it goes out again and that delivery is acked: a late
  // COMMIT would publish the transformation a second time.
  std::vector<v1::Message> again;
  ASSERT_TRUE(eventually([&] {
    again = fetch(*c_, "g", "in", 1, 500, 5000);
    return !again.empty();
  }));
  ASSERT_EQ(again[0].offset(), consumed_.offset());
  v1::Frame ack;
  ack.mutable_ack()->set_group("g");
  auto* ref = ack.mutable_ack()->add_refs();
  ref->set_topic(again[0].topic());
  ref->set_partition(again[0].partition());
  ref->set_offset(again[0].offset());
  ASSERT_FALSE(c_->request(ack).has_error());

  auto r = c_->request(end_tx_frame(tx_, v1::COMMIT));
  ASSERT_TRUE(r.has_error()) << r.ShortDebugString();
  EXPECT_EQ(r.error().code(), v1::UNKNOWN_DELIVERY);
  EXPECT_NE(r.error().message().find("rolled back"), std::string::npos) << r.error().message();
  EXPECT_EQ(show(*c_, tx_).state(), v1::ROLLED_BACK);
  EXPECT_TRUE(fetch(*c_, "downstream", "out", 10, 300).empty());
}

TEST_F(read_process_write, rollback_leaves_the_consumed_message_to_be_redelivered) {
  auto r = c_->request(end_tx_frame(tx_, v1::ROLLBACK));
  ASSERT_TRUE(r.has_end_tx_response()) << r.ShortDebugString();
  auto again = fetch(*c_, "g", "in", 10, 5000);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].offset(), consumed_.offset());
  EXPECT_EQ(again[0].attempt(), 2u);
  EXPECT_TRUE(fetch(*c_, "downstream", "out", 10, 300).empty());
}


}  // namespace
}  // namespace txmq::test
