// Read-process-write in a cluster (issue 14, docs/cluster.md "Read-process-write"): a
// transaction's Ack or Nack, forwarded by its home leader, that finds its delivery no longer in
// flight is taken by the home leader as "settled by an earlier try of the same step". The input
// leader answers it so only once the partition's ISR holds every group change it wrote (the
// earlier try's included): the consumer groups ask the replication gate first. Before, such a
// retry was answered at once, though the earlier try had been answered NOT_ENOUGH_REPLICAS and
// its change might be on no follower (a failover then lost the ack: the input came again).
//
// consumer_groups on an in-memory store that logs group changes (cluster mode's), with a gate
// the test answers by hand.

#include <gtest/gtest.h>

#include <deque>

#include "admin_reads.h"
#include "groups/consumer_groups.h"
#include "handler_test_support.h"

namespace txmq::broker::test {
namespace {

class consumer_groups_tx_test : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::store_options o;
    o.in_memory = true;
    o.log_group_changes = true;
    auto s = storage::open_store(o);
    ASSERT_TRUE(s) << s.error().message;
    store_ = std::move(s.value());
    storage::topic_config tc;
    tc.name = "in";
    tc.partitions = 1;
    ASSERT_TRUE(storage::call_sync<storage::topic_info>([&](auto d) { store_->create_topic(tc, d); }));
    storage::append_request req;
    req.topic = "in";
    req.messages.push_back(message("input"));
    ASSERT_TRUE(storage::call_sync<storage::append_result>([&](auto d) { store_->append(req, d); }));
    reads_ = std::make_unique<admin_reads>(io_);
    groups_ = std::make_unique<consumer_groups>(io_, *store_, *reads_, consumer_group_settings{}, nullptr);
    groups_->set_replication_gate([this](std::vector<storage::group_change_ref> changes,
                                         std::function<void(result<void>)> done) {
      gated_.push_back({std::move(changes), std::move(done)});
    });
    ASSERT_TRUE(groups_->load());
  }
  void TearDown() override {
    if (groups_) groups_->stop();
    groups_.reset();
    reads_.reset();
    if (store_) store_->close();
    if (io_.stopped()) io_.restart();
    io_.poll();
  }

  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds deadline = 10s) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    while (!done()) {
      if (std::chrono::steady_clock::now() >= until) return false;
      if (io_.stopped()) io_.restart();
      io_.run_one_for(10ms);
    }
    return true;
  }

  v1::Message fetch_one() {
    v1::FetchRequest req;
    req.set_group("g");
    req.add_topics("in");
    const std::uint64_t corr = ++corr_;
    groups_->fetch(client_, corr, req);
    EXPECT_TRUE(run_until([&] { return client_->answer(corr).has_value(); }));
    auto a = client_->answer(corr);
    if (!a || !a->has_fetch_response() || a->fetch_response().deliveries_size() != 1) {
      ADD_FAILURE() << "no delivery: " << (a ? a->ShortDebugString() : "no answer");
      return {};
    }
    return a->fetch_response().deliveries(0).message();
  }

  // Sends a transaction's Ack of `m` (as a home leader would); returns its correlation id.
  std::uint64_t tx_ack(const v1::Message& m) {
    google::protobuf::RepeatedPtrField<v1::DeliveryRef> refs;
    *refs.Add() = ref_of(m);
    const std::uint64_t corr = ++corr_;
    groups_->settle(client_, corr, consumer_groups::settle_kind::ack, "g", refs, 0, txid_);
    return corr;
  }

  struct gate_call {
    std::vector<storage::group_change_ref> changes;
    std::function<void(result<void>)> done;
  };

  boost::asio::io_context io_;
  std::unique_ptr<storage::store> store_;
  std::unique_ptr<admin_reads> reads_;
  std::unique_ptr<consumer_groups> groups_;
  std::deque<gate_call> gated_;
  std::shared_ptr<recording_responder> client_ = std::make_shared<recording_responder>(1);
  std::uint64_t corr_ = 0;
  const std::string txid_ = std::string(16, 't');
};

TEST_F(consumer_groups_tx_test, a_retried_tx_ack_of_a_settled_delivery_waits_for_the_isr) {
  const auto m = fetch_one();
  ASSERT_FALSE(m.id().empty());
  // First try: applied here, written, then the gate: NOT_ENOUGH_REPLICAS (followers missing).
  const auto first = tx_ack(m);
  ASSERT_TRUE(run_until([&] { return !gated_.empty(); })) << "the applied ack waits for the ISR";
  ASSERT_EQ(gated_.front().changes.size(), 1u);
  const std::uint64_t ack_end = gated_.front().changes[0].end_seq;
  gated_.front().done(error(protocol::errc::not_enough_replicas, "ISR below min_insync_replicas"));
  gated_.pop_front();
  ASSERT_TRUE(run_until([&] { return client_->answer(first).has_value(); }));
  ASSERT_TRUE(client_->answer(first)->has_error());
  EXPECT_EQ(client_->answer(first)->error().code(), v1::NOT_ENOUGH_REPLICAS);

  // The home leader's retry: the delivery is no longer in flight (acked by the first try). Not
  // answered before the gate passes for everything written of the partition, the ack included.
  const auto retry = tx_ack(m);
  run_until([&] { return client_->answer(retry).has_value() || !gated_.empty(); }, 2s);
  EXPECT_FALSE(client_->answer(retry).has_value()) << "answered before the ISR held the earlier ack";
  ASSERT_EQ(gated_.size(), 1u);
  ASSERT_EQ(gated_.front().changes.size(), 1u);
  EXPECT_EQ(gated_.front().changes[0].topic, "in");
  EXPECT_GE(gated_.front().changes[0].end_seq, ack_end) << "the earlier try's change is covered";
  // Still not on the ISR: the retry fails retriably, and is never taken as done.
  gated_.front().done(error(protocol::errc::not_enough_replicas, "ISR below min_insync_replicas"));
  gated_.pop_front();
  ASSERT_TRUE(run_until([&] { return client_->answer(retry).has_value(); }));
  ASSERT_TRUE(client_->answer(retry)->has_error());
  EXPECT_EQ(client_->answer(retry)->error().code(), v1::NOT_ENOUGH_REPLICAS);

  // Once the ISR holds it: the delivery is answered as not in flight (the earlier try did it).
  const auto third = tx_ack(m);
  ASSERT_TRUE(run_until([&] { return !gated_.empty(); }));
  gated_.front().done(outcome::success());
  gated_.pop_front();
  ASSERT_TRUE(run_until([&] { return client_->answer(third).has_value(); }));
  const auto a = *client_->answer(third);
  ASSERT_TRUE(a.has_delivery_results()) << a.ShortDebugString();
  ASSERT_EQ(a.delivery_results().results_size(), 1);
  EXPECT_EQ(a.delivery_results().results(0), v1::UNKNOWN_DELIVERY);
}

TEST_F(consumer_groups_tx_test, a_consumers_own_ack_of_an_unknown_delivery_is_answered_at_once) {
  const auto m = fetch_one();
  ASSERT_FALSE(m.id().empty());
  v1::Message later = m;
  later.set_attempt(m.attempt() + 1);  // no such delivery
  google::protobuf::RepeatedPtrField<v1::DeliveryRef> refs;
  *refs.Add() = ref_of(later);
  const std::uint64_t corr = ++corr_;
  groups_->settle(client_, corr, consumer_groups::settle_kind::ack, "g", refs, 0);
  ASSERT_TRUE(run_until([&] { return client_->answer(corr).has_value(); }));
  EXPECT_TRUE(gated_.empty()) << "nothing written, nothing to wait for";
  EXPECT_EQ(client_->answer(corr)->delivery_results().results(0), v1::UNKNOWN_DELIVERY);
}

}  // namespace
}  // namespace txmq::broker::test
