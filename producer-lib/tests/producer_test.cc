// The producer against a fake broker: batching, limits, retries, ordering and routing all drive
// one producer class through one fake, so its tests are kept as one piece beside producer.cc.

#include "txmq/producer/producer.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "fake_broker.h"
#include "txmq/protocol/partitioner.h"

namespace txmq::producer {
namespace {

using namespace std::chrono_literals;
using testing::fake_broker;
using testing::fake_log;

producer_options options_for(const fake_broker& broker) {
  producer_options o;
  o.connection.address = broker.address();
  o.connection.client_id = "producer-test";
  o.connection.reconnect_backoff_initial = 10ms;
  o.connection.reconnect_backoff_max = 50ms;
  o.retry_backoff_initial = 10ms;
  o.retry_backoff_max = 50ms;
  o.delivery_timeout = 10s;
  return o;
}

// Answers every ProduceRequest from the log.
fake_broker::handler answer_from(fake_log& log) {
  return [&log](const auto& s, const v1::Frame& f) {
    if (!f.has_produce()) return;
    auto answer = testing::answer_to(f);
    *answer.mutable_produce_response() = log.append(f.produce());
    s->send(answer);
  };
}

outgoing_message msg(std::string topic, std::string body) {
  outgoing_message m;
  m.topic = std::move(topic);
  m.body = std::move(body);
  return m;
}

std::size_t messages_in(const std::vector<v1::Frame>& produces) {
  std::size_t n = 0;
  for (const auto& f : produces) n += static_cast<std::size_t>(f.produce().messages_size());
  return n;
}

TEST(producer, send_returns_the_position_and_carries_every_field) {
  fake_broker broker;
  fake_log log;
  broker.set_handler(answer_from(log));
  producer p(options_for(broker));
  auto id = protocol::uuid::make_v7();
  outgoing_message m = msg("orders", "hello");
  m.key = "customer-7";
  m.headers = {{"trace", "abc"}, {"kind", "created"}};
  m.id = id;
  m.deliver_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'900'000'000'000));
  auto r = p.send(m);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r.value().id, id);
  EXPECT_EQ(r.value().partition, protocol::partition_for_key("customer-7", 4));
  EXPECT_EQ(r.value().offset, 0u);
  EXPECT_FALSE(r.value().duplicate);
  auto stored = log.stored();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].id(), std::string(id.raw()));
  EXPECT_EQ(stored[0].topic(), "orders");
  EXPECT_TRUE(stored[0].has_key());
  EXPECT_EQ(stored[0].key(), "customer-7");
  EXPECT_EQ(stored[0].headers().at("trace"), "abc");
  EXPECT_EQ(stored[0].body(), "hello");
  EXPECT_EQ(stored[0].deliver_at_ms(), 1'900'000'000'000);
}

TEST(producer, makes_a_uuid_v7_when_no_id_is_given_and_no_key_stays_absent) {
  fake_broker broker;
  fake_log log;
  broker.set_handler(answer_from(log));
  producer p(options_for(broker));
  auto a = p.send(msg("t", "1"));
  auto b = p.send(msg("t", "2"));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a.value().id.version(), 7);
  EXPECT_LT(a.value().id, b.value().id);
  EXPECT_FALSE(log.stored().at(0).has_key());
}

TEST(producer, batching_merges_concurrent_sends_into_fewer_requests) {
  fake_broker broker;
  fake_log log;
  broker.set_handler(answer_from(log));
  auto o = options_for(broker);
  o.linger = 300ms;
  producer p(o);
  constexpr int n = 200;
  std::vector<std::future<client::result<send_result>>> results;
  std::vector<std::thread> threads;
  std::mutex mutex;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < n / 4; ++i) {
        auto f = p.async_send(msg("orders", std::to_string(t) + "-" + std::to_string(i)));
        std::lock_guard lock(mutex);
        results.push_back(std::move(f));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& f : results) ASSERT_TRUE(f.get());
  auto produces = broker.received(v1::Frame::kProduce);
  EXPECT_EQ(messages_in(produces), static_cast<std::size_t>(n));
  EXPECT_LE(produces.size(), 3u) << "200 sends within the linger should share a request or two";
}

TEST(producer, batches_are_cut_at_max_messages_and_by_topic) {
  fake_broker broker;
  fake_log log;
  broker.set_handler(answer_from(log));
  auto o = options_for(broker);
  o.linger = 10s;
  o.batch_max_messages = 10;
  producer p(o);
  std::vector<std::future<client::result<send_result>>> results;
  for (int i = 0; i < 35; ++i) results.push_back(p.async_send(msg("a", std::to_string(i))));
  results.push_back(p.async_send(msg("b", "other topic")));
  // Three full batches go at once; the rest lingers until flush.
  ASSERT_TRUE(broker.wait_until([&] { return broker.count(v1::Frame::kProduce) == 3; }));
  ASSERT_TRUE(p.flush(5s));
  for (auto& f : results) ASSERT_TRUE(f.get());
  auto produces = broker.received(v1::Frame::kProduce);
  ASSERT_EQ(produces.size(), 5u);
  std::map<std::string, std::vector<int>> sizes;
  for (const auto& f : produces) sizes[f.produce().topic()].push_back(f.produce().messages_size());
  EXPECT_EQ(sizes["a"], (std::vector<int>{10, 10, 10, 5}));
  EXPECT_EQ(sizes["b"], (std::vector<int>{1}));
  // In order within the topic.
  std::vector<std::string> bodies;
  for (const auto& f : produces) {
    for (const auto& m : f.produce().messages()) {
      if (m.topic() == "a") bodies.push_back(m.body());
    }
  }
  for (int i = 0; i < 35; ++i) EXPECT_EQ(bodies[i], std::to_string(i));
}

TEST(producer, batch_max_bytes_cuts_batches) {
  fake_broker broker;
  fake_log log;
  broker.set_handler(answer_from(log));
  auto o = options_for(broker);
  o.linger = 10s;
  o.batch_max_bytes = 3000;
  producer p(o);
  std::vector<std::future<client::result<send_result>>> results;
  for (int i = 0; i < 6; ++i) results.push_back(p.async_send(msg("a", std::string(1000, 'x'))));
  ASSERT_TRUE(p.flush(5s));
  for (auto& f : results) ASSERT_TRUE(f.get());
  auto produces = broker.received(v1::Frame::kProduce);
  EXPECT_GE(produces.size(), 3u);
  for (const auto& f : produces) EXPECT_LE(f.produce().messages_size(), 2);
}

// txmq-relay sets batch_max_bytes far above any frame limit and relies on this cut: a batch
// above the broker's max_frame_bytes would fail whole (frame_too_large, not retried).
TEST(producer, batches_stay_under_the_brokers_frame_limit) {
  fake_broker broker;
  fake_log log;
  broker.set_handler(answer_from(log));
  v1::HelloOk ok;
  ok.set_protocol_version(1);
  ok.set_max_frame_bytes(64 << 10);
  ok.set_max_message_bytes(32 << 10);
  broker.set_hello_ok(ok);
  auto o = options_for(broker);
  o.linger = 10s;
  o.batch_max_messages = 100000;
  o.batch_max_bytes = std::size_t{1} << 30;
  producer p(o);
  ASSERT_TRUE(p.conn()->wait_connected(5s));
  std::vector<std::future<client::result<send_result>>> results;
  for (int i = 0; i < 300; ++i) {
    auto m = msg("a-topic-with-a-longer-name-than-most", std::string(1000, 'x'));
    m.key = "key-" + std::to_string(i);
    m.headers = {{"h", "v"}};
    results.push_back(p.async_send(std::move(m)));
  }
  ASSERT_TRUE(p.flush(5s));
  for (auto& f : results) {
    auto r = f.get();
    EXPECT_TRUE(r) << r.error();
  }
  auto produces = broker.received(v1::Frame::kProduce);
  EXPECT_EQ(messages_in(produces), 300u);
  EXPECT_GE(produces.size(), 5u);  // 300 KB in frames of at most 64 KiB
  for (const auto& f : produces) EXPECT_LE(f.ByteSizeLong(), std::size_t{64} << 10);
}

TEST(producer, a_lone_message_waits_for_the_linger) {
  fake_broker broker;
  fake_log log;
  std::atomic<std::int64_t> arrived_ns{0};
  broker.set_handler([&](const auto& s, const v1::Frame& f) {
    arrived_ns = std::chrono::steady_clock::now().time_since_epoch().count();
    answer_from(log)(s, f);
  });
  auto o = options_for(broker);
  o.linger = 150ms;
  producer p(o);
  ASSERT_TRUE(p.conn()->wait_connected(5s));
  const auto start = std::chrono::steady_clock::now();
  auto r = p.send(msg("t", "x"));
  ASSERT_TRUE(r) << r.error();
  const auto waited = std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(arrived_ns.load())) - start;
  EXPECT_GE(waited, 140ms);
  EXPECT_LT(waited, 2s);
}

TEST(producer, send_now_sends_a_lingering_batch_at_once) {
  fake_broker broker;
  fake_log log;
  std::atomic<int> produces{0};
  broker.set_handler([&](const auto& s, const v1::Frame& f) {
    if (f.has_produce()) ++produces;
    answer_from(log)(s, f);
  });
  auto o = options_for(broker);
  o.linger = 60s;  // without send_now() the batch would wait a minute
  producer p(o);
  ASSERT_TRUE(p.conn()->wait_connected(5s));
  auto a = p.async_send(msg("t", "x"));
  auto b = p.async_send(msg("t", "y"));
  p.send_now();
  ASSERT_EQ(a.wait_for(10s), std::future_status::ready);
  ASSERT_EQ(b.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(a.get());
  EXPECT_TRUE(b.get());
  EXPECT_EQ(produces.load(), 1);  // both in the one batch that was lingering
}

TEST(producer, retry_after_connection_loss_keeps_the_same_ids) {
  fake_broker broker;
  fake_log log;
  std::atomic<int> produces{0};
  broker.set_handler([&](const auto& s, const v1::Frame& f) {
    if (!f.has_produce()) return;
    auto positions = log.append(f.produce());  // stored...
    if (produces++ == 0) {
      s->close();  // ...but the answer is lost with the connection
      return;
    }
    auto answer = testing::answer_to(f);
    *answer.mutable_produce_response() = positions;
    s->send(answer);
  });
  auto o = options_for(broker);
  o.linger = 50ms;
  producer p(o);
  auto a = p.async_send(msg("orders", "a"));
  auto b = p.async_send(msg("orders", "b"));
  auto ra = a.get();
  auto rb = b.get();
  ASSERT_TRUE(ra) << ra.error();
  ASSERT_TRUE(rb) << rb.error();
  auto sent = broker.received(v1::Frame::kProduce);
  ASSERT_EQ(sent.size(), 2u);
  ASSERT_EQ(sent[0].produce().messages_size(), 2);
  ASSERT_EQ(sent[1].produce().messages_size(), 2);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(sent[0].produce().messages(i).id(), sent[1].produce().messages(i).id());
  // The broker deduplicated the retry: stored once, answered with the original positions.
  EXPECT_EQ(log.stored().size(), 2u);
  EXPECT_TRUE(ra.value().duplicate);
  EXPECT_EQ(std::string(ra.value().id.raw()), sent[0].produce().messages(0).id());
  EXPECT_GE(p.conn()->connects(), 2u);
}

TEST(producer, retriable_broker_errors_are_retried) {
  fake_broker broker;
  fake_log log;
  std::atomic<int> produces{0};
  broker.set_handler([&](const auto& s, const v1::Frame& f) {
    if (!f.has_produce()) return;
    if (produces++ < 2) {
      s->send(testing::error_answer(f, produces == 1 ? v1::STORAGE_ERROR : v1::SHUTTING_DOWN, "try later"));
      return;
    }
    answer_from(log)(s, f);
  });
  producer p(options_for(broker));
  auto r = p.send(msg("t", "x"));
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(produces.load(), 3);
  EXPECT_EQ(log.stored().size(), 1u);
}

TEST(producer, non_retriable_errors_fail_at_once_with_the_broker_text) {
  fake_broker broker;
  broker.set_handler([&](const auto& s, const v1::Frame& f) {
    if (f.has_produce()) {
      s->send(testing::error_answer(f, v1::UNKNOWN_TOPIC, "no topic 'nope' and auto_create_topics is off; create it first"));
    }
  });
  producer p(options_for(broker));
  auto r = p.send(msg("nope", "x"));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(protocol::errc::unknown_topic));
  EXPECT_EQ(r.error().message, "no topic 'nope' and auto_create_topics is off; create it first");
  EXPECT_EQ(broker.count(v1::Frame::kProduce), 1u);
}

TEST(producer, gives_up_after_the_delivery_timeout_with_a_clear_error) {
  fake_broker broker;
  broker.set_handler([&](const auto& s, const v1::Frame& f) {
    if (f.has_produce()) s->send(testing::error_answer(f, v1::STORAGE_ERROR, "disk full on /data"));
  });
  auto o = options_for(broker);
  o.delivery_timeout = 300ms;
  producer p(o);
  const auto start = std::chrono::steady_clock::now();
  auto r = p.send(msg("t", "x"));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(client::errc::delivery_timeout)) << r.error();
  EXPECT_NE(r.error().message.find("300 ms"), std::string::npos) << r.error();
  EXPECT_NE(r.error().message.find("STORAGE_ERROR: disk full on /data"), std::string::npos) << r.error();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
  EXPECT_GE(broker.count(v1::Frame::kProduce), 2u);
}

TEST(producer, unanswered_requests_time_out_into_a_delivery_timeout) {
  fake_broker broker;  // never answers produce
  auto o = options_for(broker);
  o.delivery_timeout = 300ms;
  o.request_timeout = 100ms;
  producer p(o);
  auto r = p.send(msg("t", "x"));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(client::errc::delivery_timeout)) << r.error();
  EXPECT_NE(r.error().message.find("timeout"), std::string::npos) << r.error();
}

TEST(producer, in_flight_bound_is_respected) {
  fake_broker broker;
  fake_log log;
  std::mutex mutex;
  std::vector<std::pair<std::shared_ptr<fake_broker::session>, v1::Frame>> held;
  broker.set_handler([&](const auto& s, const v1::Frame& f) {
    if (!f.has_produce()) return;
    std::lock_guard lock(mutex);
    held.emplace_back(s, f);
  });
  auto o = options_for(broker);
  o.max_in_flight_messages = 5;
  o.max_in_flight_batches_per_topic = 0;  // the message bound alone is under test
  o.linger = 0ms;
  producer p(o);
  constexpr int n = 20;
  std::atomic<int> accepted{0};
  std::atomic<int> succeeded{0};
  std::thread sender([&] {
    for (int i = 0; i < n; ++i) {
      p.async_send(msg("t", std::to_string(i)), [&](client::result<send_result> r) {
        if (r) ++succeeded;
      });
      ++accepted;
    }
  });
  // Nothing is answered yet: exactly 5 are accepted, and the sixth call blocks.
  ASSERT_TRUE(broker.wait_until([&] { return messages_in(broker.received(v1::Frame::kProduce)) == 5 && accepted == 5; }));
  EXPECT_EQ(p.in_flight(), 5u);
  // Answer one request at a time; the broker never holds more than 5 unanswered messages.
  std::size_t max_unanswered = 0;
  std::size_t answered = 0;
  ASSERT_TRUE(broker.wait_until([&] {
    std::lock_guard lock(mutex);
    const std::size_t unanswered = messages_in(broker.received(v1::Frame::kProduce)) - answered;
    max_unanswered = std::max(max_unanswered, unanswered);
    for (auto& [s, f] : held) {
      auto answer = testing::answer_to(f);
      *answer.mutable_produce_response() = log.append(f.produce());
      answered += static_cast<std::size_t>(f.produce().messages_size());
      s->send(answer);
    }
    held.clear();
    return succeeded == n;
  }));
  sender.join();
  EXPECT_LE(max_unanswered, 5u);
  EXPECT_EQ(accepted.load(), n);
  EXPECT_EQ(log.stored().size(), static_cast<std::size_t>(n));
}

TEST(producer, waiting_for_room_is_bounded_by_the_delivery_timeout) {
  fake_broker broker;  // never answers
  auto o = options_for(broker);
  o.max_in_flight_messages = 1;
  o.delivery_timeout = 300ms;
  o.linger = 0ms;
  producer p(o);
  auto first = p.async_send(msg("t", "1"));
  const auto started = std::chrono::steady_clock::now();
  auto second = p.send(msg("t", "2"));
  const auto waited = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(second);
  EXPECT_TRUE(second.error().is(client::errc::delivery_timeout)) << second.error();
  // Usually it never got room ("no room ..."); when the first message's own timeout frees the
  // room a moment before the second's runs out, it is sent and expires unanswered instead.
  // Either way the wait ends with its delivery timeout.
  const bool no_room = second.error().message.find("no room") != std::string::npos;
  const bool unanswered = second.error().message.find("was not acknowledged") != std::string::npos;
  EXPECT_TRUE(no_room || unanswered) << second.error();
  EXPECT_LT(waited, 2s);
  EXPECT_FALSE(first.get());
}

TEST(producer, body_above_the_broker_limit_fails_without_a_request) {
  fake_broker broker;
  v1::HelloOk ok;
  ok.set_protocol_version(1);
  ok.set_max_frame_bytes(1 << 20);
  ok.set_max_message_bytes(100);
  broker.set_hello_ok(ok);
  producer p(options_for(broker));
  ASSERT_TRUE(p.conn()->wait_connected(5s));
  // check() answers the same at once (txmq-relay asks it before queueing a key's rows).
  EXPECT_TRUE(p.check(msg("t", std::string(100, 'x'))));
  auto checked = p.check(msg("t", std::string(200, 'x')));
  ASSERT_FALSE(checked);
  EXPECT_TRUE(checked.error().is(protocol::errc::message_too_large)) << checked.error();
  auto r = p.send(msg("t", std::string(200, 'x')));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(protocol::errc::message_too_large)) << r.error();
  EXPECT_EQ(r.error().message, checked.error().message);
  EXPECT_EQ(broker.count(v1::Frame::kProduce), 0u);
}

TEST(producer, close_flushes_and_later_sends_fail) {
  fake_broker broker;
  fake_log log;
  broker.set_handler(answer_from(log));
  auto o = options_for(broker);
  o.linger = 10s;
  producer p(o);
  auto f = p.async_send(msg("t", "lingering"));
  p.close();
  auto r = f.get();
  ASSERT_TRUE(r) << r.error();
  auto later = p.send(msg("t", "late"));
  ASSERT_FALSE(later);
  EXPECT_TRUE(later.error().is(client::errc::closed));
}

TEST(producer, one_batch_in_flight_per_topic_keeps_order_across_retries) {
  fake_broker broker;
  fake_log log;
  std::atomic<int> produces{0};
  broker.set_handler([&](const auto& s, const v1::Frame& f) {
    if (!f.has_produce()) return;
    if (produces++ == 0) {
      s->send(testing::error_answer(f, v1::INTERNAL, "hiccup"));
      return;
    }
    answer_from(log)(s, f);
  });
  auto o = options_for(broker);
  o.linger = 0ms;
  o.max_in_flight_batches_per_topic = 1;
  producer p(o);
  std::vector<std::future<client::result<send_result>>> results;
  for (int i = 0; i < 20; ++i) results.push_back(p.async_send(msg("t", std::to_string(i))));
  for (auto& f : results) ASSERT_TRUE(f.get());
  auto stored = log.stored();
  ASSERT_EQ(stored.size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(stored[i].body(), std::to_string(i));
}

// A message given up after its delivery timeout takes the topic's messages accepted before that
// moment with it, unsent: sent after it, they would be stored before it once the application
// sends it again (the relay publishes a given-up row again, and its round's later rows of the
// key were stored first: a per-key order inversion, outbox_relay_fault).
TEST(producer, a_message_given_up_fails_the_later_ones_instead_of_letting_them_overtake_it) {
  fake_broker broker;
  fake_log log;
  // The first message's requests are never answered (the broker is away for it); others are.
  broker.set_handler([&](const auto& s, const v1::Frame& f) {
    if (!f.has_produce()) return;
    for (const auto& m : f.produce().messages()) {
      if (m.body() == "first") return;
    }
    answer_from(log)(s, f);
  });
  auto o = options_for(broker);
  o.linger = 0ms;  // each message a batch of its own
  o.max_in_flight_batches_per_topic = 1;
  o.delivery_timeout = 1s;
  o.request_timeout = 200ms;
  producer p(o);
  auto first = p.async_send(msg("t", "first"));
  // The second is accepted after the first's first request timed out: its delivery timeout ends
  // about 200 ms after the first's, so it would still be sent once the first is given up.
  ASSERT_TRUE(broker.wait_until([&] { return broker.count(v1::Frame::kProduce) >= 2; }));
  auto second = p.async_send(msg("t", "second"));
  const auto r1 = first.get();
  ASSERT_FALSE(r1);
  EXPECT_TRUE(r1.error().is(client::errc::delivery_timeout)) << r1.error();
  const auto r2 = second.get();
  ASSERT_FALSE(r2) << "the second message was stored although the first, accepted before it, was given up";
  EXPECT_TRUE(r2.error().is(client::errc::delivery_timeout)) << r2.error();
  EXPECT_NE(r2.error().message.find("earlier message of the topic was given up"), std::string::npos) << r2.error();
  for (const auto& f : broker.received(v1::Frame::kProduce)) {
    for (const auto& m : f.produce().messages()) EXPECT_NE(m.body(), "second");
  }
  // A message accepted after that goes out as usual.
  ASSERT_TRUE(p.send(msg("t", "third")));
  const auto stored = log.stored();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].body(), "third");
}

}  // namespace
}  // namespace txmq::producer

namespace txmq::producer {
namespace {

// Cluster mode (docs/cluster.md): two fake nodes; partition 0 of "orders" is led by B, 1 by A.
// A answers Metadata (cluster) and refuses a message of partition 0 with NOT_LEADER, as a
// broker does. The producer, given only A, sends each keyed message to its leader, and a
// message refused by A goes to B with the same id after a Metadata refresh.
TEST(producer, keyed_messages_go_to_their_partitions_leader_and_follow_not_leader) {
  fake_broker a, b;
  fake_log log_a, log_b;
  std::atomic<bool> b_leads_1{false};  // flipped mid-test: leadership of partition 1 moves to B
  auto metadata = [&](const v1::Frame& f) {
    auto answer = testing::answer_to(f);
    auto* m = answer.mutable_metadata_response();
    m->set_cluster(true);
    auto* t = m->add_topics();
    t->set_name("orders");
    t->set_partitions(2);
    auto* p0 = t->add_partition_info();
    p0->set_partition(0);
    p0->set_leader(2);
    p0->set_leader_address(b.address());
    auto* p1 = t->add_partition_info();
    p1->set_partition(1);
    p1->set_leader(b_leads_1 ? 2 : 1);
    p1->set_leader_address(b_leads_1 ? b.address() : a.address());
    return answer;
  };
  auto node = [&](fake_log& log, bool is_a) {
    return [&, is_a](const auto& s, const v1::Frame& f) {
      if (f.has_metadata()) return s->send(metadata(f));
      if (!f.has_produce()) return;
      for (const auto& m : f.produce().messages()) {
        const auto p = protocol::partition_for_key(m.key(), 2);
        const bool leads = p == 0 ? !is_a : (is_a != b_leads_1.load());
        if (!leads) return s->send(testing::error_answer(f, v1::NOT_LEADER, "not the leader"));
      }
      auto answer = testing::answer_to(f);
      *answer.mutable_produce_response() = log.append(f.produce());
      s->send(answer);
    };
  };
  a.set_handler(node(log_a, true));
  b.set_handler(node(log_b, false));
  std::string key0, key1;
  for (int i = 0; key0.empty() || key1.empty(); ++i) {
    const std::string k = "k" + std::to_string(i);
    (protocol::partition_for_key(k, 2) == 0 ? key0 : key1) = k;
  }
  producer p(options_for(a));
  outgoing_message m0 = msg("orders", "zero");
  m0.key = key0;
  outgoing_message m1 = msg("orders", "one");
  m1.key = key1;
  auto r0 = p.send(m0);
  auto r1 = p.send(m1);
  ASSERT_TRUE(r0) << r0.error();
  ASSERT_TRUE(r1) << r1.error();
  EXPECT_EQ(log_b.stored().size(), 1u) << "partition 0's message stored on its leader, B";
  EXPECT_EQ(log_a.stored().size(), 1u) << "partition 1's message stored on its leader, A";

  // Partition 1 moves to B: A refuses, the producer refreshes and resends the same id to B.
  b_leads_1 = true;
  auto id = protocol::uuid::make_v7();
  m1.id = id;
  auto moved = p.send(m1);
  ASSERT_TRUE(moved) << moved.error();
  EXPECT_EQ(moved.value().id, id);
  EXPECT_EQ(log_b.stored().size(), 2u);
  bool refused_by_a = false;
  for (const auto& f : a.received(v1::Frame::kProduce)) {
    for (const auto& sent : f.produce().messages()) refused_by_a |= sent.id() == std::string(id.raw());
  }
  EXPECT_TRUE(refused_by_a) << "the first attempt went to the old leader";
}

}  // namespace
}  // namespace txmq::producer
