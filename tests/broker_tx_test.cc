// Transactions of DESIGN §3 against the real broker binary: Prepare/EndTx visibility and
// idempotence, check-back (COMMIT answers, UNKNOWN until ABANDONED, no producer, only the
// declared group, flood control per group), operator decisions, restart after SIGKILL with open
// transactions, and read-process-write acks applied with COMMIT.

#include <map>
#include <set>

#include <gtest/gtest.h>

#include "broker_process.h"
#include "eventually.h"
#include "raw_client.h"
#include "txmq/protocol/message_id.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;

// Fast check-back clocks for the tests.
const std::vector<std::string> k_fast_checks = {"--tx-timeout", "200ms", "--tx-check-schedule", "100ms"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string new_txid() { return std::string(protocol::uuid::make_v4().raw()); }
std::string text(const std::string& raw) { return protocol::uuid::from_bytes(raw).value().to_string(); }

v1::Message tx_message(const std::string& topic, const std::string& body) {
  auto m = make_message(body);
  m.set_topic(topic);
  return m;
}

v1::Frame prepare_frame(const std::string& txid, const std::string& group, std::vector<v1::Message> messages) {
  v1::Frame f;
  auto* p = f.mutable_prepare();
  p->set_txid(txid);
  p->set_producer_group(group);
  for (auto& m : messages) *p->add_messages() = std::move(m);
  return f;
}

v1::Frame end_tx_frame(const std::string& txid, v1::TxOutcome outcome) {
  v1::Frame f;
  f.mutable_end_tx()->set_txid(txid);
  f.mutable_end_tx()->set_outcome(outcome);
  return f;
}

v1::Frame resolve_frame(const std::string& txid, v1::TxOutcome outcome) {
  v1::Frame f;
  f.mutable_tx_resolve()->set_txid(txid);
  f.mutable_tx_resolve()->set_outcome(outcome);
  return f;
}

void prepare(raw_client& c, const std::string& txid, const std::string& group, std::vector<v1::Message> messages) {
  auto r = c.request(prepare_frame(txid, group, std::move(messages)));
  ASSERT_TRUE(r.has_prepare_response()) << r.ShortDebugString();
  ASSERT_FALSE(r.prepare_response().duplicate());
}

// Prepares n one-message transactions of `group` on topic "t", pipelined under the broker's
// 1,024 requests in flight per connection. Returns txid -> message id.
std::map<std::string, std::string> prepare_many(raw_client& c, int n, const std::string& group) {
  std::map<std::string, std::string> message_of;
  std::set<std::uint64_t> pending;
  for (int i = 0; i < n || !pending.empty();) {
    if (i < n && pending.size() < 1000) {
      auto tx = new_txid();
      auto m = tx_message("t", "m" + std::to_string(i++));
      message_of[tx] = m.id();
      pending.insert(c.send(prepare_frame(tx, group, {m})));
      continue;
    }
    auto f = c.receive(30s);
    if (!f || !f->has_prepare_response()) {
      ADD_FAILURE() << "Prepare " << i << " of " << n << " answered " << (f ? f->ShortDebugString() : "nothing");
      return message_of;
    }
    pending.erase(f->correlation_id());
  }
  return message_of;
}

v1::TxInfo show(raw_client& c, const std::string& txid) {
  v1::Frame f;
  f.mutable_tx_show()->set_txid(txid);
  auto r = c.request(f);
  EXPECT_TRUE(r.has_tx_info()) << r.ShortDebugString();
  return r.tx_info();
}

std::vector<v1::TxInfo> list(raw_client& c, v1::TxState state, bool all = false, std::uint32_t limit = 10'000) {
  std::vector<v1::TxInfo> out;
  std::string after;
  for (;;) {
    v1::Frame f;
    f.mutable_tx_list()->set_state(state);
    f.mutable_tx_list()->set_all_states(all);
    f.mutable_tx_list()->set_limit(limit);
    f.mutable_tx_list()->set_after_txid(after);
    auto r = c.request(f);
    EXPECT_TRUE(r.has_tx_list_response()) << r.ShortDebugString();
    for (auto& t : r.tx_list_response().txs()) out.push_back(t);
    after = r.tx_list_response().next_after_txid();
    if (after.empty()) return out;
  }
}

std::vector<v1::Message> fetch(raw_client& c, const std::string& group, const std::string& topic, std::uint32_t max,
                               std::uint32_t wait_ms, std::uint32_t ack_deadline_ms = 0) {
  auto r = c.request(fetch_frame(group, topic, max, wait_ms, ack_deadline_ms), 30s);
  EXPECT_TRUE(r.has_fetch_response()) << r.ShortDebugString();
  std::vector<v1::Message> out;
  for (auto& d : r.fetch_response().deliveries()) out.push_back(d.message());
  return out;
}

// Answers a CheckTx frame.
void answer(raw_client& c, const v1::Frame& check, v1::TxOutcome outcome) {
  v1::Frame f;
  f.set_correlation_id(check.correlation_id());
  f.mutable_check_tx_result()->set_txid(check.check_tx().txid());
  f.mutable_check_tx_result()->set_outcome(outcome);
  c.send(f);
}

std::uint64_t partition_end_sum(raw_client& c, const std::string& topic) {
  v1::Frame f;
  f.mutable_describe_topic()->set_name(topic);
  auto r = c.request(f);
  EXPECT_TRUE(r.has_topic_info()) << r.ShortDebugString();
  std::uint64_t sum = 0;
  for (auto& p : r.topic_info().partition_info()) sum += p.end_offset();
  return sum;
}

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

TEST(broker_tx_test, a_check_answered_commit_resolves_a_transaction_that_was_never_ended) {
  broker_process b(k_fast_checks);
  b.start();
  raw_client producer(b.port());
  producer.hello("checker", "pg");
  raw_client c(b.port());
  c.hello();
  const auto tx = new_txid();
  auto m = tx_message("t", "payload");
  m.set_key("k");
  prepare(c, tx, "pg", {m});

  auto check = producer.receive(10s);
  ASSERT_TRUE(check);
  ASSERT_TRUE(check->has_check_tx()) << check->ShortDebugString();
  EXPECT_NE(check->correlation_id() & (std::uint64_t{1} << 63), 0u) << "broker request ids have the high bit set";
  EXPECT_EQ(check->check_tx().txid(), tx);
  EXPECT_EQ(check->check_tx().producer_group(), "pg");
  EXPECT_EQ(check->check_tx().check_number(), 1u);
  ASSERT_EQ(check->check_tx().messages_size(), 1);
  EXPECT_EQ(check->check_tx().messages(0).body(), "payload");
  EXPECT_EQ(check->check_tx().messages(0).topic(), "t");
  answer(producer, *check, v1::COMMIT);
  EXPECT_FALSE(producer.readable(300ms)) << "an answer gets no response, and no further check comes";

  auto got = fetch(c, "g", "t", 10, 5000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id(), m.id());
  auto info = show(c, tx);
  EXPECT_EQ(info.state(), v1::COMMITTED);
  EXPECT_EQ(info.resolved_by(), v1::RESOLVED_BY_CHECK);
  EXPECT_EQ(info.check_count(), 0u) << "a deciding check is not an undecided one";
  // The producer connection still works for requests of its own.
  auto r = producer.request(end_tx_frame(tx, v1::COMMIT));
  ASSERT_TRUE(r.has_end_tx_response()) << r.ShortDebugString();
  EXPECT_TRUE(r.end_tx_response().already_resolved());
  EXPECT_NE(http_get(b.http_port(), "/metrics").find("txmq_tx_checks_total{result=\"commit\"} 1"), std::string::npos);
}

TEST(broker_tx_test, unknown_answers_abandon_the_transaction_and_an_operator_commits_it_once) {
  broker_process b(with(k_fast_checks, {"--tx-max-checks", "3"}));
  b.start();
  raw_client producer(b.port());
  producer.hello("checker", "pg");
  raw_client c(b.port());
  c.hello();
  const auto tx = new_txid();
  prepare(c, tx, "pg", {tx_message("t", "m")});
  std::vector<std::uint32_t> numbers;
  while (auto f = producer.receive(3s)) {
    ASSERT_TRUE(f->has_check_tx()) << f->ShortDebugString();
    numbers.push_back(f->check_tx().check_number());
    answer(producer, *f, v1::UNKNOWN);
  }
  EXPECT_EQ(numbers, (std::vector<std::uint32_t>{1, 2, 3})) << "three checks, then no more";
  auto info = show(c, tx);
  EXPECT_EQ(info.state(), v1::ABANDONED);
  EXPECT_EQ(info.check_count(), 3u);
  EXPECT_EQ(info.next_check_ms(), 0);
  EXPECT_EQ(info.resolved_by(), v1::TX_RESOLVER_UNSPECIFIED);

  auto abandoned = list(c, v1::ABANDONED);
  ASSERT_EQ(abandoned.size(), 1u);
  EXPECT_EQ(abandoned[0].txid(), tx);
  EXPECT_EQ(list(c, v1::TX_STATE_UNSPECIFIED).size(), 1u) << "the default lists unresolved ones";
  EXPECT_TRUE(list(c, v1::PREPARED).empty());
  EXPECT_TRUE(fetch(c, "g", "t", 10, 0).empty()) << "abandoned is not visible";
  const auto metrics = http_get(b.http_port(), "/metrics");
  EXPECT_NE(metrics.find("txmq_tx_abandoned_total 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("txmq_tx_abandoned_pending 1"), std::string::npos);
  EXPECT_NE(metrics.find("txmq_tx_checks_total{result=\"unknown\"} 3"), std::string::npos);

  auto r = c.request(resolve_frame(tx, v1::COMMIT));
  ASSERT_TRUE(r.has_end_tx_response()) << r.ShortDebugString();
  EXPECT_EQ(r.end_tx_response().state(), v1::COMMITTED);
  r = c.request(resolve_frame(tx, v1::COMMIT));
  ASSERT_TRUE(r.has_end_tx_response()) << r.ShortDebugString();
  EXPECT_TRUE(r.end_tx_response().already_resolved());
  EXPECT_EQ(fetch(c, "g", "t", 10, 1000).size(), 1u);
  EXPECT_TRUE(fetch(c, "g", "t", 10, 300).empty());
  EXPECT_EQ(partition_end_sum(c, "t"), 1u) << "visible once";
  EXPECT_EQ(show(c, tx).resolved_by(), v1::RESOLVED_BY_OPERATOR);
  EXPECT_TRUE(list(c, v1::TX_STATE_UNSPECIFIED).empty());
  EXPECT_TRUE(eventually([&] { return b.log().find("operator committed tx " + text(tx)) != std::string::npos; }))
      << b.log();
}

TEST(broker_tx_test, with_no_producer_connected_checks_count_as_undecided) {
  broker_process b(with(k_fast_checks, {"--tx-max-checks", "3"}));
  b.start();
  raw_client c(b.port());
  c.hello();
  const auto tx = new_txid();
  prepare(c, tx, "pg", {tx_message("t", "m")});
  EXPECT_TRUE(eventually([&] { return show(c, tx).state() == v1::ABANDONED; }));
  auto info = show(c, tx);
  EXPECT_EQ(info.check_count(), 3u);
  EXPECT_NE(http_get(b.http_port(), "/metrics").find("txmq_tx_checks_total{result=\"no_producer\"} 3"),
            std::string::npos);
}

TEST(broker_tx_test, checks_go_only_to_connections_that_declared_the_group) {
  broker_process b(with(k_fast_checks, {"--tx-max-checks", "3"}));
  b.start();
  raw_client plain(b.port());
  plain.hello("plain");
  raw_client other(b.port());
  other.hello("other", "other-group");
  raw_client c(b.port());
  c.hello();
  const auto tx = new_txid();
  prepare(c, tx, "pg", {tx_message("t", "m")});
  EXPECT_TRUE(eventually([&] { return show(c, tx).state() == v1::ABANDONED; }));
  EXPECT_FALSE(plain.readable(0ms)) << "a connection without a producer group got a frame";
  EXPECT_FALSE(other.readable(0ms)) << "a producer of another group got a frame";

  // The declared group's producers do get checks, round-robin.
  raw_client p1(b.port());
  p1.hello("p1", "pg");
  raw_client p2(b.port());
  p2.hello("p2", "pg");
  for (int i = 0; i < 4; ++i) prepare(c, new_txid(), "pg", {tx_message("t", "m" + std::to_string(i))});
  int checks1 = 0, checks2 = 0;
  auto take = [](raw_client& p, int& count) {
    while (p.readable(0ms)) {
      auto f = p.receive(5s);
      if (!f || !f->has_check_tx()) continue;
      ++count;
      answer(p, *f, v1::COMMIT);
    }
  };
  ASSERT_TRUE(eventually([&] {
    take(p1, checks1);
    take(p2, checks2);
    return checks1 + checks2 == 4;
  }));
  EXPECT_EQ(checks1, 2);
  EXPECT_EQ(checks2, 2);
  EXPECT_FALSE(plain.readable(0ms));
  EXPECT_FALSE(other.readable(0ms));
}

TEST(broker_tx_test, a_returning_producer_never_has_more_than_tx_checks_in_flight_open_checks) {
  // tx_checks_in_flight at its default (32).
  broker_process b(with(k_fast_checks, {"--tx-check-answer-timeout", "30s", "--tx-max-checks", "1000"}));
  b.start();
  constexpr int n = 10'000;
  raw_client c(b.port());
  c.hello();
  raw_client other(b.port());
  other.hello("other", "other-group");
  std::set<std::string> txids;
  for (auto& [tx, id] : prepare_many(c, n, "pg")) txids.insert(tx);
  ASSERT_EQ(txids.size(), static_cast<std::size_t>(n));
  // Their producer is away: every first check finds nobody. When it returns, the broker asks
  // about all 10,000 at once, and must not flood it.
  ASSERT_TRUE(eventually([&] {
    for (auto& t : list(c, v1::PREPARED)) {
      if (t.check_count() == 0) return false;
    }
    return true;
  }, 60s));
  raw_client producer(b.port());
  producer.hello("returning", "pg");
  // Another group's transaction is checked while "pg" is flooded.
  const auto other_tx = new_txid();
  prepare(c, other_tx, "other-group", {tx_message("t", "other")});

  std::vector<v1::Frame> outstanding;
  std::size_t max_outstanding = 0;
  std::set<std::string> checked;
  bool other_checked = false;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (checked.size() < txids.size() && std::chrono::steady_clock::now() < deadline) {
    if (!other_checked && other.readable(0ms)) {
      auto f = other.receive(5s);
      ASSERT_TRUE(f && f->has_check_tx());
      EXPECT_EQ(f->check_tx().txid(), other_tx);
      answer(other, *f, v1::ROLLBACK);
      other_checked = true;
    }
    // Take everything the broker sends until it has been quiet for 20 ms, then answer it all.
    while (producer.readable(20ms)) {
      auto f = producer.receive(5s);
      ASSERT_TRUE(f);
      ASSERT_TRUE(f->has_check_tx()) << f->ShortDebugString();
      outstanding.push_back(*f);
      max_outstanding = std::max(max_outstanding, outstanding.size());
    }
    for (auto& f : outstanding) {
      EXPECT_TRUE(checked.insert(f.check_tx().txid()).second) << "checked twice";
      answer(producer, f, v1::COMMIT);
    }
    outstanding.clear();
  }
  EXPECT_EQ(checked, txids);
  EXPECT_LE(max_outstanding, 32u);
  EXPECT_EQ(max_outstanding, 32u) << "the producer was never flooded up to the cap";
  EXPECT_TRUE(other_checked) << "a flooded group held up another group's check";
  EXPECT_TRUE(eventually([&] { return list(c, v1::TX_STATE_UNSPECIFIED).empty(); }, 30s));
  EXPECT_EQ(partition_end_sum(c, "t"), static_cast<std::uint64_t>(n));
}

TEST(broker_tx_test, checks_resume_after_a_sigkill_and_resolve_per_the_producers_answers) {
  broker_process b(with(k_fast_checks, {"--tx-max-checks", "1000", "--tx-check-answer-timeout", "30s"}));
  b.start();
  constexpr int n = 3000;  // "thousands of transactions open"
  // Even first byte: the producer's local transaction committed; odd: it rolled back.
  auto decision = [](const std::string& txid) {
    return (static_cast<unsigned char>(txid[0]) % 2 == 0) ? v1::COMMIT : v1::ROLLBACK;
  };
  std::map<std::string, std::string> message_of;  // txid -> message id
  {
    raw_client c(b.port());
    c.hello();
    message_of = prepare_many(c, n, "pg");
    ASSERT_EQ(message_of.size(), static_cast<std::size_t>(n));
    // A producer holds some checks open when the broker dies.
    raw_client producer(b.port());
    producer.hello("before", "pg");
    ASSERT_TRUE(producer.readable(10s));
    auto f = producer.receive(5s);
    ASSERT_TRUE(f && f->has_check_tx());
    b.kill();
  }
  b.start();
  raw_client c(b.port());
  c.hello();
  EXPECT_EQ(list(c, v1::TX_STATE_UNSPECIFIED).size(), static_cast<std::size_t>(n)) << "open transactions survive";
  raw_client producer(b.port());
  producer.hello("after", "pg");
  std::set<std::string> answered;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (answered.size() < message_of.size() && std::chrono::steady_clock::now() < deadline) {
    if (!producer.readable(100ms)) continue;
    auto f = producer.receive(5s);
    ASSERT_TRUE(f && f->has_check_tx()) << (f ? f->ShortDebugString() : "closed");
    answered.insert(f->check_tx().txid());
    answer(producer, *f, decision(f->check_tx().txid()));
  }
  EXPECT_EQ(answered.size(), message_of.size());
  ASSERT_TRUE(eventually([&] { return list(c, v1::TX_STATE_UNSPECIFIED).empty(); }, 30s));
  std::set<std::string> expected_visible;
  for (auto& info : list(c, v1::TX_STATE_UNSPECIFIED, true)) {
    const auto want = decision(info.txid()) == v1::COMMIT ? v1::COMMITTED : v1::ROLLED_BACK;
    EXPECT_EQ(info.state(), want) << text(info.txid());
    EXPECT_EQ(info.resolved_by(), v1::RESOLVED_BY_CHECK);
    if (want == v1::COMMITTED) expected_visible.insert(message_of[info.txid()]);
  }
  std::set<std::string> visible;
  for (;;) {
    auto got = fetch(c, "g", "t", 1000, 200);
    if (got.empty()) break;
    for (auto& m : got) EXPECT_TRUE(visible.insert(m.id()).second);
  }
  EXPECT_EQ(visible, expected_visible);
}

TEST(broker_tx_test, an_end_tx_after_a_check_resolved_the_other_way_changes_nothing) {
  broker_process b(k_fast_checks);
  b.start();
  raw_client producer(b.port());
  producer.hello("checker", "pg");
  raw_client c(b.port());
  c.hello();
  const auto tx = new_txid();
  prepare(c, tx, "pg", {tx_message("t", "m")});
  auto check = producer.receive(10s);
  ASSERT_TRUE(check && check->has_check_tx());
  answer(producer, *check, v1::ROLLBACK);
  ASSERT_TRUE(eventually([&] { return show(c, tx).state() == v1::ROLLED_BACK; }));
  auto r = c.request(end_tx_frame(tx, v1::COMMIT));
  ASSERT_TRUE(r.has_error()) << r.ShortDebugString();
  EXPECT_EQ(r.error().code(), v1::TX_ALREADY_RESOLVED);
  EXPECT_NE(r.error().message().find("rolled back"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("check-back"), std::string::npos) << r.error().message();
  EXPECT_TRUE(fetch(c, "g", "t", 10, 300).empty());
  EXPECT_EQ(show(c, tx).state(), v1::ROLLED_BACK);
}

TEST(broker_tx_test, a_returning_producer_is_asked_at_once_not_at_the_next_scheduled_check) {
  // The schedule would ask again only after a minute; the producer's return must not wait.
  broker_process b({"--tx-timeout", "100ms", "--tx-check-schedule", "1m"});
  b.start();
  raw_client c(b.port());
  c.hello();
  std::vector<std::string> txs;
  for (int i = 0; i < 50; ++i) {
    txs.push_back(new_txid());
    prepare(c, txs.back(), "pg-away", {tx_message("t", "m" + std::to_string(i))});
  }
  // Each had its first check, which found no producer.
  ASSERT_TRUE(eventually([&] {
    for (auto& t : list(c, v1::PREPARED)) {
      if (t.check_count() == 0) return false;
    }
    return true;
  }));
  raw_client producer(b.port());
  producer.hello("returning", "pg-away");
  const auto start = std::chrono::steady_clock::now();
  int answered = 0;
  while (answered < 50) {
    auto check = producer.receive(10s);
    ASSERT_TRUE(check && check->has_check_tx()) << answered << " answered before the checks stopped";
    answer(producer, *check, v1::COMMIT);
    ++answered;
  }
  ASSERT_TRUE(eventually([&] { return list(c, v1::PREPARED).empty(); }, 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(fetch(c, "g", "t", 100, 1000).size(), 50u);
}

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
