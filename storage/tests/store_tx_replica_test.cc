// Store unit tests of transactions replicated with their home partition (docs/cluster.md
// "Transactions"): a home transaction's prepare, outcome, check counts and copy mark written
// into the home partition's change sequence; a follower applying them holds the leader's
// records (due index included); a snapshot replacing a diverged follower's transactions of the
// partition; a COMMIT writing no message locally; a followed partition refusing Prepare.

#include "store_test_fixture.h"

namespace txmq::storage::test {
namespace {

class tx_replica_test : public store_test {
 protected:
  void SetUp() override {
    tweak_options = [](store_options& o) { o.log_group_changes = true; };
    store_test::SetUp();
    follower_dir_ = dir_;
    follower_dir_ += "-follower";
    fs::remove_all(follower_dir_);
    auto o = options();
    o.dir = follower_dir_;
    follower_ = value_of(open_store(o), "open follower");
    create_topic("t", 2);
    value_of(call_sync<std::uint64_t>([&](auto done) { store_->begin_epoch("t", 0, 1, done); }), "begin_epoch");
    // The follower learns the topic as replication does (an empty append creates it).
    replica_append_request ra;
    ra.topic = "t";
    ra.partition = 0;
    ra.leader_epoch = 1;
    ra.auto_create_partitions = 2;
    ra.messages = {make_message("x")};
    value_of(call_sync<std::uint64_t>([&](auto done) { follower_->replica_append(ra, done); }), "replica_append");
    append_request a;
    a.topic = "t";
    a.messages = ra.messages;
    a.partitions = {0};
    value_of(try_append(std::move(a)), "append");
  }
  void TearDown() override {
    if (follower_) follower_->close();
    follower_.reset();
    std::error_code ec;
    fs::remove_all(follower_dir_, ec);
    store_test::TearDown();
  }

  prepare_request home_prepare(const txid& id, std::int64_t first_check) {
    prepare_request req;
    req.id = id;
    req.producer_group = "producers";
    auto m1 = make_message("debit", "k1", "t");
    m1.set_partition(1);
    auto m2 = make_message("credit", std::nullopt, "t");
    m2.set_partition(0);
    req.messages = {m1, m2};
    req.first_check_ms = first_check;
    req.home_topic = "t";
    req.home_partition = 0;
    return req;
  }
  group_changes_read changes(store& s, std::uint64_t from = 0) {
    return value_of(s.group_changes("t", 0, from, 10'000), "group_changes");
  }
  std::uint64_t replicate() {
    auto have = changes(*follower_).end;
    auto r = changes(*store_, have);
    EXPECT_FALSE(r.snapshot_needed);
    return value_of(call_sync<std::uint64_t>([&](auto done) { follower_->apply_group_changes("t", 0, r.changes, done); }),
                    "apply_group_changes");
  }
  static std::optional<tx_record> tx_of(store& s, const txid& id) { return value_of(s.find_tx(id), "find_tx"); }

  fs::path follower_dir_;
  std::unique_ptr<store> follower_;
};

TEST_F(tx_replica_test, prepare_outcome_checks_and_copy_travel_in_the_home_partitions_sequence) {
  const txid id = protocol::uuid::make_v7();
  const std::int64_t first_check = now() + 6'000;
  auto p = value_of(try_prepare(home_prepare(id, first_check)), "prepare");
  ASSERT_TRUE(p.change);
  EXPECT_EQ(p.change->topic, "t");
  EXPECT_EQ(p.change->partition, 0u);
  const std::uint64_t after_prepare = p.change->end_seq;
  auto c = changes(*store_);
  ASSERT_EQ(c.end, after_prepare);
  EXPECT_FALSE(c.changes.back().tx().empty());
  EXPECT_TRUE(c.changes.back().group().empty());
  // A retried Prepare waits for the same end.
  auto again = value_of(try_prepare(home_prepare(id, first_check)), "prepare again");
  EXPECT_TRUE(again.duplicate);
  ASSERT_TRUE(again.change);
  EXPECT_EQ(again.change->end_seq, after_prepare);

  // The follower holds the prepared record, its due entry, its home.
  EXPECT_EQ(replicate(), after_prepare);
  auto f = tx_of(*follower_, id);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->state, tx_state::prepared);
  EXPECT_EQ(f->home_topic, "t");
  EXPECT_EQ(f->messages.size(), 2u);
  EXPECT_EQ(f->messages[0].body(), "debit");
  auto due = value_of(follower_->due_checks(first_check, 10), "due_checks");
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].id, id);

  // A check count is replicated and moves the follower's due entry.
  record_checks({{id, 1, first_check + 5'000, false}});
  replicate();
  EXPECT_EQ(tx_of(*follower_, id)->check_count, 1u);
  EXPECT_TRUE(value_of(follower_->due_checks(first_check, 10), "due").empty());
  EXPECT_EQ(value_of(follower_->due_checks(first_check + 5'000, 10), "due").size(), 1u);

  // COMMIT writes nothing into a partition here; the record keeps bodies and target partitions.
  const auto end_before = store_->topic("t")->partitions;
  auto r = resolve(id, tx_outcome::commit);
  EXPECT_EQ(r.status, resolve_status::applied);
  ASSERT_TRUE(r.change);
  EXPECT_TRUE(r.positions.empty());
  EXPECT_EQ(store_->topic("t")->partitions[1].next_offset, end_before[1].next_offset);
  auto l = tx_of(*store_, id);
  EXPECT_EQ(l->state, tx_state::committed);
  EXPECT_FALSE(l->copied);
  EXPECT_EQ(l->messages[0].body(), "debit");
  EXPECT_EQ(l->messages[0].partition(), 1u);
  // A repeated EndTx waits again (its first answer may have been lost before the ISR had it).
  auto rep = resolve(id, tx_outcome::commit);
  EXPECT_EQ(rep.status, resolve_status::repeated);
  ASSERT_TRUE(rep.change);
  EXPECT_EQ(rep.change->end_seq, r.change->end_seq);
  replicate();
  f = tx_of(*follower_, id);
  EXPECT_EQ(f->state, tx_state::committed);
  EXPECT_FALSE(f->copied);
  EXPECT_EQ(f->messages[1].body(), "credit");
  EXPECT_TRUE(value_of(follower_->due_checks(now() + 3'600'000, 10), "due").empty());

  auto m = value_of(call_sync<std::optional<group_change_ref>>([&](auto done) { store_->mark_copied(id, done); }),
                    "mark_copied");
  ASSERT_TRUE(m);
  EXPECT_FALSE(value_of(call_sync<std::optional<group_change_ref>>([&](auto done) { store_->mark_copied(id, done); }),
                        "mark_copied again"));
  replicate();
  f = tx_of(*follower_, id);
  EXPECT_TRUE(f->copied);
  EXPECT_TRUE(f->messages[0].body().empty());

  // Survives a reopen of the follower's view: the sequence end too.
  reopen();
  EXPECT_EQ(changes(*store_).end, m->end_seq);
}

TEST_F(tx_replica_test, a_snapshot_replaces_a_diverged_followers_transactions_of_the_partition) {
  const txid kept = protocol::uuid::make_v7();
  value_of(try_prepare(home_prepare(kept, now() + 6'000)), "prepare");
  replicate();
  // The follower holds a transaction its new leader never wrote: it led the partition for a
  // while (cut off) and prepared one there, with a due entry.
  const txid junk = protocol::uuid::make_v7();
  value_of(call_sync<std::uint64_t>([&](auto done) { follower_->begin_epoch("t", 0, 2, done); }), "follower epoch");
  std::swap(store_, follower_);
  value_of(try_prepare(home_prepare(junk, now() + 1'000)), "junk prepare");
  std::swap(store_, follower_);
  ASSERT_TRUE(tx_of(*follower_, junk));
  resolve(kept, tx_outcome::rollback);
  auto snap = value_of(store_->group_snapshot("t", 0), "snapshot");
  ASSERT_EQ(snap.txs_size(), 1);
  value_of(call_sync<std::uint64_t>([&](auto done) { follower_->install_group_snapshot("t", 0, snap, done); }),
           "install");
  EXPECT_FALSE(tx_of(*follower_, junk));
  EXPECT_TRUE(value_of(follower_->due_checks(now() + 3'600'000, 10), "due").empty());
  auto f = tx_of(*follower_, kept);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->state, tx_state::rolled_back);
  EXPECT_TRUE(f->messages[0].body().empty());
  // And it follows change by change after it.
  const txid next = protocol::uuid::make_v7();
  value_of(try_prepare(home_prepare(next, now() + 6'000)), "prepare next");
  replicate();
  EXPECT_TRUE(tx_of(*follower_, next));
}

TEST_F(tx_replica_test, a_followed_partition_takes_no_prepare_and_a_single_nodes_tx_logs_nothing) {
  // The follower does not own t/0 once it follows the leader's changes: a Prepare homed there
  // is refused.
  value_of(try_prepare(home_prepare(protocol::uuid::make_v7(), now() + 6'000)), "leader prepare");
  replicate();
  std::swap(store_, follower_);
  EXPECT_THAT(try_prepare(home_prepare(protocol::uuid::make_v7(), now() + 6'000)), fails_with(errc::invalid_argument));
  std::swap(store_, follower_);
  // Without a home (single-node shape), nothing enters the sequence.
  const auto before = changes(*store_).end;
  prepare(protocol::uuid::make_v7(), {make_message("a", std::nullopt, "t")}, now() + 6'000);
  EXPECT_EQ(changes(*store_).end, before);
}

// The index of unresolved transactions (PREPARED: due entries; ABANDONED: 'a' entries) is kept
// by a follower from the replicated records and from a snapshot, so a follower that becomes
// the leader starts its gauges and lists from it, and agrees with a scan of every record.
TEST_F(tx_replica_test, a_follower_keeps_the_unresolved_index_through_changes_and_snapshots) {
  auto ids = [](store& s, tx_state st) {
    std::vector<txid> out;
    for (auto& t : value_of(s.list_txs(st, 1000), "list_txs")) out.push_back(t.id);
    return out;
  };
  auto scanned = [](store& s, tx_state st) {
    std::vector<txid> out;
    for (auto& t : value_of(s.list_txs(std::nullopt, 1000), "list_txs")) {
      if (t.state == st) out.push_back(t.id);
    }
    return out;
  };
  auto agree = [&](store& s, std::size_t prepared, std::size_t abandoned) {
    auto n = value_of(s.count_unresolved_txs(), "count_unresolved_txs");
    EXPECT_EQ(n.prepared, prepared);
    EXPECT_EQ(n.abandoned, abandoned);
    EXPECT_EQ(ids(s, tx_state::prepared), scanned(s, tx_state::prepared));
    EXPECT_EQ(ids(s, tx_state::abandoned), scanned(s, tx_state::abandoned));
    EXPECT_EQ(scanned(s, tx_state::prepared).size(), prepared);
    EXPECT_EQ(scanned(s, tx_state::abandoned).size(), abandoned);
  };
  const txid abandoned = protocol::uuid::make_v7();
  const txid prepared = protocol::uuid::make_v7();
  const txid committed = protocol::uuid::make_v7();
  for (auto& id : {abandoned, prepared, committed}) value_of(try_prepare(home_prepare(id, now() + 6'000)), "prepare");
  record_checks({{abandoned, 15, 0, true}});
  resolve(committed, tx_outcome::commit);
  replicate();
  agree(*store_, 1, 1);
  agree(*follower_, 1, 1);
  EXPECT_EQ(ids(*follower_, tx_state::abandoned), std::vector<txid>{abandoned});

  // An operator's decision on the abandoned one leaves the follower's index too.
  EXPECT_EQ(resolve(abandoned, tx_outcome::rollback, resolver::operator_).status, resolve_status::applied);
  replicate();
  agree(*follower_, 1, 0);

  // The follower led for a while (cut off) and abandoned a transaction of its own there; the
  // leader abandoned another meanwhile. The snapshot replaces the follower's entries with the
  // leader's.
  const txid junk = protocol::uuid::make_v7();
  value_of(call_sync<std::uint64_t>([&](auto done) { follower_->begin_epoch("t", 0, 2, done); }), "follower epoch");
  std::swap(store_, follower_);
  value_of(try_prepare(home_prepare(junk, now() + 1'000)), "junk prepare");
  record_checks({{junk, 15, 0, true}});
  record_checks({{prepared, 3, 0, true}});
  agree(*store_, 0, 2);
  std::swap(store_, follower_);
  const txid later = protocol::uuid::make_v7();
  value_of(try_prepare(home_prepare(later, now() + 6'000)), "prepare later");
  record_checks({{later, 15, 0, true}});
  auto snap = value_of(store_->group_snapshot("t", 0), "snapshot");
  value_of(call_sync<std::uint64_t>([&](auto done) { follower_->install_group_snapshot("t", 0, snap, done); }),
           "install");
  agree(*follower_, 1, 1);
  EXPECT_EQ(ids(*follower_, tx_state::prepared), std::vector<txid>{prepared});
  EXPECT_EQ(ids(*follower_, tx_state::abandoned), std::vector<txid>{later});
}

}  // namespace
}  // namespace txmq::storage::test
