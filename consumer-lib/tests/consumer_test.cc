#include "txmq/consumer/consumer.h"

#include <atomic>
#include <deque>
#include <map>
#include <thread>

#include <boost/asio/steady_timer.hpp>
#include <gtest/gtest.h>

#include "fake_broker.h"

namespace txmq::consumer {
namespace {

using namespace std::chrono_literals;
using testing::fake_broker;

// The broker side of one group for these tests: messages waiting to be delivered, fetches that
// long-poll until a message arrives or their max_wait_ms passes, and DeliveryResults for
// ack/nack/extend (UNKNOWN_DELIVERY for refs in `unknown`).
class fake_group : public std::enable_shared_from_this<fake_group> {
 public:
  explicit fake_group(fake_broker& broker) : broker_(broker) {}

  // The broker's handler and timers keep the group alive until the broker is gone.
  static std::shared_ptr<fake_group> attach(fake_broker& broker) {
    auto g = std::make_shared<fake_group>(broker);
    broker.set_handler([g](const auto& s, const v1::Frame& f) { g->on_frame(s, f); });
    return g;
  }

  // Deliveries get deadline now + lease.
  void add(const std::string& body, std::chrono::milliseconds lease = 30s, std::optional<std::string> key = {}) {
    v1::Message m;
    m.set_id(std::string(protocol::uuid::make_v7().raw()));
    m.set_topic("orders");
    m.set_partition(0);
    m.set_body(body);
    m.set_attempt(1);
    if (key) m.set_key(*key);
    std::lock_guard lock(mutex_);
    m.set_offset(next_offset_++);
    waiting_.emplace_back(m, lease);
    answer_parked();
  }

  void fail_fetches_with(v1::ErrorCode code, std::string text) {
    std::lock_guard lock(mutex_);
    fetch_error_ = std::make_pair(code, std::move(text));
  }
  void drop_on_next_fetch() {
    std::lock_guard lock(mutex_);
    drop_next_fetch_ = true;
  }
  void mark_unknown(std::uint64_t offset) {
    std::lock_guard lock(mutex_);
    unknown_.push_back(offset);
  }
  // Answers to Ack, Nack and Extend are kept back until release_settles().
  void hold_settles() {
    std::lock_guard lock(mutex_);
    hold_settles_ = true;
  }
  void release_settles() {
    std::lock_guard lock(mutex_);
    hold_settles_ = false;
    for (auto& [s, a] : held_) s->send(a);
    held_.clear();
  }

  std::vector<std::uint64_t> offsets(v1::Frame::BodyCase body) const {
    std::vector<std::uint64_t> out;
    for (const auto& f : broker_.received(body)) {
      const auto& refs = body == v1::Frame::kAck ? f.ack().refs() : body == v1::Frame::kNack ? f.nack().refs() : f.extend().refs();
      for (const auto& r : refs) out.push_back(r.offset());
    }
    return out;
  }

 private:
  using parked_fetch = std::pair<std::shared_ptr<fake_broker::session>, v1::Frame>;

  void on_frame(const std::shared_ptr<fake_broker::session>& s, const v1::Frame& f) {
    std::lock_guard lock(mutex_);
    if (f.has_metadata()) {
      // A single broker: the consumer reads it over its one connection, as before Metadata.
      auto a = testing::answer_to(f);
      a.mutable_metadata_response()->set_cluster(false);
      s->send(a);
      return;
    }
    if (f.has_fetch()) {
      if (drop_next_fetch_) {
        drop_next_fetch_ = false;
        s->close();
        return;
      }
      if (fetch_error_) {
        s->send(testing::error_answer(f, fetch_error_->first, fetch_error_->second));
        return;
      }
      parked_.emplace_back(s, f);
      answer_parked();
      if (!parked_.empty() && parked_.back().second.correlation_id() == f.correlation_id()) {
        // Nothing to hand out: answer empty after max_wait_ms, as the broker's long poll does.
        auto timer = std::make_shared<boost::asio::steady_timer>(s->executor(), std::chrono::milliseconds(f.fetch().max_wait_ms()));
        timer->async_wait([self = shared_from_this(), timer, id = f.correlation_id(), s](boost::system::error_code) {
          std::lock_guard lock(self->mutex_);
          auto& parked = self->parked_;
          for (auto it = parked.begin(); it != parked.end(); ++it) {
            if (it->second.correlation_id() == id && it->first == s) {
              s->send(empty_answer(it->second));
              parked.erase(it);
              break;
            }
          }
        });
      }
      return;
    }
    const google::protobuf::RepeatedPtrField<v1::DeliveryRef>* refs = nullptr;
    if (f.has_ack()) refs = &f.ack().refs();
    if (f.has_nack()) refs = &f.nack().refs();
    if (f.has_extend()) refs = &f.extend().refs();
    if (!refs) return;
    auto answer = testing::answer_to(f);
    auto* results = answer.mutable_delivery_results();
    for (const auto& r : *refs) {
      const bool unknown = std::find(unknown_.begin(), unknown_.end(), r.offset()) != unknown_.end();
      results->add_results(unknown ? v1::UNKNOWN_DELIVERY : v1::ERROR_CODE_UNSPECIFIED);
    }
    if (hold_settles_) {
      held_.emplace_back(s, std::move(answer));
      return;
    }
    s->send(answer);
  }

  static v1::Frame empty_answer(const v1::Frame& fetch) {
    auto a = testing::answer_to(fetch);
    a.mutable_fetch_response();
    return a;
  }

  // Under mutex_.
  void answer_parked() {
    while (!parked_.empty() && !waiting_.empty()) {
      auto [s, f] = parked_.front();
      parked_.pop_front();
      auto a = empty_answer(f);
      const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
      const std::uint32_t max = f.fetch().max_messages() == 0 ? 100 : f.fetch().max_messages();
      for (std::uint32_t i = 0; i < max && !waiting_.empty(); ++i) {
        auto* d = a.mutable_fetch_response()->add_deliveries();
        *d->mutable_message() = waiting_.front().first;
        d->set_deadline_ms((now_ms + waiting_.front().second).count());
        waiting_.pop_front();
      }
      s->send(a);
    }
  }

  fake_broker& broker_;
  std::mutex mutex_;
  std::deque<std::pair<v1::Message, std::chrono::milliseconds>> waiting_;
  std::deque<parked_fetch> parked_;
  std::uint64_t next_offset_ = 0;
  std::optional<std::pair<v1::ErrorCode, std::string>> fetch_error_;
  bool drop_next_fetch_ = false;
  std::vector<std::uint64_t> unknown_;
  bool hold_settles_ = false;
  std::vector<std::pair<std::shared_ptr<fake_broker::session>, v1::Frame>> held_;
};

consumer_options options_for(const fake_broker& broker) {
  consumer_options o;
  o.connection.address = broker.address();
  o.connection.client_id = "consumer-test";
  o.connection.reconnect_backoff_initial = 10ms;
  o.connection.reconnect_backoff_max = 50ms;
  o.group = "billing";
  o.topics = {"orders"};
  o.max_wait = 200ms;
  o.retry_backoff_initial = 10ms;
  return o;
}

// Runs c.run(handler) on a thread; stop() requests the stop and returns run()'s result.
class runner {
 public:
  runner(consumer& c, handler h)
      : thread_([this, &c, h = std::move(h)](std::stop_token stop) {
          auto r = c.run(h, stop);
          std::lock_guard lock(mutex_);
          result_ = std::move(r);
          done_ = true;
        }) {}
  ~runner() { thread_.request_stop(); }

  void request_stop() { thread_.request_stop(); }

  client::result<void> stop() {
    thread_.request_stop();
    thread_.join();
    std::lock_guard lock(mutex_);
    return *result_;
  }
  bool done() {
    std::lock_guard lock(mutex_);
    return done_;
  }
  client::result<void> join() {
    thread_.join();
    std::lock_guard lock(mutex_);
    return *result_;
  }

 private:
  std::mutex mutex_;
  std::optional<client::result<void>> result_;
  bool done_ = false;
  std::jthread thread_;
};

TEST(consumer, fetch_sends_group_topics_and_returns_deliveries) {
  fake_broker broker;
  auto group = fake_group::attach(broker);
  group->add("a");
  group->add("b");
  auto o = options_for(broker);
  o.ack_deadline = 15s;
  consumer c(o);
  auto r = c.fetch(10, 0ms);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r.value().size(), 2u);
  EXPECT_EQ(r.value()[0].message.body(), "a");
  EXPECT_EQ(r.value()[1].ref(), (delivery_ref{"orders", 0, 1, r.value()[1].attempt()}));
  EXPECT_EQ(r.value()[0].attempt(), 1u);
  EXPECT_EQ(r.value()[0].id().version(), 7);
  EXPECT_GT(r.value()[0].deadline, std::chrono::system_clock::now());
  auto sent = broker.received(v1::Frame::kFetch).at(0).fetch();
  EXPECT_EQ(sent.group(), "billing");
  ASSERT_EQ(sent.topics_size(), 1);
  EXPECT_EQ(sent.topics(0), "orders");
  EXPECT_EQ(sent.max_messages(), 10u);
  EXPECT_EQ(sent.ack_deadline_ms(), 15000u);
}

TEST(consumer, ack_nack_extend_report_unknown_delivery_per_ref) {
  fake_broker broker;
  auto group = fake_group::attach(broker);
  group->mark_unknown(2);
  consumer c(options_for(broker));
  std::vector<delivery_ref> refs{{"orders", 0, 1}, {"orders", 0, 2}};
  auto acked = c.ack(refs);
  ASSERT_TRUE(acked) << acked.error();
  ASSERT_EQ(acked.value().size(), 2u);
  EXPECT_TRUE(acked.value()[0]);
  ASSERT_FALSE(acked.value()[1]);
  EXPECT_TRUE(acked.value()[1].error().is(protocol::errc::unknown_delivery));
  auto nacked = c.nack(refs, 1500ms);
  ASSERT_TRUE(nacked);
  EXPECT_EQ(broker.received(v1::Frame::kNack).at(0).nack().delay_ms(), 1500u);
  EXPECT_EQ(broker.received(v1::Frame::kNack).at(0).nack().group(), "billing");
  auto extended = c.extend(refs, 20s);
  ASSERT_TRUE(extended);
  EXPECT_EQ(broker.received(v1::Frame::kExtend).at(0).extend().extend_ms(), 20000u);
  EXPECT_FALSE(extended.value()[1]);
}

TEST(consumer, run_acks_after_the_handler_succeeds) {
  fake_broker broker;
  auto group = fake_group::attach(broker);
  for (int i = 0; i < 5; ++i) group->add("m" + std::to_string(i));
  consumer c(options_for(broker));
  std::mutex mutex;
  std::vector<std::string> handled;
  runner r(c, [&](const delivery& d) -> handler_result {
    std::lock_guard lock(mutex);
    handled.push_back(d.message.body());
    return outcome::success();
  });
  ASSERT_TRUE(broker.wait_until([&] { return group->offsets(v1::Frame::kAck).size() == 5; }));
  ASSERT_TRUE(r.stop());
  EXPECT_EQ(group->offsets(v1::Frame::kAck), (std::vector<std::uint64_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(group->offsets(v1::Frame::kNack).empty());
  EXPECT_EQ(handled, (std::vector<std::string>{"m0", "m1", "m2", "m3", "m4"}));
}

TEST(consumer, run_nacks_when_the_handler_fails_or_throws) {
  fake_broker broker;
  auto group = fake_group::attach(broker);
  group->add("ok");
  group->add("error");
  group->add("throw");
  consumer c(options_for(broker));
  std::vector<std::string> logged;
  runner r(c, [&](const delivery& d) -> handler_result {
    if (d.message.body() == "error") return client::error(client::errc::invalid_argument, "bad payload");
    if (d.message.body() == "throw") throw std::runtime_error("boom");
    return outcome::success();
  });
  ASSERT_TRUE(broker.wait_until([&] {
    return group->offsets(v1::Frame::kAck).size() == 1 && group->offsets(v1::Frame::kNack).size() == 2;
  }));
  ASSERT_TRUE(r.stop());
  EXPECT_EQ(group->offsets(v1::Frame::kAck), (std::vector<std::uint64_t>{0}));
  EXPECT_EQ(group->offsets(v1::Frame::kNack), (std::vector<std::uint64_t>{1, 2}));
  for (const auto& f : broker.received(v1::Frame::kNack)) EXPECT_EQ(f.nack().delay_ms(), 0u);  // broker's schedule
}

TEST(consumer, run_extends_the_deadline_of_a_long_handler) {
  fake_broker broker;
  auto group = fake_group::attach(broker);
  // The lease is long against scheduling: the consumer asks for what is left of it when it reads
  // the answer, and a loaded machine may take a few hundred ms to get there.
  group->add("slow", 2000ms);
  consumer c(options_for(broker));
  std::atomic<bool> extended{false};
  std::atomic<bool> timed_out{false};
  runner r(c, [&](const delivery&) -> handler_result {
    // Keep running until the consumer has extended this delivery's deadline.
    if (!broker.wait_until([&] { return broker.count(v1::Frame::kExtend) >= 1; }, 10s)) timed_out = true;
    extended = true;
    return outcome::success();
  });
  ASSERT_TRUE(broker.wait_until([&] { return group->offsets(v1::Frame::kAck).size() == 1; }));
  ASSERT_TRUE(r.stop());
  EXPECT_FALSE(timed_out.load());
  auto extends = broker.received(v1::Frame::kExtend);
  ASSERT_GE(extends.size(), 1u);
  EXPECT_EQ(extends[0].extend().refs(0).offset(), 0u);
  EXPECT_EQ(extends[0].extend().group(), "billing");
  // The lease the broker gave (about 2 s) is asked for again.
  EXPECT_GE(extends[0].extend().extend_ms(), 1500u);
  EXPECT_LE(extends[0].extend().extend_ms(), 2000u);
}

TEST(consumer, run_does_not_extend_quick_handlers) {
  fake_broker broker;
  auto group = fake_group::attach(broker);
  for (int i = 0; i < 3; ++i) group->add("quick", 10s);
  consumer c(options_for(broker));
  runner r(c, [&](const delivery&) -> handler_result { return outcome::success(); });
  ASSERT_TRUE(broker.wait_until([&] { return group->offsets(v1::Frame::kAck).size() == 3; }));
  ASSERT_TRUE(r.stop());
  EXPECT_EQ(broker.count(v1::Frame::kExtend), 0u);
}

TEST(consumer, run_calls_handlers_concurrently) {
  fake_broker broker;
  auto group = fake_group::attach(broker);
  for (int i = 0; i < 4; ++i) group->add("m" + std::to_string(i));
  auto o = options_for(broker);
  o.concurrency = 4;
  consumer c(o);
  std::mutex mutex;
  std::condition_variable cv;
  int running = 0;
  int max_running = 0;
  runner r(c, [&](const delivery&) -> handler_result {
    std::unique_lock lock(mutex);
    max_running = std::max(max_running, ++running);
    cv.notify_all();
    // All four are in their handlers at once, or the test fails after the deadline.
    cv.wait_for(lock, 10s, [&] { return max_running == 4; });
    --running;
    return outcome::success();
  });
  ASSERT_TRUE(broker.wait_until([&] { return group->offsets(v1::Frame::kAck).size() == 4; }));
  ASSERT_TRUE(r.stop());
  EXPECT_EQ(max_running, 4);
}

TEST(consumer, run_with_concurrency_one_runs_one_handler_at_a_time) {
  fake_broker broker;
  auto group = fake_group::attach(broker);
  for (int i = 0; i < 6; ++i) group->add("m" + std::to_string(i), 30s, "same-key");
  consumer c(options_for(broker));
  std::atomic<int> running{0};
  std::atomic<int> max_running{0};
  runner r(c, [&](const delivery&) -> handler_result {
    max_running = std::max(max_running.load(), ++running);
    --running;
    return outcome::success();
  });
  ASSERT_TRUE(broker.wait_until([&] { return group->offsets(v1::Frame::kAck).size() == 6; }));
  ASSERT_TRUE(r.stop());
  EXPECT_EQ(max_running.load(), 1);
  EXPECT_EQ(group->offsets(v1::Frame::kAck), (std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5}));
  for (const auto& f : broker.received(v1::Frame::kFetch)) EXPECT_EQ(f.fetch().max_messages(), 1u);
}

TEST(consumer, run_survives_a_lost_connection) {
  fake_broker broker;
  auto group = fake_group::attach(broker);
  group->drop_on_next_fetch();
  consumer c(options_for(broker));
  std::atomic<int> handled{0};
  runner r(c, [&](const delivery&) -> handler_result {
    ++handled;
    return outcome::success();
  });
  ASSERT_TRUE(broker.wait_until([&] { return broker.sessions_started() >= 2 && c.conn()->is_connected(); }));
  group->add("after reconnect");
  ASSERT_TRUE(broker.wait_until([&] { return group->offsets(v1::Frame::kAck).size() == 1; }));
  ASSERT_TRUE(r.stop());
  EXPECT_EQ(handled.load(), 1);
  EXPECT_GE(c.conn()->connects(), 2u);
}

TEST(consumer, run_returns_a_non_retriable_fetch_error) {
  fake_broker broker;
  auto group = fake_group::attach(broker);
  group->fail_fetches_with(v1::NOT_AUTHORIZED, "principal 'svc' may not consume topic 'orders'");
  consumer c(options_for(broker));
  runner r(c, [&](const delivery&) -> handler_result { return outcome::success(); });
  auto result = r.join();
  ASSERT_FALSE(result);
  EXPECT_TRUE(result.error().is(protocol::errc::not_authorized));
  EXPECT_EQ(result.error().message, "principal 'svc' may not consume topic 'orders'");
}

// A worker does not wait for its ack's answer: it takes the next delivery at once. The delivery
// keeps its slot of the window until the answer, and run() returns only after every answer.
TEST(consumer, run_goes_on_while_an_ack_is_unanswered_and_returns_after_the_answers) {
  fake_broker broker;
  auto group = fake_group::attach(broker);
  group->hold_settles();
  group->add("m0");
  group->add("m1");
  group->add("m2");
  auto o = options_for(broker);
  o.concurrency = 1;
  o.prefetch = 1;  // a window of two
  consumer c(o);
  std::atomic<int> handled{0};
  runner r(c, [&](const delivery&) -> handler_result {
    ++handled;
    return outcome::success();
  });
  // m0 and m1 fit the window; with m0's ack unanswered the one worker still handles m1.
  ASSERT_TRUE(broker.wait_until([&] { return group->offsets(v1::Frame::kAck).size() == 2; }));
  EXPECT_EQ(handled.load(), 2);
  // Both slots are held by unanswered acks: m2 is not fetched.
  EXPECT_EQ(broker.count(v1::Frame::kFetch), 1u);
  r.request_stop();
  EXPECT_FALSE(broker.wait_until([&] { return r.done(); }, 300ms)) << "run() returned before its acks were answered";
  group->release_settles();
  ASSERT_TRUE(r.join());
  EXPECT_EQ(group->offsets(v1::Frame::kAck), (std::vector<std::uint64_t>{0, 1}));
  EXPECT_EQ(handled.load(), 2);
}

TEST(consumer, stop_returns_while_idle) {
  fake_broker broker;
  auto group = fake_group::attach(broker);
  consumer c(options_for(broker));
  runner r(c, [&](const delivery&) -> handler_result { return outcome::success(); });
  ASSERT_TRUE(broker.wait_until([&] { return broker.count(v1::Frame::kFetch) >= 1; }));
  EXPECT_TRUE(r.stop());
}

}  // namespace
}  // namespace txmq::consumer

namespace txmq::consumer {
namespace {

// Two fake nodes of a cluster: node A answers Metadata (partition 0 led by A, 1 by B); each
// node delivers one message of the partition it leads, once, and answers acks.
// `refuse_later`: fetches after the first answer UNKNOWN_TOPIC (the node lost its leadership).
void serve_as_node(fake_broker& self, fake_broker& a, fake_broker& b, std::uint32_t partition,
                   bool refuse_later = false) {
  auto delivered = std::make_shared<std::atomic<bool>>(false);
  self.set_handler([&a, &b, partition, delivered, refuse_later](const auto& s, const v1::Frame& f) {
    auto answer = testing::answer_to(f);
    if (f.has_metadata()) {
      auto* m = answer.mutable_metadata_response();
      m->set_cluster(true);
      auto* t = m->add_topics();
      t->set_name("orders");
      t->set_partitions(2);
      for (std::uint32_t p = 0; p < 2; ++p) {
        auto* pm = t->add_partition_info();
        pm->set_partition(p);
        pm->set_leader(p + 1);
        pm->set_leader_address(p == 0 ? a.address() : b.address());
        pm->set_leader_epoch(1);
      }
    } else if (f.has_fetch()) {
      if (refuse_later && delivered->load()) {
        s->send(testing::error_answer(f, v1::UNKNOWN_TOPIC, "no topic 'orders'"));
        return;
      }
      auto* r = answer.mutable_fetch_response();
      if (!delivered->exchange(true)) {
        auto* d = r->add_deliveries();
        d->mutable_message()->set_id(std::string(protocol::uuid::make_v7().raw()));
        d->mutable_message()->set_topic("orders");
        d->mutable_message()->set_partition(partition);
        d->mutable_message()->set_offset(7);
        d->mutable_message()->set_attempt(1);
        d->mutable_message()->set_body("from partition " + std::to_string(partition));
        d->set_deadline_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                               (std::chrono::system_clock::now() + 30s).time_since_epoch())
                               .count());
      }
    } else if (f.has_ack()) {
      for (int i = 0; i < f.ack().refs_size(); ++i) answer.mutable_delivery_results()->add_results(v1::ERROR_CODE_UNSPECIFIED);
    } else {
      return;
    }
    s->send(answer);
  });
}

TEST(consumer_in_a_cluster, fetches_each_partition_from_its_leader_and_acks_on_the_node_that_delivered) {
  fake_broker a, b;
  serve_as_node(a, a, b, 0);
  serve_as_node(b, a, b, 1);
  consumer_options o;
  o.connection.address = a.address();
  o.group = "billing";
  o.topics = {"orders"};
  consumer c(o);
  std::vector<delivery> got;
  // The fakes answer at once (no long poll): keep fetching until both nodes' answers are in.
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (got.size() < 2 && std::chrono::steady_clock::now() < until) {
    auto r = c.fetch(10, 100ms);
    ASSERT_TRUE(r) << r.error();
    for (auto& d : r.value()) got.push_back(std::move(d));
  }
  ASSERT_EQ(got.size(), 2u);
  std::map<std::uint32_t, std::string> node_of;
  for (const auto& d : got) node_of[d.message.partition()] = d.node;
  EXPECT_EQ(node_of[0], a.address());
  EXPECT_EQ(node_of[1], b.address());
  // Each node was asked for the topic, once the Metadata said who leads.
  EXPECT_EQ(a.count(v1::Frame::kMetadata), 1u);
  EXPECT_GE(a.count(v1::Frame::kFetch), 1u);
  EXPECT_GE(b.count(v1::Frame::kFetch), 1u);

  std::vector<delivery_ref> refs{got[0].ref(), got[1].ref()};
  auto acked = c.ack(refs);
  ASSERT_TRUE(acked) << acked.error();
  ASSERT_EQ(acked.value().size(), 2u);
  EXPECT_TRUE(acked.value()[0]);
  EXPECT_TRUE(acked.value()[1]);
  ASSERT_EQ(a.received(v1::Frame::kAck).size(), 1u);
  ASSERT_EQ(b.received(v1::Frame::kAck).size(), 1u);
  EXPECT_EQ(a.received(v1::Frame::kAck)[0].ack().refs(0).partition(), 0u);
  EXPECT_EQ(b.received(v1::Frame::kAck)[0].ack().refs(0).partition(), 1u);
}

TEST(consumer_in_a_cluster, a_node_that_no_longer_leads_makes_it_look_the_leaders_up_again_not_fail) {
  fake_broker a, b;
  // After its one delivery A refuses too: rounds where every node refuses must not fail either.
  serve_as_node(a, a, b, 0, true);
  // B says it has no such topic (it lost the leadership, say): stale metadata, not an error.
  b.set_handler([](const auto& s, const v1::Frame& f) {
    if (f.has_fetch()) s->send(testing::error_answer(f, v1::UNKNOWN_TOPIC, "no topic 'orders'"));
  });
  consumer_options o;
  o.connection.address = a.address();
  o.group = "billing";
  o.topics = {"orders"};
  consumer c(o);
  std::vector<delivery> got;
  const auto until = std::chrono::steady_clock::now() + 10s;
  while ((got.empty() || a.count(v1::Frame::kFetch) < 3 || b.count(v1::Frame::kFetch) < 1 ||
          a.count(v1::Frame::kMetadata) < 2) &&
         std::chrono::steady_clock::now() < until) {
    auto r = c.fetch(10, 50ms);
    ASSERT_TRUE(r) << "B's refusal must not fail the fetch: " << r.error();
    for (auto& d : r.value()) got.push_back(std::move(d));
  }
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].node, a.address());
  EXPECT_GE(b.count(v1::Frame::kFetch), 1u);
  EXPECT_GE(a.count(v1::Frame::kMetadata), 2u) << "B's refusal refreshes the metadata at once";
}

TEST(consumer, a_single_broker_costs_one_metadata_round_trip_not_one_per_fetch) {
  fake_broker broker;
  auto group = fake_group::attach(broker);
  consumer c(options_for(broker));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.fetch(10, 0ms));
  EXPECT_EQ(broker.count(v1::Frame::kMetadata), 1u);
  EXPECT_EQ(broker.count(v1::Frame::kFetch), 3u);
}

}  // namespace
}  // namespace txmq::consumer
