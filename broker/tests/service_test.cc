// The service's handlers on an in-memory store, through a recording responder: Produce and its
// dedupe, Fetch/Ack/Nack with redelivery, and the one check that Produce and Prepare share.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "handler_test_support.h"

namespace txmq::broker::test {
namespace {

class broker_service_test : public handler_test {};

TEST_F(broker_service_test, produce_answers_positions_and_a_repeated_id_answers_the_original_offset) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());

  auto first = message("one");
  auto second = message("two");
  auto r = request(c, produce_frame("t", {first, second}));
  ASSERT_TRUE(r.has_produce_response()) << r.ShortDebugString();
  ASSERT_EQ(r.produce_response().positions_size(), 2);
  EXPECT_EQ(r.produce_response().positions(0).offset(), 0u);
  EXPECT_EQ(r.produce_response().positions(1).offset(), 1u);
  EXPECT_FALSE(r.produce_response().positions(0).duplicate());

  // A retry carries the same id: the original offset, nothing stored again.
  auto again = request(c, produce_frame("t", {second}));
  ASSERT_TRUE(again.has_produce_response()) << again.ShortDebugString();
  ASSERT_EQ(again.produce_response().positions_size(), 1);
  EXPECT_TRUE(again.produce_response().positions(0).duplicate());
  EXPECT_EQ(again.produce_response().positions(0).offset(), 1u);

  auto third = request(c, produce_frame("t", {message("three")}));
  ASSERT_TRUE(third.has_produce_response());
  EXPECT_FALSE(third.produce_response().positions(0).duplicate());
  EXPECT_EQ(third.produce_response().positions(0).offset(), 2u) << "the duplicate took no offset";
  EXPECT_EQ(store_->topic("t")->partitions[0].next_offset, 3u);
}

TEST_F(broker_service_test, produce_auto_creates_its_topic_and_refuses_bad_requests) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  auto r = request(c, produce_frame("fresh", {message("x")}));
  ASSERT_TRUE(r.has_produce_response()) << r.ShortDebugString();
  ASSERT_TRUE(store_->topic("fresh"));
  EXPECT_EQ(store_->topic("fresh")->partitions.size(), settings.default_partitions);

  EXPECT_EQ(request(c, produce_frame("fresh", {})).error().code(), v1::INVALID_ARGUMENT);
  EXPECT_EQ(request(c, produce_frame("bad topic", {message("x")})).error().code(), v1::INVALID_ARGUMENT);
}

// The broker's retention and retention_bytes reach the topics created without their own: by
// CreateTopic, and (through the store's options, as broker.cc sets them) by a first produce.
TEST_F(broker_service_test, topics_get_the_default_retention_unless_they_name_their_own) {
  settings.default_retention_ms = 3'600'000;
  settings.default_retention_bytes = 1u << 20;
  store_options.auto_create_retention_ms = 3'600'000;
  store_options.auto_create_retention_bytes = 1u << 20;
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  auto made = request(c, create_topic_frame("plain", 1));
  ASSERT_TRUE(made.has_topic_info()) << made.ShortDebugString();
  EXPECT_EQ(made.topic_info().retention_ms(), 3'600'000);
  EXPECT_EQ(made.topic_info().retention_bytes(), 1u << 20);
  v1::Frame own = create_topic_frame("own", 1);
  own.mutable_create_topic()->set_retention_bytes(4096);
  EXPECT_EQ(request(c, std::move(own)).topic_info().retention_bytes(), 4096u);
  ASSERT_TRUE(request(c, produce_frame("auto", {message("x")})).has_produce_response());
  ASSERT_TRUE(store_->topic("auto"));
  EXPECT_EQ(store_->topic("auto")->config.retention_ms, 3'600'000);
  EXPECT_EQ(store_->topic("auto")->config.retention_bytes, 1u << 20);
}

TEST_F(broker_service_test, fetch_ack_and_nack_redeliver_with_the_next_attempt) {
  settings.delivery.retry_schedule = {std::chrono::milliseconds(1)};
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  ASSERT_TRUE(request(c, produce_frame("t", {message("a"), message("b")})).has_produce_response());

  auto fetched = request(c, fetch_frame("g", "t"));
  ASSERT_TRUE(fetched.has_fetch_response()) << fetched.ShortDebugString();
  ASSERT_EQ(fetched.fetch_response().deliveries_size(), 2);
  const auto a = fetched.fetch_response().deliveries(0).message();
  const auto b = fetched.fetch_response().deliveries(1).message();
  EXPECT_EQ(a.body(), "a");
  EXPECT_EQ(a.attempt(), 1u);
  EXPECT_EQ(b.attempt(), 1u);

  auto acked = request(c, ack_frame("g", a));
  ASSERT_TRUE(acked.has_delivery_results()) << acked.ShortDebugString();
  EXPECT_EQ(acked.delivery_results().results(0), v1::ERROR_CODE_UNSPECIFIED);
  auto nacked = request(c, nack_frame("g", b, 1));
  ASSERT_TRUE(nacked.has_delivery_results());
  EXPECT_EQ(nacked.delivery_results().results(0), v1::ERROR_CODE_UNSPECIFIED);

  // A long poll gets the nacked message again, attempt 2; the acked one never comes back.
  auto again = request(c, fetch_frame("g", "t", 5000));
  ASSERT_TRUE(again.has_fetch_response()) << again.ShortDebugString();
  ASSERT_EQ(again.fetch_response().deliveries_size(), 1);
  const auto b2 = again.fetch_response().deliveries(0).message();
  EXPECT_EQ(b2.body(), "b");
  EXPECT_EQ(b2.offset(), b.offset());
  EXPECT_EQ(b2.attempt(), 2u);

  // An ack naming the first delivery does not settle the second; one naming it does.
  auto stale = request(c, ack_frame("g", b));
  EXPECT_EQ(stale.delivery_results().results(0), v1::UNKNOWN_DELIVERY);
  auto fresh = request(c, ack_frame("g", b2));
  EXPECT_EQ(fresh.delivery_results().results(0), v1::ERROR_CODE_UNSPECIFIED);
  auto empty = request(c, fetch_frame("g", "t"));
  ASSERT_TRUE(empty.has_fetch_response());
  EXPECT_EQ(empty.fetch_response().deliveries_size(), 0);
  // Both settled: the group's ack floor is past them, nothing in flight or waiting.
  v1::Frame describe;
  describe.mutable_describe_group()->set_group("g");
  auto info = request(c, std::move(describe));
  ASSERT_EQ(info.group_info().partitions_size(), 1) << info.ShortDebugString();
  EXPECT_EQ(info.group_info().partitions(0).acked(), 2u);
  EXPECT_EQ(info.group_info().partitions(0).in_flight(), 0u);
  EXPECT_EQ(info.group_info().partitions(0).waiting(), 0u);
}

TEST_F(broker_service_test, a_parked_long_poll_is_answered_by_the_next_produce) {
  settings.tick = 1h;  // no tick serves the poll: only the produce can
  ASSERT_NO_FATAL_FAILURE(start());
  auto consumer = client();
  auto producer = client();
  ASSERT_TRUE(request(producer, create_topic_frame("t", 1)).has_topic_info());
  auto poll = fetch_frame("g", "t", 10'000);
  poll.set_correlation_id(7);
  svc_->handle(consumer, std::move(poll));
  // Parked: the group exists once its creation is written, and nothing is answered.
  ASSERT_TRUE(run_until([&] { return !store_->groups().empty(); }));
  EXPECT_FALSE(consumer->answer(7));
  ASSERT_TRUE(request(producer, produce_frame("t", {message("late")})).has_produce_response());
  ASSERT_TRUE(run_until([&] { return consumer->answer(7).has_value(); }, 5s));
  ASSERT_EQ(consumer->answer(7)->fetch_response().deliveries_size(), 1);
  EXPECT_EQ(consumer->answer(7)->fetch_response().deliveries(0).message().body(), "late");
}

// Produce and Prepare store messages under one check (check_messages): the same bad messages
// get the same error code from both.
TEST_F(broker_service_test, produce_and_prepare_refuse_the_same_messages) {
  settings.max_message_bytes = 100;
  settings.max_topics = 2;
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  ASSERT_TRUE(request(c, create_topic_frame("u", 1)).has_topic_info());

  auto no_id = message("x", std::nullopt, "t");
  no_id.clear_id();
  struct bad_case {
    const char* what;
    std::string topic;
    std::vector<v1::Message> messages;
    v1::ErrorCode code;
  };
  const std::vector<bad_case> cases = {
      {"no messages", "t", {}, v1::INVALID_ARGUMENT},
      {"an id that is not 16 bytes", "t", {message("ok", std::nullopt, "t"), no_id}, v1::INVALID_ARGUMENT},
      {"a topic name with a space", "bad topic", {message("x", std::nullopt, "bad topic")}, v1::INVALID_ARGUMENT},
      {"key and body above max_message_bytes", "t", {message(std::string(90, 'x'), std::string(20, 'k'), "t")},
       v1::MESSAGE_TOO_LARGE},
      {"a new topic beyond max_topics", "v", {message("x", std::nullopt, "v")}, v1::LIMIT_EXCEEDED},
  };
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.what);
    auto produced = request(c, produce_frame(bad.topic, bad.messages));
    ASSERT_TRUE(produced.has_error()) << produced.ShortDebugString();
    EXPECT_EQ(produced.error().code(), bad.code) << produced.error().message();
    auto prepared = request(c, prepare_frame(protocol::uuid::make_v4(), "pg", bad.messages));
    ASSERT_TRUE(prepared.has_error()) << prepared.ShortDebugString();
    EXPECT_EQ(prepared.error().code(), bad.code) << prepared.error().message();
  }
  // Nothing of it was stored.
  EXPECT_EQ(store_->topics().size(), 2u);
  EXPECT_EQ(store_->topic("t")->partitions[0].next_offset, 0u);
}

TEST_F(broker_service_test, without_auto_create_produce_and_prepare_both_need_the_topic) {
  settings.auto_create_topics = false;
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  auto produced = request(c, produce_frame("missing", {message("x")}));
  EXPECT_EQ(produced.error().code(), v1::UNKNOWN_TOPIC);
  auto prepared =
      request(c, prepare_frame(protocol::uuid::make_v4(), "pg", {message("x", std::nullopt, "missing")}));
  EXPECT_EQ(prepared.error().code(), v1::UNKNOWN_TOPIC);
  EXPECT_EQ(produced.error().message(), prepared.error().message());
}

}  // namespace
}  // namespace txmq::broker::test
