// Bad input against the real broker: each gets a typed error; protocol violations close only
// that connection; the broker keeps serving every other client and loses nothing.

#include <gtest/gtest.h>

#include "broker_process.h"
#include "raw_client.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;

class broker_protocol_test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    broker_ = new broker_process({"--auto-create-topics", "false", "--max-message-bytes", "1024",
                                  "--max-frame-bytes", "1MiB"});
    broker_->start();
    raw_client admin(broker_->port());
    admin.hello();
    v1::Frame f;
    f.mutable_create_topic()->set_name("known");
    f.mutable_create_topic()->set_partitions(2);
    auto r = admin.request(f);
    ASSERT_TRUE(r.has_topic_info()) << r.ShortDebugString();
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(broker_->stop(), 0) << broker_->log();
    delete broker_;
  }

  // After every test: a well-behaved client is still served, and the broker is alive.
  void TearDown() override {
    raw_client c(broker_->port());
    c.hello();
    auto r = c.request(produce_frame("known", {make_message("still-alive")}));
    EXPECT_TRUE(r.has_produce_response()) << "broker stopped serving: " << r.ShortDebugString();
  }

  static std::uint16_t port() { return broker_->port(); }
  static broker_process* broker_;
};

broker_process* broker_protocol_test::broker_ = nullptr;

TEST_F(broker_protocol_test, garbage_bytes_get_frame_malformed_and_a_close) {
  raw_client c(port());
  c.hello();
  c.send_bytes(std::string("\x00\x00\x00\x08\xff\xff\xff\xff\xff\xff\xff\xff", 12));
  auto f = c.receive();
  ASSERT_TRUE(f && f->has_error());
  EXPECT_EQ(f->error().code(), v1::FRAME_MALFORMED);
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(broker_protocol_test, a_length_over_the_limit_is_refused_before_allocating) {
  raw_client c(port());
  c.hello();
  c.send_bytes(std::string("\x7f\xff\xff\xff", 4));  // 2 GiB announced, nothing sent
  auto f = c.receive();
  ASSERT_TRUE(f && f->has_error());
  EXPECT_EQ(f->error().code(), v1::FRAME_TOO_LARGE);
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(broker_protocol_test, before_hello_the_limit_is_64_kib) {
  raw_client c(port());
  c.send_bytes(std::string("\x00\x01\x00\x01", 4));  // 65537 bytes
  auto f = c.receive();
  ASSERT_TRUE(f && f->has_error());
  EXPECT_EQ(f->error().code(), v1::FRAME_TOO_LARGE);
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(broker_protocol_test, zero_length_frame_is_malformed) {
  raw_client c(port());
  c.hello();
  c.send_bytes(std::string("\x00\x00\x00\x00", 4));
  auto f = c.receive();
  ASSERT_TRUE(f && f->has_error());
  EXPECT_EQ(f->error().code(), v1::FRAME_MALFORMED);
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(broker_protocol_test, a_request_before_hello_is_refused) {
  raw_client c(port());
  c.send(produce_frame("known", {make_message("x")}));
  auto f = c.receive();
  ASSERT_TRUE(f && f->has_error());
  EXPECT_EQ(f->error().code(), v1::HELLO_REQUIRED);
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(broker_protocol_test, an_unsupported_protocol_version_is_refused) {
  raw_client c(port());
  v1::Frame f;
  f.mutable_hello()->set_protocol_version(99);
  auto r = c.request(f);
  ASSERT_TRUE(r.has_error());
  EXPECT_EQ(r.error().code(), v1::UNSUPPORTED_VERSION);
}

TEST_F(broker_protocol_test, an_unknown_request_type_gets_unknown_request_and_the_connection_stays) {
  raw_client c(port());
  c.hello();
  // Field 1000 of Frame: a body type from a newer client.
  std::string body = "\x08\x05";  // correlation_id 5
  body += std::string("\xc2\x3e\x00", 3);  // field 1000, length-delimited, empty
  std::string bytes = {0, 0, 0, static_cast<char>(body.size())};
  c.send_bytes(bytes + body);
  auto f = c.receive();
  ASSERT_TRUE(f && f->has_error()) << (f ? f->ShortDebugString() : "nothing");
  EXPECT_EQ(f->correlation_id(), 5u);
  EXPECT_EQ(f->error().code(), v1::UNKNOWN_REQUEST);
  auto r = c.request(produce_frame("known", {make_message("after")}));
  EXPECT_TRUE(r.has_produce_response());
}

TEST_F(broker_protocol_test, an_answer_type_from_a_client_gets_unknown_request_and_the_connection_stays) {
  raw_client c(port());
  c.hello();
  v1::Frame f;
  f.mutable_produce_response();
  auto r = c.request(f);
  ASSERT_TRUE(r.has_error()) << r.ShortDebugString();
  EXPECT_EQ(r.error().code(), v1::UNKNOWN_REQUEST);
  EXPECT_TRUE(c.request(produce_frame("known", {make_message("after")})).has_produce_response());
}

TEST_F(broker_protocol_test, a_request_with_correlation_id_0_gets_invalid_argument_with_id_0_and_a_close) {
  raw_client c(port());
  c.hello();
  std::string body;
  v1::Frame f = produce_frame("known", {make_message("zero")});
  f.set_correlation_id(0);
  ASSERT_TRUE(f.SerializeToString(&body));
  const auto n = static_cast<std::uint32_t>(body.size());
  c.send_bytes(std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                           static_cast<char>(n)} + body);
  auto answer = c.receive();
  ASSERT_TRUE(answer && answer->has_error()) << (answer ? answer->ShortDebugString() : "nothing");
  EXPECT_EQ(answer->correlation_id(), 0u);
  EXPECT_EQ(answer->error().code(), v1::INVALID_ARGUMENT);
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(broker_protocol_test, a_second_hello_gets_invalid_argument_and_the_connection_stays) {
  raw_client c(port());
  c.hello("first");
  v1::Frame f;
  f.mutable_hello()->set_protocol_version(1);
  f.mutable_hello()->set_client_id("second");
  auto r = c.request(f);
  ASSERT_TRUE(r.has_error()) << r.ShortDebugString();
  EXPECT_EQ(r.error().code(), v1::INVALID_ARGUMENT);
  EXPECT_TRUE(c.request(produce_frame("known", {make_message("after")})).has_produce_response());
}

TEST_F(broker_protocol_test, a_message_naming_another_topic_than_its_produce_request_is_refused) {
  raw_client c(port());
  c.hello();
  auto m = make_message("elsewhere");
  m.set_topic("other");
  auto r = c.request(produce_frame("known", {m}));
  ASSERT_TRUE(r.has_error()) << r.ShortDebugString();
  EXPECT_EQ(r.error().code(), v1::INVALID_ARGUMENT);
  EXPECT_NE(r.error().message().find("'other'"), std::string::npos) << r.error().message();
  m.set_topic("known");  // equal: accepted
  EXPECT_TRUE(c.request(produce_frame("known", {m})).has_produce_response());
}

TEST_F(broker_protocol_test, a_message_over_max_message_bytes_is_refused) {
  raw_client c(port());
  c.hello();
  auto r = c.request(produce_frame("known", {make_message(std::string(2000, 'x'))}));
  ASSERT_TRUE(r.has_error());
  EXPECT_EQ(r.error().code(), v1::MESSAGE_TOO_LARGE);
  EXPECT_NE(r.error().message().find("max_message_bytes"), std::string::npos) << r.error().message();
}

TEST_F(broker_protocol_test, produce_to_an_unknown_topic_with_auto_create_off_is_refused) {
  raw_client c(port());
  c.hello();
  auto r = c.request(produce_frame("nope", {make_message("x")}));
  ASSERT_TRUE(r.has_error());
  EXPECT_EQ(r.error().code(), v1::UNKNOWN_TOPIC);
}

TEST_F(broker_protocol_test, a_message_without_a_proper_id_is_refused) {
  raw_client c(port());
  c.hello();
  auto m = make_message("x");
  m.set_id("short");
  auto r = c.request(produce_frame("known", {m}));
  ASSERT_TRUE(r.has_error());
  EXPECT_EQ(r.error().code(), v1::INVALID_ARGUMENT);
}

TEST_F(broker_protocol_test, ack_of_an_unknown_delivery_is_refused_per_ref) {
  raw_client c(port());
  c.hello();
  // The group exists after a fetch.
  auto fetched = c.request(fetch_frame("acker", "known", 1, 0));
  ASSERT_TRUE(fetched.has_fetch_response()) << fetched.ShortDebugString();
  v1::Message ghost;
  ghost.set_topic("known");
  ghost.set_partition(1);
  ghost.set_offset(999999);
  auto r = c.request(ack_frame("acker", ghost));
  ASSERT_TRUE(r.has_delivery_results()) << r.ShortDebugString();
  ASSERT_EQ(r.delivery_results().results_size(), 1);
  EXPECT_EQ(r.delivery_results().results(0), v1::UNKNOWN_DELIVERY);
  auto unknown_group = c.request(ack_frame("no-such-group", ghost));
  ASSERT_TRUE(unknown_group.has_error());
  EXPECT_EQ(unknown_group.error().code(), v1::UNKNOWN_GROUP);
}

TEST_F(broker_protocol_test, empty_and_too_long_group_names_are_refused) {
  raw_client c(port());
  c.hello();
  for (const std::string& name : {std::string(), std::string(300, 'g'), std::string("has space")}) {
    auto r = c.request(fetch_frame(name, "known", 1, 0));
    ASSERT_TRUE(r.has_error()) << "group '" << name << "'";
    EXPECT_EQ(r.error().code(), v1::INVALID_ARGUMENT);
  }
}

TEST_F(broker_protocol_test, many_bad_clients_do_not_disturb_a_good_one) {
  raw_client good(port());
  good.hello();
  for (int i = 0; i < 50; ++i) {
    raw_client bad(port());
    bad.send_bytes(std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    auto r = good.request(produce_frame("known", {make_message("m" + std::to_string(i))}));
    ASSERT_TRUE(r.has_produce_response()) << "round " << i;
  }
}

}  // namespace
}  // namespace txmq::test
