// Store unit tests: transactions (half messages), check-back bookkeeping (read-process-write:
// store_rpw_test.cc).

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>

#include "store_test_fixture.h"
#include "txmq/protocol/partitioner.h"

namespace txmq::storage::test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

class store_tx_test : public store_test {
 protected:
  void SetUp() override {
    store_test::SetUp();
    create_topic("pay", 2);
  }

  // A prepared transaction of two messages to "pay", first check due at first_check_ms.
  txid prepare_two(std::int64_t first_check_ms) {
    const txid id = protocol::uuid::make_v4();
    auto r = prepare(id, {make_message("debit", "acct-1", "pay"), make_message("credit", "acct-2", "pay")},
                     first_check_ms);
    EXPECT_FALSE(r.duplicate);
    return id;
  }
};

TEST_F(store_tx_test, prepared_messages_are_invisible) {
  const std::int64_t first_check = now() + 6'000;
  const txid id = prepare_two(first_check);
  EXPECT_EQ(total_messages("pay"), 0u);
  EXPECT_TRUE(read("pay", 0).messages.empty());
  EXPECT_TRUE(read("pay", 1).messages.empty());

  auto tx = find_tx(id);
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->id, id);
  EXPECT_EQ(tx->state, tx_state::prepared);
  EXPECT_EQ(tx->producer_group, "producers");
  ASSERT_THAT(tx->messages, SizeIs(2));
  EXPECT_EQ(tx->messages[0].topic(), "pay");
  EXPECT_EQ(tx->messages[0].body(), "debit");
  EXPECT_EQ(tx->messages[1].body(), "credit");
  EXPECT_EQ(tx->prepared_ms, k_start_ms);
  EXPECT_EQ(tx->check_count, 0u);
  EXPECT_EQ(tx->next_check_ms, first_check);
  EXPECT_EQ(tx->resolved_by, std::nullopt);

  EXPECT_THAT(due_check_ids(first_check - 1), IsEmpty());
  EXPECT_THAT(due_check_ids(first_check), ElementsAre(id));
}

TEST_F(store_tx_test, repeated_prepare_is_a_duplicate_and_changes_nothing) {
  const std::int64_t first_check = now() + 6'000;
  const txid id = prepare_two(first_check);
  advance(100);
  auto again = prepare(id, {make_message("other", std::nullopt, "pay")}, now() + 9'000);
  EXPECT_TRUE(again.duplicate);
  auto tx = find_tx(id);
  ASSERT_TRUE(tx);
  EXPECT_THAT(tx->messages, SizeIs(2));
  EXPECT_EQ(tx->next_check_ms, first_check);
  EXPECT_EQ(tx->prepared_ms, k_start_ms);
  EXPECT_THAT(due_check_ids(now() + 100'000), ElementsAre(id));
}

TEST_F(store_tx_test, prepare_of_a_resolved_tx_fails_with_tx_not_prepared) {
  const txid id = prepare_two(now() + 6'000);
  resolve(id, tx_outcome::commit);
  prepare_request req;
  req.id = id;
  req.producer_group = "producers";
  req.messages = {make_message("again", std::nullopt, "pay")};
  EXPECT_THAT(try_prepare(req), fails_with(errc::tx_not_prepared));
  EXPECT_EQ(total_messages("pay"), 2u);
}

TEST_F(store_tx_test, commit_makes_the_messages_visible_with_their_txid) {
  const txid id = prepare_two(now() + 6'000);
  advance(500);
  auto r = resolve(id, tx_outcome::commit);
  EXPECT_EQ(r.status, resolve_status::applied);
  EXPECT_EQ(r.state, tx_state::committed);
  ASSERT_THAT(r.positions, SizeIs(2));
  EXPECT_EQ(r.positions[0].partition, protocol::partition_for_key("acct-1", 2));
  EXPECT_EQ(total_messages("pay"), 2u);
  const char* bodies[] = {"debit", "credit"};
  for (std::size_t i = 0; i < 2; ++i) {
    auto got = read("pay", r.positions[i].partition, r.positions[i].offset, 1);
    ASSERT_THAT(got.messages, SizeIs(1));
    EXPECT_EQ(got.messages[0].body(), bodies[i]);
    EXPECT_EQ(got.messages[0].txid(), id.raw());
    EXPECT_EQ(got.messages[0].publish_time_ms(), now());
  }
  auto tx = find_tx(id);
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->state, tx_state::committed);
  EXPECT_EQ(tx->resolved_by, resolver::producer);
  EXPECT_EQ(tx->resolved_ms, now());
  EXPECT_EQ(tx->next_check_ms, 0);
  ASSERT_THAT(tx->messages, SizeIs(2));
  EXPECT_EQ(tx->messages[1].partition(), r.positions[1].partition);
  EXPECT_EQ(tx->messages[1].offset(), r.positions[1].offset);
  EXPECT_THAT(due_check_ids(now() + 100'000), IsEmpty());
}

// The commit moves each body and its headers into the log instead of copying them (issue #15):
// what is read back is the whole message, and the outcome record keeps no body.
TEST_F(store_tx_test, commit_writes_each_message_whole_and_keeps_no_body_in_the_outcome) {
  const txid id = protocol::uuid::make_v4();
  auto m = make_message("payload", "acct-9", "pay");
  (*m.mutable_headers())["trace"] = "t-1";
  (*m.mutable_headers())["kind"] = "debit";
  const std::string message_id = m.id();
  prepare(id, {m}, now() + 6'000);
  auto r = resolve(id, tx_outcome::commit);
  ASSERT_THAT(r.positions, SizeIs(1));
  auto got = read("pay", r.positions[0].partition, r.positions[0].offset, 1);
  ASSERT_THAT(got.messages, SizeIs(1));
  const auto& stored = got.messages[0];
  EXPECT_EQ(stored.id(), message_id);
  EXPECT_EQ(stored.body(), "payload");
  EXPECT_EQ(stored.key(), "acct-9");
  ASSERT_EQ(stored.headers().size(), 2);
  EXPECT_EQ(stored.headers().at("trace"), "t-1");
  EXPECT_EQ(stored.headers().at("kind"), "debit");
  EXPECT_EQ(stored.txid(), id.raw());
  auto tx = find_tx(id);
  ASSERT_TRUE(tx);
  ASSERT_THAT(tx->messages, SizeIs(1));
  EXPECT_TRUE(tx->messages[0].body().empty());
  EXPECT_TRUE(tx->messages[0].headers().empty());
  EXPECT_TRUE(tx->messages[0].txid().empty());
  EXPECT_EQ(tx->messages[0].id(), message_id);
  EXPECT_EQ(tx->messages[0].topic(), "pay");
  EXPECT_EQ(tx->messages[0].offset(), r.positions[0].offset);
}

TEST_F(store_tx_test, repeated_commit_answers_repeated_and_writes_nothing) {
  const txid id = prepare_two(now() + 6'000);
  auto first = resolve(id, tx_outcome::commit);
  auto again = resolve(id, tx_outcome::commit, resolver::check);
  EXPECT_EQ(again.status, resolve_status::repeated);
  EXPECT_EQ(again.state, tx_state::committed);
  EXPECT_EQ(again.positions, first.positions);
  EXPECT_EQ(total_messages("pay"), 2u);
  EXPECT_EQ(find_tx(id)->resolved_by, resolver::producer);
}

TEST_F(store_tx_test, rollback_after_commit_conflicts_and_changes_nothing) {
  const txid id = prepare_two(now() + 6'000);
  auto committed = resolve(id, tx_outcome::commit);
  advance(10);
  auto r = resolve(id, tx_outcome::rollback, resolver::check);
  EXPECT_EQ(r.status, resolve_status::conflict);
  EXPECT_EQ(r.state, tx_state::committed);
  auto tx = find_tx(id);
  EXPECT_EQ(tx->state, tx_state::committed);
  EXPECT_EQ(tx->resolved_by, resolver::producer);
  EXPECT_EQ(tx->resolved_ms, k_start_ms);
  EXPECT_EQ(total_messages("pay"), 2u);
  EXPECT_THAT(read("pay", committed.positions[0].partition).messages, SizeIs(1));
}

TEST_F(store_tx_test, rollback_drops_the_messages_and_a_later_commit_conflicts) {
  const txid id = prepare_two(now() + 6'000);
  auto r = resolve(id, tx_outcome::rollback);
  EXPECT_EQ(r.status, resolve_status::applied);
  EXPECT_EQ(r.state, tx_state::rolled_back);
  EXPECT_THAT(r.positions, IsEmpty());
  EXPECT_EQ(total_messages("pay"), 0u);
  EXPECT_EQ(find_tx(id)->state, tx_state::rolled_back);
  EXPECT_THAT(due_check_ids(now() + 100'000), IsEmpty());

  auto commit = resolve(id, tx_outcome::commit);
  EXPECT_EQ(commit.status, resolve_status::conflict);
  EXPECT_EQ(commit.state, tx_state::rolled_back);
  EXPECT_EQ(total_messages("pay"), 0u);
  EXPECT_EQ(resolve(id, tx_outcome::rollback).status, resolve_status::repeated);
}

TEST_F(store_tx_test, a_tx_across_two_topics_becomes_visible_at_once) {
  create_topic("audit", 1);
  const txid id = protocol::uuid::make_v4();
  prepare(id,
          {make_message("p1", "k1", "pay"), make_message("a1", std::nullopt, "audit"), make_message("p2", "k1", "pay")},
          now() + 6'000);
  EXPECT_EQ(total_messages("pay") + total_messages("audit"), 0u);
  const auto before = store_->stats().commit_groups;
  auto r = resolve(id, tx_outcome::commit);
  EXPECT_EQ(store_->stats().commit_groups - before, 1u) << "a commit must be one write";
  ASSERT_THAT(r.positions, SizeIs(3));
  const auto p = protocol::partition_for_key("k1", 2);
  EXPECT_EQ(r.positions[0], (position{p, 0, false}));
  EXPECT_EQ(r.positions[1], (position{0, 0, false}));
  EXPECT_EQ(r.positions[2], (position{p, 1, false}));
  auto pay = read("pay", p);
  ASSERT_THAT(pay.messages, SizeIs(2));
  EXPECT_EQ(pay.messages[0].body(), "p1");
  EXPECT_EQ(pay.messages[1].body(), "p2");
  auto audit = read("audit", 0);
  ASSERT_THAT(audit.messages, SizeIs(1));
  EXPECT_EQ(audit.messages[0].txid(), id.raw());
}

TEST_F(store_tx_test, unknown_txid_fails_with_unknown_tx) {
  const txid id = protocol::uuid::make_v4();
  EXPECT_THAT(try_resolve(id, tx_outcome::commit), fails_with(errc::unknown_tx));
  EXPECT_THAT(try_resolve(id, tx_outcome::rollback), fails_with(errc::unknown_tx));
  EXPECT_EQ(find_tx(id), std::nullopt);
  record_checks({{id, 1, now() + 1000, false}});  // ignored
  EXPECT_EQ(find_tx(id), std::nullopt);
  EXPECT_THAT(due_check_ids(now() + 100'000), IsEmpty());
}

TEST_F(store_tx_test, record_checks_counts_and_moves_the_due_index) {
  const std::int64_t t0 = now();
  const txid id = prepare_two(t0 + 1'000);
  EXPECT_THAT(due_check_ids(t0 + 1'000), ElementsAre(id));
  advance(1'000);
  record_checks({{id, 1, t0 + 6'000, false}});
  auto tx = find_tx(id);
  EXPECT_EQ(tx->check_count, 1u);
  EXPECT_EQ(tx->next_check_ms, t0 + 6'000);
  EXPECT_EQ(tx->state, tx_state::prepared);
  EXPECT_THAT(due_check_ids(t0 + 5'999), IsEmpty()) << "the old due entry is still there";
  EXPECT_THAT(due_check_ids(t0 + 6'000), ElementsAre(id));
  EXPECT_THAT(due_check_ids(t0 + 100'000), ElementsAre(id));  // exactly once
}

TEST_F(store_tx_test, a_resolve_after_recorded_checks_sees_the_recorded_record) {
  // The writer keeps the record each Prepare built for the resolve (issue #15); a recorded
  // check changes the stored record, so the resolve must not use the Prepare's copy.
  const std::int64_t t0 = now();
  const txid id = prepare_two(t0 + 1'000);
  advance(1'000);
  record_checks({{id, 3, t0 + 9'000, false}});
  auto r = resolve(id, tx_outcome::commit);
  EXPECT_EQ(r.status, resolve_status::applied);
  EXPECT_EQ(r.before.check_count, 3u);
  EXPECT_EQ(r.before.next_check_ms, t0 + 9'000);
  auto tx = find_tx(id);
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->state, tx_state::committed);
  EXPECT_EQ(tx->check_count, 3u);
  EXPECT_EQ(total_messages("pay"), 2u);
  EXPECT_THAT(due_check_ids(t0 + 100'000), IsEmpty());

  // And a resolve straight after its Prepare (the cached record) stores the same outcome.
  const txid quick = prepare_two(t0 + 5'000);
  auto q = resolve(quick, tx_outcome::commit);
  EXPECT_EQ(q.status, resolve_status::applied);
  EXPECT_EQ(q.before.next_check_ms, t0 + 5'000);
  ASSERT_THAT(q.positions, SizeIs(2));
  auto stored = find_tx(quick);
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->state, tx_state::committed);
  ASSERT_THAT(stored->messages, SizeIs(2));
  EXPECT_TRUE(stored->messages[0].body().empty()) << "bodies live on in the log";
  EXPECT_EQ(stored->messages[0].offset(), q.positions[0].offset);
  EXPECT_EQ(total_messages("pay"), 4u);
}

TEST_F(store_tx_test, due_checks_are_earliest_first_and_limited) {
  const std::int64_t t0 = now();
  const txid a = prepare_two(t0 + 3'000);
  const txid b = prepare_two(t0 + 1'000);
  const txid c = prepare_two(t0 + 2'000);
  EXPECT_THAT(due_check_ids(t0 + 5'000), ElementsAre(b, c, a));
  EXPECT_THAT(due_check_ids(t0 + 5'000, 2), ElementsAre(b, c));
  EXPECT_THAT(due_check_ids(t0 + 2'000), ElementsAre(b, c));
}

TEST_F(store_tx_test, an_abandoned_tx_leaves_the_check_schedule_but_can_still_be_committed) {
  const txid id = prepare_two(now() + 1'000);
  record_checks({{id, 15, 0, true}});
  auto tx = find_tx(id);
  EXPECT_EQ(tx->state, tx_state::abandoned);
  EXPECT_EQ(tx->check_count, 15u);
  EXPECT_EQ(tx->next_check_ms, 0);
  EXPECT_THAT(tx->messages, SizeIs(2)) << "abandoned messages must stay";
  EXPECT_THAT(due_check_ids(now() + 1'000'000), IsEmpty());
  EXPECT_THAT(list_tx_ids(tx_state::abandoned), ElementsAre(id));
  EXPECT_THAT(list_tx_ids(tx_state::prepared), IsEmpty());

  record_checks({{id, 16, now() + 5'000, false}});  // no longer PREPARED: ignored
  EXPECT_EQ(find_tx(id)->check_count, 15u);
  EXPECT_THAT(due_check_ids(now() + 1'000'000), IsEmpty());

  auto r = resolve(id, tx_outcome::commit, resolver::operator_);
  EXPECT_EQ(r.status, resolve_status::applied);
  EXPECT_EQ(r.state, tx_state::committed);
  EXPECT_EQ(total_messages("pay"), 2u);
  EXPECT_EQ(find_tx(id)->resolved_by, resolver::operator_);
  EXPECT_THAT(list_tx_ids(tx_state::abandoned), IsEmpty());
}

TEST_F(store_tx_test, list_txs_filters_by_state_and_pages_after_a_txid) {
  std::vector<txid> all;
  std::vector<txid> committed;
  for (int i = 0; i < 5; ++i) {
    const txid id = prepare_two(now() + 6'000);
    all.push_back(id);
    if (i == 1 || i == 3) {
      resolve(id, tx_outcome::commit);
      committed.push_back(id);
    }
    if (i == 4) resolve(id, tx_outcome::rollback);
  }
  std::sort(all.begin(), all.end());
  std::sort(committed.begin(), committed.end());
  EXPECT_EQ(list_tx_ids(std::nullopt), all);
  EXPECT_EQ(list_tx_ids(tx_state::committed), committed);
  EXPECT_THAT(list_tx_ids(tx_state::rolled_back), SizeIs(1));
  EXPECT_THAT(list_tx_ids(tx_state::prepared), SizeIs(2));

  std::vector<txid> paged;
  std::optional<txid> after;
  for (int page = 0; page < 10; ++page) {
    auto ids = list_tx_ids(std::nullopt, 2, after);
    EXPECT_LE(ids.size(), 2u);
    if (ids.empty()) break;
    paged.insert(paged.end(), ids.begin(), ids.end());
    after = ids.back();
  }
  EXPECT_EQ(paged, all);
  auto rest = list_tx_ids(tx_state::committed, 10, committed[0]);
  EXPECT_THAT(rest, ElementsAre(committed[1]));
}

// A Prepare whose txid is above every stored tx key skips the RocksDB look-up (issue #15, tenth
// round): the bound must hold after a reopen too, or a retried Prepare of the newest
// transaction would be taken for a new one and overwrite its outcome or its record.
TEST_F(store_tx_test, retried_prepares_of_the_newest_transactions_are_recognised_after_reopen) {
  // UUIDv7, as the txmq clients make them: each greater than the one before.
  const txid older = protocol::uuid::make_v7();
  const txid prepared = protocol::uuid::make_v7();
  const txid committed = protocol::uuid::make_v7();
  ASSERT_LT(older, prepared);
  ASSERT_LT(prepared, committed);
  EXPECT_FALSE(prepare(prepared, {make_message("p", std::nullopt, "pay")}, now() + 6'000).duplicate);
  EXPECT_FALSE(prepare(committed, {make_message("c", std::nullopt, "pay")}, now() + 6'000).duplicate);
  resolve(committed, tx_outcome::commit);
  prepare_request retry;
  retry.id = committed;
  retry.producer_group = "producers";
  retry.messages = {make_message("again", std::nullopt, "pay")};
  EXPECT_THAT(try_prepare(retry), fails_with(errc::tx_not_prepared)) << "before reopen";

  reopen();
  EXPECT_THAT(try_prepare(retry), fails_with(errc::tx_not_prepared)) << "after reopen";
  EXPECT_EQ(find_tx(committed)->state, tx_state::committed);
  EXPECT_TRUE(prepare(prepared, {make_message("again", std::nullopt, "pay")}, now() + 9'000).duplicate);
  EXPECT_EQ(find_tx(prepared)->messages.at(0).body(), "p");
  // A new transaction below the greatest key is still new.
  EXPECT_FALSE(prepare(older, {make_message("o", std::nullopt, "pay")}, now() + 6'000).duplicate);
  EXPECT_EQ(total_messages("pay"), 1u);
}

TEST_F(store_tx_test, transactions_survive_reopen) {
  const std::int64_t t0 = now();
  const txid prepared = prepare_two(t0 + 1'000);
  record_checks({{prepared, 3, t0 + 9'000, false}});
  const txid committed = prepare_two(t0 + 1'000);
  const auto positions = resolve(committed, tx_outcome::commit).positions;
  const txid rolled_back = prepare_two(t0 + 1'000);
  resolve(rolled_back, tx_outcome::rollback, resolver::check);
  const txid abandoned = prepare_two(t0 + 1'000);
  record_checks({{abandoned, 15, 0, true}});

  reopen();
  auto p = find_tx(prepared);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->state, tx_state::prepared);
  EXPECT_EQ(p->check_count, 3u);
  EXPECT_EQ(p->next_check_ms, t0 + 9'000);
  EXPECT_THAT(p->messages, SizeIs(2));
  EXPECT_THAT(due_check_ids(t0 + 8'999), IsEmpty());
  EXPECT_THAT(due_check_ids(t0 + 9'000), ElementsAre(prepared));
  EXPECT_EQ(find_tx(committed)->state, tx_state::committed);
  EXPECT_EQ(find_tx(rolled_back)->state, tx_state::rolled_back);
  EXPECT_EQ(find_tx(rolled_back)->resolved_by, resolver::check);
  EXPECT_EQ(find_tx(abandoned)->state, tx_state::abandoned);
  EXPECT_EQ(find_tx(abandoned)->check_count, 15u);

  auto again = resolve(committed, tx_outcome::commit);
  EXPECT_EQ(again.status, resolve_status::repeated);
  EXPECT_EQ(again.positions, positions);
  EXPECT_EQ(resolve(rolled_back, tx_outcome::commit).status, resolve_status::conflict);
  auto late = resolve(prepared, tx_outcome::commit);
  EXPECT_EQ(late.status, resolve_status::applied);
  EXPECT_EQ(total_messages("pay"), 4u);
  EXPECT_THAT(due_check_ids(t0 + 1'000'000), IsEmpty());
}

TEST_F(store_tx_test, resolved_outcomes_expire_after_the_dedupe_window_on_compaction) {
  const txid committed = prepare_two(now() + 1'000);
  resolve(committed, tx_outcome::commit);
  const txid rolled_back = prepare_two(now() + 1'000);
  resolve(rolled_back, tx_outcome::rollback);
  const txid prepared = prepare_two(now() + 1'000);
  const txid abandoned = prepare_two(now() + 1'000);
  record_checks({{abandoned, 15, 0, true}});

  check_ok(store_->compact(), "compact");
  EXPECT_TRUE(find_tx(committed)) << "expired before the window passed";
  EXPECT_TRUE(find_tx(rolled_back));

  advance(k_dedupe_window.count() + 1);
  EXPECT_TRUE(find_tx(committed)) << "outcomes go only in compaction";
  check_ok(store_->compact(), "compact");
  EXPECT_EQ(find_tx(committed), std::nullopt);
  EXPECT_EQ(find_tx(rolled_back), std::nullopt);
  EXPECT_THAT(try_resolve(committed, tx_outcome::commit), fails_with(errc::unknown_tx));
  ASSERT_TRUE(find_tx(prepared));
  EXPECT_EQ(find_tx(prepared)->state, tx_state::prepared);
  ASSERT_TRUE(find_tx(abandoned));
  EXPECT_EQ(find_tx(abandoned)->state, tx_state::abandoned);
  EXPECT_EQ(total_messages("pay"), 2u) << "committed messages live on in the log";

  reopen();
  EXPECT_EQ(find_tx(committed), std::nullopt);
  EXPECT_TRUE(find_tx(prepared));
}

TEST_F(store_tx_test, a_refused_prepare_creates_no_topic) {
  prepare_request req;
  req.id = protocol::uuid::make_v4();
  req.producer_group = "producers";
  req.messages = {make_message("m", std::nullopt, "brand-new-topic")};
  req.auto_create_partitions = 4;
  req.acks = {ack_ref{"g", "no-such-topic", 0, 0}};
  EXPECT_THAT(try_prepare(req), fails_with(errc::invalid_argument));
  EXPECT_FALSE(store_->topic("brand-new-topic").has_value());
  reopen();
  EXPECT_FALSE(store_->topic("brand-new-topic").has_value());
}

TEST_F(store_tx_test, a_prepare_without_a_first_check_is_never_due) {
  prepare_request req;
  req.id = protocol::uuid::make_v4();
  req.producer_group = "producers";
  req.messages = {make_message("m", std::nullopt, "pay")};
  req.first_check_ms = 0;
  ASSERT_THAT(try_prepare(req), is_ok());
  auto due = store_->due_checks(now() + 1'000'000, 10);
  ASSERT_TRUE(due);
  EXPECT_TRUE(due.value().empty());
}

TEST_F(store_tx_test, due_checks_start_at_from_ms) {
  const auto early = protocol::uuid::make_v4();
  const auto late = protocol::uuid::make_v4();
  prepare(early, {make_message("a", std::nullopt, "pay")}, 1'000);
  prepare(late, {make_message("b", std::nullopt, "pay")}, 2'000);
  auto all = store_->due_checks(5'000, 10);
  ASSERT_TRUE(all);
  EXPECT_EQ(all.value().size(), 2u);
  auto from = store_->due_checks(5'000, 10, 1'001);
  ASSERT_TRUE(from);
  ASSERT_EQ(from.value().size(), 1u);
  EXPECT_EQ(from.value()[0].id, late);
  auto inclusive = store_->due_checks(5'000, 10, 1'000);
  ASSERT_TRUE(inclusive);
  EXPECT_EQ(inclusive.value().size(), 2u);
}

TEST_F(store_tx_test, tx_and_due_index_writes_of_one_commit_group_keep_each_keys_last_write) {
  // The tx and index families' writes of a commit group reach RocksDB at the group's end, in
  // key order, each key once with its last write (issue #15). A key put and deleted in one
  // group must be gone; one deleted and put back must stay; a record written twice in one
  // group must hold the second.
  std::promise<void> holding;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> hold{false};
  tweak_options = [&](store_options& o) {
    o.observe_queue = [&hold, &holding, released](std::chrono::nanoseconds) {
      if (hold.exchange(false)) {
        holding.set_value();
        released.wait();
      }
    };
  };
  reopen();
  const std::int64_t t0 = now();
  const txid c = prepare_two(t0 + 1'000);  // durable before the group
  // The writer waits inside this request's group until everything below is queued, so all of
  // it lands in the next group.
  hold = true;
  countdown all(7);
  store_->record_checks({}, [&](result<void>) { all.done(); });
  ASSERT_EQ(holding.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const txid a = protocol::uuid::make_v4();
  const txid b = protocol::uuid::make_v4();
  std::vector<std::string> failures;
  std::mutex mu;
  auto note = [&](const auto& r) {
    std::lock_guard lk(mu);
    if (!r) failures.push_back(r.error().to_string());
    all.done();
  };
  auto prep = [&](const txid& id, std::int64_t first_check_ms) {
    prepare_request req;
    req.id = id;
    req.producer_group = "producers";
    req.messages = {make_message("m", "k", "pay")};
    req.first_check_ms = first_check_ms;
    store_->prepare(std::move(req), [&](result<prepare_result> r) { note(r); });
  };
  prep(a, t0 + 2'000);                                                        // put a@2000
  store_->resolve({a, tx_outcome::commit}, [&](result<resolve_result> r) { note(r); });  // delete a@2000
  prep(b, t0 + 3'000);                                                        // put b@3000
  store_->record_checks({{b, 1, t0 + 4'000, false}}, [&](result<void> r) { note(r); });  // b@3000 -> b@4000
  store_->record_checks({{c, 1, t0 + 5'000, false}}, [&](result<void> r) { note(r); });  // c@1000 -> c@5000
  store_->record_checks({{c, 2, t0 + 1'000, false}}, [&](result<void> r) { note(r); });  // c@5000 -> c@1000
  release.set_value();
  ASSERT_TRUE(all.wait_for(std::chrono::seconds(10)));
  EXPECT_THAT(failures, IsEmpty());
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "before reopen" : "after reopen");
    EXPECT_THAT(due_check_ids(t0 + 100'000), ElementsAre(c, b)) << "each PREPARED tx due exactly once";
    EXPECT_THAT(due_check_ids(t0 + 3'999), ElementsAre(c));
    EXPECT_EQ(find_tx(c)->next_check_ms, t0 + 1'000);
    EXPECT_EQ(find_tx(c)->check_count, 2u);
    EXPECT_EQ(find_tx(b)->next_check_ms, t0 + 4'000);
    EXPECT_EQ(find_tx(a)->state, tx_state::committed);
    reopen();
  }
}

}  // namespace
}  // namespace txmq::storage::test
