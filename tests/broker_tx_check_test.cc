// Transactions of docs/semantics.md §3 against the real broker binary, the check-back: COMMIT answers
// resolve, UNKNOWN answers until ABANDONED and then an operator's decision, no producer
// connected, checks only to the declared group, flood control per group, restart after SIGKILL
// with thousands of transactions open, a late EndTx, a returning producer asked at once.
// Part of the broker_tx_test executable (see broker_tx_test.cc).

#include <algorithm>
#include <map>
#include <set>
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

// Fast check-back clocks for the tests.
const std::vector<std::string> k_fast_checks = {"--tx-timeout", "200ms", "--tx-check-schedule", "100ms"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
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
  // A transaction's record says COMMITTED as soon as its write is applied, while its messages'
  // offsets are published after the fsync that makes them durable: wait for those too.
  std::uint64_t committed = 0;
  EXPECT_TRUE(eventually([&] { return (committed = partition_end_sum(c, "t")) == static_cast<std::uint64_t>(n); }, 30s))
      << committed << " of " << n << " committed messages readable";
}

// Prepares n transactions, SIGKILLs the broker (with `checks_open`, once a producer holds checks
// open), restarts it: every transaction is still listed, and each is checked and resolved as
// the producer answers, its message visible if committed.
void checks_resume_after_a_sigkill(std::vector<std::string> flags, int n, bool v7, bool checks_open) {
  broker_process b(with(std::move(flags), {"--tx-max-checks", "1000", "--tx-check-answer-timeout", "30s"}));
  b.start();
  // Even last byte (random in both kinds of txid): the producer's local transaction committed;
  // odd: it rolled back.
  auto decision = [](const std::string& txid) {
    return (static_cast<unsigned char>(txid.back()) % 2 == 0) ? v1::COMMIT : v1::ROLLBACK;
  };
  std::map<std::string, std::string> message_of;  // txid -> message id
  {
    raw_client c(b.port());
    c.hello();
    message_of = prepare_many(c, n, "pg", v7);
    ASSERT_EQ(message_of.size(), static_cast<std::size_t>(n));
    if (checks_open) {
      raw_client producer(b.port());
      producer.hello("before", "pg");
      ASSERT_TRUE(producer.readable(10s));
      auto f = producer.receive(5s);
      ASSERT_TRUE(f && f->has_check_tx());
    }
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

TEST(broker_tx_test, checks_resume_after_a_sigkill_and_resolve_per_the_producers_answers) {
  // "Thousands of transactions open"; a producer holds some checks open when the broker dies.
  checks_resume_after_a_sigkill(k_fast_checks, 3000, false, true);
}

// A Prepare with a UUIDv7 txid and its first check seconds away gets its due entry only a second
// after it is stored (storage/README.md "Young Prepares"): a broker killed within that second
// leaves them to the next start, which must find and check every one.
TEST(broker_tx_test, young_transactions_of_a_broker_killed_at_once_are_checked_after_the_restart) {
  checks_resume_after_a_sigkill({"--tx-timeout", "3s", "--tx-check-schedule", "100ms"}, 2000, true, false);
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

}  // namespace
}  // namespace txmq::test
