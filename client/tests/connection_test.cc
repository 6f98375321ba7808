#include "txmq/client/connection.h"

#include <atomic>
#include <future>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "fake_broker.h"
#include "txmq/client/admin.h"

namespace txmq::client {
namespace {

using namespace std::chrono_literals;
using testing::fake_broker;

connection_options options_for(const fake_broker& broker) {
  connection_options o;
  o.address = broker.address();
  o.client_id = "connection-test";
  o.connect_timeout = 2s;
  o.request_timeout = 5s;
  o.reconnect_backoff_initial = 10ms;
  o.reconnect_backoff_max = 100ms;
  return o;
}

v1::Frame describe(const std::string& name) {
  v1::Frame f;
  f.mutable_describe_topic()->set_name(name);
  return f;
}

// Answers DescribeTopic with a TopicInfo of the same name.
void echo_topics(const std::shared_ptr<fake_broker::session>& s, const v1::Frame& f) {
  if (!f.has_describe_topic()) return;
  auto answer = testing::answer_to(f);
  answer.mutable_topic_info()->set_name(f.describe_topic().name());
  s->send(answer);
}

TEST(broker_address, parses_host_port_forms) {
  auto a = broker_address::parse("127.0.0.1:7878");
  ASSERT_TRUE(a);
  EXPECT_EQ(a.value().host, "127.0.0.1");
  EXPECT_EQ(a.value().port, 7878);
  auto b = broker_address::parse("[::1]:9000");
  ASSERT_TRUE(b);
  EXPECT_EQ(b.value().host, "::1");
  EXPECT_EQ(b.value().to_string(), "[::1]:9000");
  auto c = broker_address::parse("broker.internal:1");
  ASSERT_TRUE(c);
  EXPECT_EQ(c.value().host, "broker.internal");
  for (const char* bad : {"", "host", ":7878", "host:", "host:0", "host:65536", "host:12x", "::1:80", "[::1]80"}) {
    auto r = broker_address::parse(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_TRUE(r.error().is(errc::bad_address)) << bad;
    EXPECT_NE(r.error().message.find("HOST:PORT"), std::string::npos);
  }
}

TEST(connection, handshake_sends_hello_fields_and_reads_hello_ok) {
  fake_broker broker;
  auto o = options_for(broker);
  o.producer_group = "billing";
  o.auth_token = "secret";
  auto c = connection::connect(o);
  ASSERT_TRUE(c) << c.error();
  auto hellos = broker.hellos();
  ASSERT_EQ(hellos.size(), 1u);
  EXPECT_EQ(hellos[0].protocol_version(), 1u);
  EXPECT_EQ(hellos[0].client_id(), "connection-test");
  EXPECT_EQ(hellos[0].producer_group(), "billing");
  EXPECT_EQ(hellos[0].auth_token(), "secret");
  auto info = c.value()->server();
  ASSERT_TRUE(info);
  EXPECT_EQ(info->broker_id, "fake");
  EXPECT_EQ(info->max_message_bytes, 4u << 20);
  EXPECT_TRUE(c.value()->is_connected());
  EXPECT_EQ(c.value()->connects(), 1u);
}

TEST(connection, handshake_refusal_keeps_code_and_text) {
  fake_broker broker;
  v1::Error e;
  e.set_code(v1::NOT_AUTHENTICATED);
  e.set_message("token 'x' is not known; ask an operator for a token");
  broker.set_hello_error(e);
  auto o = options_for(broker);
  auto c = connection::connect(o);
  ASSERT_FALSE(c);
  EXPECT_TRUE(c.error().is(protocol::errc::not_authenticated));
  EXPECT_EQ(c.error().message, e.message());
  EXPECT_FALSE(c.error().retriable());
}

TEST(connection, connect_to_nothing_fails_with_not_connected) {
  std::uint16_t port;
  {
    fake_broker gone;
    port = gone.port();
  }
  connection_options o;
  o.address = "127.0.0.1:" + std::to_string(port);
  o.connect_timeout = 300ms;
  o.reconnect_backoff_initial = 10ms;
  auto c = connection::connect(o);
  ASSERT_FALSE(c);
  EXPECT_TRUE(c.error().is(errc::not_connected)) << c.error();
  EXPECT_TRUE(c.error().retriable());
  EXPECT_NE(c.error().message.find("last attempt"), std::string::npos) << c.error();
}

TEST(connection, pipelined_requests_answered_out_of_order_reach_their_callers) {
  fake_broker broker;
  std::mutex mutex;
  std::vector<std::pair<std::shared_ptr<fake_broker::session>, v1::Frame>> held;
  broker.set_handler([&](const auto& s, const v1::Frame& f) {
    std::lock_guard lock(mutex);
    held.emplace_back(s, f);
  });
  auto c = connection::connect(options_for(broker)).value();

  constexpr int n = 20;
  std::vector<std::future<result<v1::Frame>>> answers;
  for (int i = 0; i < n; ++i) {
    auto p = std::make_shared<std::promise<result<v1::Frame>>>();
    answers.push_back(p->get_future());
    c->async_request(describe("t" + std::to_string(i)), [p](result<v1::Frame> r) { p->set_value(std::move(r)); });
  }
  // All n are on the wire before the first answer: they were pipelined.
  ASSERT_TRUE(broker.wait_until([&] { return broker.count(v1::Frame::kDescribeTopic) == n; }));
  std::set<std::uint64_t> ids;
  {
    std::lock_guard lock(mutex);
    for (auto it = held.rbegin(); it != held.rend(); ++it) {
      ids.insert(it->second.correlation_id());
      auto answer = testing::answer_to(it->second);
      answer.mutable_topic_info()->set_name(it->second.describe_topic().name());
      it->first->send(answer);
    }
  }
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(n));
  EXPECT_EQ(ids.count(0), 0u);
  for (int i = 0; i < n; ++i) {
    auto r = answers[i].get();
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(r.value().topic_info().name(), "t" + std::to_string(i));
  }
}

TEST(connection, error_frame_keeps_broker_code_and_text) {
  fake_broker broker;
  broker.set_handler([](const auto& s, const v1::Frame& f) {
    s->send(testing::error_answer(f, v1::TOPIC_EXISTS, "topic 'orders' exists (4 partitions)"));
  });
  auto c = connection::connect(options_for(broker)).value();
  admin a(c);
  auto r = a.create_topic({.name = "orders", .partitions = 4});
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(protocol::errc::topic_exists));
  EXPECT_EQ(r.error().message, "topic 'orders' exists (4 partitions)");
  EXPECT_EQ(r.error().to_string(), "TOPIC_EXISTS: topic 'orders' exists (4 partitions)");
  EXPECT_FALSE(r.error().retriable());
  EXPECT_THROW((void)r.value(), exception);
}

TEST(connection, unknown_error_code_is_treated_as_internal) {
  fake_broker broker;
  broker.set_handler([](const auto& s, const v1::Frame& f) {
    s->send(testing::error_answer(f, static_cast<v1::ErrorCode>(77), "from the future"));
  });
  auto c = connection::connect(options_for(broker)).value();
  auto r = c->request(describe("x"));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(protocol::errc::internal));
  EXPECT_NE(r.error().message.find("77"), std::string::npos);
  EXPECT_NE(r.error().message.find("from the future"), std::string::npos);
}

TEST(connection, lost_connection_fails_in_flight_requests_retriably_and_reconnects) {
  fake_broker broker;
  std::atomic<int> seen{0};
  broker.set_handler([&](const auto& s, const v1::Frame& f) {
    if (seen++ == 0) {
      s->close();  // the first request dies with its connection
      return;
    }
    echo_topics(s, f);
  });
  auto c = connection::connect(options_for(broker)).value();
  auto first = c->request(describe("a"));
  ASSERT_FALSE(first);
  EXPECT_TRUE(first.error().is(errc::connection_lost)) << first.error();
  EXPECT_TRUE(first.error().retriable());
  // The next request waits for the reconnect and goes through.
  auto second = c->request(describe("b"));
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(second.value().topic_info().name(), "b");
  EXPECT_EQ(c->connects(), 2u);
  EXPECT_EQ(broker.hellos().size(), 2u);
}

TEST(connection, frame_above_announced_limit_drops_the_connection) {
  fake_broker broker;
  v1::HelloOk ok;
  ok.set_protocol_version(1);
  ok.set_max_frame_bytes(1024);
  broker.set_hello_ok(ok);
  broker.set_handler([](const auto& s, const v1::Frame& f) {
    auto answer = testing::answer_to(f);
    answer.mutable_topic_info()->set_name(std::string(f.describe_topic().name() == "big" ? 5000 : 3, 'x'));
    s->send(answer);
  });
  auto c = connection::connect(options_for(broker)).value();
  auto r = c->request(describe("big"));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::connection_lost)) << r.error();
  EXPECT_NE(r.error().message.find("above the limit of 1024"), std::string::npos) << r.error();
  ASSERT_TRUE(broker.wait_until([&] { return broker.sessions_ended() >= 1; }));
  auto small = c->request(describe("small"));
  ASSERT_TRUE(small) << small.error();
  EXPECT_EQ(small.value().topic_info().name(), "xxx");
}

TEST(connection, request_above_broker_frame_limit_fails_before_sending) {
  fake_broker broker;
  v1::HelloOk ok;
  ok.set_protocol_version(1);
  ok.set_max_frame_bytes(1024);
  broker.set_hello_ok(ok);
  auto c = connection::connect(options_for(broker)).value();
  auto r = c->request(describe(std::string(2000, 'n')));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(protocol::errc::frame_too_large)) << r.error();
  EXPECT_EQ(broker.count(v1::Frame::kDescribeTopic), 0u);
}

TEST(connection, unanswered_request_times_out) {
  fake_broker broker;
  auto c = connection::connect(options_for(broker)).value();
  const auto start = std::chrono::steady_clock::now();
  auto r = c->request(describe("silent"), 100ms);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::timeout)) << r.error();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  EXPECT_NE(r.error().message.find("may have been applied"), std::string::npos);
}

// A session that ends while a write is in progress keeps the reason that ended it: the dead
// link found, not the "write failed: Operation canceled" of the write its closing aborted.
TEST(connection, a_session_ended_mid_write_keeps_the_first_reason) {
  fake_broker broker;
  // The broker takes the first request and then hangs: it reads nothing more (its only io
  // thread waits here until the test ends), so a large request stays half written.
  std::promise<void> release;
  auto released = release.get_future().share();
  broker.set_handler([released](const auto&, const v1::Frame&) { released.wait(); });
  struct releaser {
    std::promise<void>& p;
    ~releaser() { p.set_value(); }
  } release_at_end{release};
  auto o = options_for(broker);
  o.dead_link_timeout = 1s;
  auto c = connection::connect(o).value();
  // A times out after 300 ms, less than dead_link_timeout after the HelloOk: the client looks
  // again when the silence reaches 1 s and then ends the session as a dead link.
  std::promise<result<v1::Frame>> a;
  c->async_request(describe("a"), [&](result<v1::Frame> r) { a.set_value(std::move(r)); }, 300ms);
  auto ra = a.get_future().get();
  ASSERT_FALSE(ra);
  ASSERT_TRUE(ra.error().is(errc::timeout)) << ra.error();
  // B (three frames of ~8 MiB) cannot all go into the socket buffers of a peer that does not
  // read: its write is in progress when the session ends. Sent only now, so that the kernel's
  // own TCP_USER_TIMEOUT on the zero window comes at least 700 ms after the client's check.
  std::vector<std::future<result<v1::Frame>>> b;
  for (int i = 0; i < 3; ++i) {
    auto p = std::make_shared<std::promise<result<v1::Frame>>>();
    b.push_back(p->get_future());
    c->async_request(describe(std::string(8 * 1000 * 1000, 'b')), [p](result<v1::Frame> r) { p->set_value(std::move(r)); },
                     30s);
  }
  auto rb = b.front().get();
  ASSERT_FALSE(rb);
  EXPECT_TRUE(rb.error().is(errc::connection_lost)) << rb.error();
  EXPECT_NE(rb.error().message.find("no answer from"), std::string::npos) << rb.error();
  EXPECT_EQ(rb.error().message.find("Operation canceled"), std::string::npos) << rb.error();
  c->close();
}

TEST(connection, write_queue_is_bounded_while_disconnected) {
  std::uint16_t port;
  {
    fake_broker gone;
    port = gone.port();
  }
  connection_options o;
  o.address = "127.0.0.1:" + std::to_string(port);
  o.max_write_queue_bytes = 100;
  o.reconnect_backoff_initial = 10ms;
  connection c(o);
  std::promise<result<v1::Frame>> first_done;
  // The first waits long enough to still fill the queue when the second comes, however late.
  c.async_request(describe(std::string(80, 'a')), [&](result<v1::Frame> r) { first_done.set_value(std::move(r)); }, 1s);
  auto second = c.request(describe(std::string(80, 'b')), 300ms);
  ASSERT_FALSE(second);
  EXPECT_TRUE(second.error().is(errc::write_queue_full)) << second.error();
  auto first = first_done.get_future().get();
  ASSERT_FALSE(first);
  EXPECT_TRUE(first.error().is(errc::timeout)) << first.error();
  EXPECT_NE(first.error().message.find("not connected"), std::string::npos) << first.error();
}

TEST(connection, blocking_request_on_io_thread_is_refused) {
  fake_broker broker;
  broker.set_handler(echo_topics);
  auto c = connection::connect(options_for(broker)).value();
  std::promise<result<v1::Frame>> inner;
  c->async_request(describe("outer"), [&](result<v1::Frame>) { inner.set_value(c->request(describe("inner"))); });
  auto r = inner.get_future().get();
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::would_deadlock));
}

TEST(connection, broker_requests_go_to_the_handler_and_are_answered_with_their_id) {
  fake_broker broker;
  auto c = connection::connect(options_for(broker)).value();
  std::atomic<std::thread::id> handler_thread{};
  c->set_request_handler([&](const v1::Frame& f) -> std::optional<v1::Frame> {
    handler_thread = std::this_thread::get_id();
    v1::Frame answer;
    answer.mutable_topic_info()->set_name("answer to " + f.describe_topic().name());
    return answer;
  });
  // The broker sends a request of its own (a stand-in for CheckTx) with an id it chooses.
  std::shared_ptr<fake_broker::session> session;
  broker.set_handler([&](const auto& s, const v1::Frame& f) {
    if (f.has_describe_topic()) {
      v1::Frame request;
      request.set_correlation_id(4242);
      request.mutable_describe_topic()->set_name("check");
      s->send(request);
      auto answer = testing::answer_to(f);
      answer.mutable_topic_info()->set_name("ok");
      s->send(answer);
    }
  });
  ASSERT_TRUE(c->request(describe("go")));
  ASSERT_TRUE(broker.wait_until([&] { return broker.count(v1::Frame::kTopicInfo) == 1; }));
  auto answers = broker.received(v1::Frame::kTopicInfo);
  EXPECT_EQ(answers[0].correlation_id(), 4242u);
  EXPECT_EQ(answers[0].topic_info().name(), "answer to check");
  EXPECT_NE(handler_thread.load(), std::thread::id{});
}

TEST(connection, broker_request_without_handler_is_answered_unknown_request) {
  fake_broker broker;
  broker.set_handler([&](const auto& s, const v1::Frame& f) {
    if (f.has_describe_topic()) {
      v1::Frame request;
      request.set_correlation_id(7);
      request.mutable_fetch()->set_group("g");
      s->send(request);
    }
  });
  auto c = connection::connect(options_for(broker)).value();
  c->async_request(describe("go"), [](result<v1::Frame>) {}, 100ms);
  ASSERT_TRUE(broker.wait_until([&] { return broker.count(v1::Frame::kError) == 1; }));
  auto errors = broker.received(v1::Frame::kError);
  EXPECT_EQ(errors[0].correlation_id(), 7u);
  EXPECT_EQ(errors[0].error().code(), v1::UNKNOWN_REQUEST);
}

TEST(connection, close_fails_outstanding_requests_and_later_ones) {
  fake_broker broker;
  auto c = connection::connect(options_for(broker)).value();
  std::promise<result<v1::Frame>> pending;
  c->async_request(describe("never"), [&](result<v1::Frame> r) { pending.set_value(std::move(r)); });
  ASSERT_TRUE(broker.wait_until([&] { return broker.count(v1::Frame::kDescribeTopic) == 1; }));
  c->close();
  auto r = pending.get_future().get();
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::closed)) << r.error();
  auto later = c->request(describe("later"));
  ASSERT_FALSE(later);
  EXPECT_TRUE(later.error().is(errc::closed));
}

TEST(admin, helpers_send_their_request_and_return_the_response) {
  fake_broker broker;
  broker.set_handler([](const auto& s, const v1::Frame& f) {
    auto a = testing::answer_to(f);
    switch (f.body_case()) {
      case v1::Frame::kCreateTopic:
        a.mutable_topic_info()->set_name(f.create_topic().name());
        a.mutable_topic_info()->set_partitions(f.create_topic().partitions());
        break;
      case v1::Frame::kListTopics: a.mutable_list_topics_response()->add_topics()->set_name("t1"); break;
      case v1::Frame::kDescribeTopic: a.mutable_topic_info()->set_name(f.describe_topic().name()); break;
      case v1::Frame::kCreateGroup:
        a.mutable_group_info()->set_name(f.create_group().group());
        a.mutable_group_info()->add_topics(f.create_group().topic());
        break;
      case v1::Frame::kListGroups: a.mutable_list_groups_response()->add_groups()->set_name("g1"); break;
      case v1::Frame::kDescribeGroup: a.mutable_group_info()->set_name(f.describe_group().group()); break;
      case v1::Frame::kDlqList: a.mutable_dlq_list_response()->add_dead_letters()->set_attempts(f.dlq_list().limit()); break;
      case v1::Frame::kDlqRedrive: a.mutable_dlq_redrive_response()->set_redriven(3); break;
      default: a.mutable_error()->set_code(v1::UNKNOWN_REQUEST);
    }
    s->send(a);
  });
  admin a(connection::connect(options_for(broker)).value());
  auto t = a.create_topic({.name = "orders", .partitions = 8});
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t.value().partitions(), 8u);
  EXPECT_EQ(broker.received(v1::Frame::kCreateTopic).at(0).create_topic().name(), "orders");
  EXPECT_EQ(a.list_topics().value().topics(0).name(), "t1");
  EXPECT_EQ(a.describe_topic("orders").value().name(), "orders");
  auto g = a.create_group("billing", "orders", true);
  ASSERT_TRUE(g) << g.error();
  EXPECT_EQ(g.value().topics(0), "orders");
  EXPECT_TRUE(broker.received(v1::Frame::kCreateGroup).at(0).create_group().from_latest());
  EXPECT_EQ(a.list_groups().value().groups(0).name(), "g1");
  EXPECT_EQ(a.describe_group("billing").value().name(), "billing");
  EXPECT_EQ(a.dlq_list("billing", 5).value().dead_letters(0).attempts(), 5u);
  EXPECT_EQ(a.dlq_redrive("billing").value().redriven(), 3u);
}

TEST(admin, wrong_response_type_is_an_error) {
  fake_broker broker;
  broker.set_handler([](const auto& s, const v1::Frame& f) {
    auto a = testing::answer_to(f);
    a.mutable_dlq_redrive_response()->set_redriven(1);
    s->send(a);
  });
  admin a(connection::connect(options_for(broker)).value());
  auto r = a.describe_group("g");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::unexpected_response));
}

}  // namespace
}  // namespace txmq::client

namespace txmq::client {
namespace {

// Cluster mode's connections to one node (leader_router): a node that went away answers a
// request at once with a retriable not_connected, so the caller moves to the new leader instead
// of waiting out its request timeout on reconnects; back, it serves again.
TEST(connection, fail_while_unreachable_answers_at_once_when_the_node_is_gone) {
  auto broker = std::make_unique<fake_broker>();
  broker->set_handler(echo_topics);
  const auto port = broker->port();
  auto o = options_for(*broker);
  o.fail_while_unreachable = true;
  o.request_timeout = 20s;
  o.reconnect_backoff_initial = 50ms;
  o.reconnect_backoff_max = 200ms;
  auto c = connection::connect(o).value();
  ASSERT_TRUE(c->request(describe("a")));
  broker.reset();  // the node dies: its port refuses connections
  const auto start = std::chrono::steady_clock::now();
  auto r = c->request(describe("b"));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::not_connected) || r.error().is(errc::connection_lost)) << r.error();
  EXPECT_TRUE(r.error().retriable());
  EXPECT_LT(took, 5s) << "waited for the dead node instead of answering";
  // Later requests, while the node is down, fail at once too.
  const auto again = std::chrono::steady_clock::now();
  auto r2 = c->request(describe("c"));
  ASSERT_FALSE(r2);
  EXPECT_TRUE(r2.error().is(errc::not_connected)) << r2.error();
  EXPECT_LT(std::chrono::steady_clock::now() - again, 1s);
  // The node comes back on the same port: the connection serves again.
  fake_broker back(port);
  back.set_handler(echo_topics);
  bool served = false;
  for (int i = 0; i < 100 && !served; ++i) {
    served = c->request(describe("d")).has_value();
    if (!served) std::this_thread::sleep_for(50ms);  // between two looks, as tests/support/eventually.h
  }
  EXPECT_TRUE(served);
}

TEST(connection, by_default_a_request_waits_for_the_node_to_come_back) {
  std::uint16_t port;
  {
    fake_broker gone;
    port = gone.port();
  }
  connection_options o;
  o.address = "127.0.0.1:" + std::to_string(port);
  o.reconnect_backoff_initial = 10ms;
  o.reconnect_backoff_max = 50ms;
  connection c(o);
  auto r = c.request(describe("a"), 500ms);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::timeout)) << r.error();
}

}  // namespace
}  // namespace txmq::client
