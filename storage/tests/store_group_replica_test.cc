// Store unit tests of consumer-group replication (replica.h, docs/cluster.md "Consumer
// groups"): the change sequence a leader writes with store_options::log_group_changes, a
// follower applying it at the same seqs, snapshots replacing a diverged follower's state,
// followed partitions refusing local changes, and single-node mode writing none of it.

#include "store_test_fixture.h"

namespace txmq::storage::test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class group_replica_test : public store_test {
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
  }
  void TearDown() override {
    if (follower_) follower_->close();
    follower_.reset();
    std::error_code ec;
    fs::remove_all(follower_dir_, ec);
    store_test::TearDown();
  }

  // Topic "t" (2 partitions) with n messages in partition 0, on both stores (the follower's by
  // replica_append, as replication does), and group "g" on the leader.
  void setup(int n) {
    create_topic("t", 2);
    value_of(call_sync<std::uint64_t>([&](auto done) { store_->begin_epoch("t", 0, 1, done); }), "begin_epoch");
    std::vector<v1::Message> batch;
    for (int i = 0; i < n; ++i) batch.push_back(make_message(std::to_string(i)));
    append_request req;
    req.topic = "t";
    req.messages = batch;
    req.partitions.assign(batch.size(), 0);
    value_of(try_append(std::move(req)), "append");
    replica_append_request ra;
    ra.topic = "t";
    ra.partition = 0;
    ra.leader_epoch = 1;
    ra.messages = batch;
    ra.auto_create_partitions = 2;
    value_of(call_sync<std::uint64_t>([&](auto done) { follower_->replica_append(std::move(ra), done); }), "replica_append");
    ensure_group("g", {"t"});
  }

  group_changes_read changes(store& s, std::uint64_t from = 0) {
    return value_of(s.group_changes("t", 0, from, 10'000), "group_changes");
  }
  // Copies the leader's changes from the follower's end on, as the follower's fetch does.
  result<std::uint64_t> replicate() {
    auto have = changes(*follower_).end;
    auto r = changes(*store_, have);
    if (r.snapshot_needed) return errc::invalid_argument;
    return call_sync<std::uint64_t>([&](auto done) { follower_->apply_group_changes("t", 0, r.changes, done); });
  }
  std::uint64_t install(store& to, const v1::GroupSnapshot& snap) {
    return value_of(call_sync<std::uint64_t>([&](auto done) { to.install_group_snapshot("t", 0, snap, done); }),
                    "install_group_snapshot");
  }
  // A group's state of partition t/0 as a comparable string.
  static std::string state_of(store& s, const std::string& group) {
    auto g = s.load_group(group);
    if (!g) return "error: " + g.error().message;
    std::string out;
    for (auto& c : g.value().cursors) {
      if (c.topic == "t" && c.partition == 0) out += "cursor " + std::to_string(c.ack_floor) + ".." + std::to_string(c.next_offset) + ";";
    }
    for (auto& d : g.value().deliveries) {
      if (d.topic == "t" && d.partition == 0) {
        out += "d" + std::to_string(d.offset) + " a" + std::to_string(d.attempt) + " s" +
               std::to_string(static_cast<int>(d.status)) + " v" + std::to_string(d.visible_at_ms) + ";";
      }
    }
    auto dead = s.dead_letters(group, 1000);
    if (dead) {
      for (auto& q : dead.value()) out += "dead" + std::to_string(q.offset) + " x" + std::to_string(q.attempts) + " " + q.reason + ";";
    }
    return out;
  }
  group_update_result update(group_update u) { return update_group(std::move(u)); }

  fs::path follower_dir_;
  std::unique_ptr<store> follower_;
};

TEST_F(group_replica_test, every_group_change_is_logged_with_its_seq_and_an_ack_answers_where_it_ends) {
  setup(5);
  // ensure_group logged the cursors of both partitions (seq 0 of each).
  auto c0 = changes(*store_);
  ASSERT_EQ(c0.changes.size(), 1u);
  EXPECT_EQ(c0.end, 1u);
  EXPECT_EQ(c0.changes[0].group(), "g");
  EXPECT_EQ(c0.changes[0].leader_epoch(), 1);
  EXPECT_EQ(value_of(store_->group_changes("t", 1, 0, 10), "p1").end, 1u);

  group_update u;
  u.group = "g";
  u.dispatched = {{"t", 0, 0, 3}};
  u.deliveries = {{"t", 0, 1, 2, now() + 1000, delivery_status::in_flight}};
  update(u);
  group_update a;
  a.group = "g";
  a.acks = {{"t", 0, 0}};
  auto r = update(a);
  EXPECT_THAT(r.changes, ElementsAre(group_change_ref{"t", 0, 3}));
  auto all = changes(*store_);
  ASSERT_EQ(all.changes.size(), 3u);
  EXPECT_EQ(all.changes[2].seq(), 2u);
  EXPECT_THAT(all.changes[2].acks(), ElementsAre(0u));
  EXPECT_EQ(all.changes[2].cursor_floor(), 1u);
  EXPECT_EQ(all.changes[2].cursor_next(), 3u);
  // Reading from a seq: only what follows; beyond the end: the asker diverged.
  EXPECT_EQ(changes(*store_, 2).changes.size(), 1u);
  EXPECT_TRUE(changes(*store_, 7).snapshot_needed);
  // The end survives a reopen.
  reopen();
  EXPECT_EQ(changes(*store_).end, 3u);
}

// Read-process-write's hold (issue 14): the holding transaction's txid is stored with the
// in-flight delivery (an optional tail of the record: records without one still read), carried
// by the change sequence and by the snapshot, and gone once the delivery is done.
TEST_F(group_replica_test, a_deliverys_holder_is_replicated_by_changes_and_snapshots) {
  setup(3);
  const std::string tx(16, 'x');
  group_update u;
  u.group = "g";
  u.dispatched = {{"t", 0, 0, 3}};
  delivery_record held{"t", 0, 1, 1, now() + 86'400'000, delivery_status::in_flight, tx};
  u.deliveries = {held, {"t", 0, 2, 1, now() + 1000, delivery_status::in_flight, {}}};
  update(u);
  // The holder as the whole group's load and as a new leader's load of the one partition
  // (load_group_partition, what a node that starts leading it reloads) read it: both must.
  auto holder_of = [](store& s, std::uint64_t offset) -> std::string {
    std::string found[2];
    int i = 0;
    for (auto g : {s.load_group("g"), s.load_group_partition("g", "t", 0)}) {
      std::string& out = found[i++];
      out = "no record";
      if (!g) out = "error";
      for (auto& d : g ? g.value().deliveries : std::vector<delivery_record>{}) {
        if (d.topic == "t" && d.partition == 0 && d.offset == offset) out = d.holder.empty() ? "none" : d.holder;
      }
    }
    return found[0] == found[1] ? found[0] : "load_group: " + found[0] + ", load_group_partition: " + found[1];
  };
  EXPECT_EQ(holder_of(*store_, 1), tx);
  EXPECT_EQ(holder_of(*store_, 2), "none");
  value_of(replicate(), "replicate");
  EXPECT_EQ(holder_of(*follower_, 1), tx) << "by the change sequence";
  EXPECT_EQ(holder_of(*follower_, 2), "none");
  // A snapshot carries it too (a wiped or diverged follower).
  auto snap = value_of(store_->group_snapshot("t", 0), "group_snapshot");
  install(*follower_, snap);
  EXPECT_EQ(holder_of(*follower_, 1), tx) << "by the snapshot";
  reopen();
  EXPECT_EQ(holder_of(*store_, 1), tx) << "after a reopen";
  // Acked above the floor (offset 0 is not done): the done record holds nobody.
  group_update a;
  a.group = "g";
  a.acks = {{"t", 0, 1}};
  update(a);
  EXPECT_NE(holder_of(*store_, 1), tx) << "a done record holds nobody";
}

TEST_F(group_replica_test, a_follower_applying_the_changes_holds_the_leaders_state_acks_attempts_and_dead_letters) {
  setup(6);
  group_update u;
  u.group = "g";
  u.dispatched = {{"t", 0, 0, 6}};
  update(u);
  group_update s;  // a redelivery (attempt 3) and a nack's retry record
  s.group = "g";
  s.deliveries = {{"t", 0, 2, 3, now() + 500, delivery_status::in_flight}, {"t", 0, 4, 2, now() + 9000, delivery_status::waiting}};
  update(s);
  group_update a;
  a.group = "g";
  a.acks = {{"t", 0, 0}, {"t", 0, 1}, {"t", 0, 3}};
  a.dead = {{"t", 0, 5, 16, 0, "nacked after 16 attempts"}};
  update(a);
  ASSERT_THAT(replicate(), is_ok());
  EXPECT_EQ(state_of(*follower_, "g"), state_of(*store_, "g"));
  EXPECT_NE(state_of(*store_, "g").find("dead5 x16"), std::string::npos);
  EXPECT_EQ(changes(*follower_).end, changes(*store_).end);
  // And again after more changes, incrementally: the floor moves over the acked prefix.
  group_update b;
  b.group = "g";
  b.acks = {{"t", 0, 2}};
  b.redrive = {{"t", 0, 5}};
  advance(10);
  update(b);
  ASSERT_THAT(replicate(), is_ok());
  EXPECT_EQ(state_of(*follower_, "g"), state_of(*store_, "g"));
  EXPECT_NE(state_of(*follower_, "g").find("cursor 4..6"), std::string::npos);
  // The group's record came with its changes: the follower lists the group.
  ASSERT_EQ(follower_->groups().size(), 1u);
  EXPECT_THAT(follower_->groups()[0].topics, ElementsAre("t"));
}

TEST_F(group_replica_test, a_change_that_does_not_continue_the_sequence_is_refused_whole) {
  setup(3);
  group_update u;
  u.group = "g";
  u.acks = {{"t", 0, 0}};
  update(u);
  auto all = changes(*store_);
  ASSERT_EQ(all.changes.size(), 2u);
  // Without the first change: refused, nothing written.
  auto r = call_sync<std::uint64_t>([&](auto done) {
    follower_->apply_group_changes("t", 0, {all.changes[1]}, done);
  });
  EXPECT_THAT(r, fails_with(errc::invalid_argument));
  EXPECT_EQ(changes(*follower_).end, 0u);
  EXPECT_TRUE(follower_->groups().empty());
}

TEST_F(group_replica_test, a_snapshot_replaces_a_diverged_followers_state_and_the_sequence_continues_from_it) {
  setup(6);
  group_update u;
  u.group = "g";
  u.dispatched = {{"t", 0, 0, 6}};
  u.acks = {{"t", 0, 0}, {"t", 0, 1}};
  u.dead = {{"t", 0, 3, 2, 0, "nacked after 2 attempts"}};
  update(u);
  // The follower holds changes the leader never made (an old leader's): its own group "x",
  // another state of "g" and more seqs than the leader.
  follower_->begin_epoch("t", 0, 1, [](result<std::uint64_t>) {});
  value_of(call_sync<group_state>([&](auto done) { follower_->ensure_group({"x", {"t"}, 0}, group_start::earliest, done); }), "x");
  value_of(call_sync<group_state>([&](auto done) { follower_->ensure_group({"g", {"t"}, 0}, group_start::earliest, done); }), "g");
  for (int i = 0; i < 5; ++i) {
    group_update d;
    d.group = "x";
    d.acks = {{"t", 0, static_cast<std::uint64_t>(i)}};
    d.dead = {{"t", 0, 5, 9, 0, "junk"}};
    value_of(call_sync<group_update_result>([&](auto done) { follower_->update_group(d, done); }), "x update");
  }
  EXPECT_TRUE(changes(*store_, changes(*follower_).end).snapshot_needed);

  auto snap = value_of(store_->group_snapshot("t", 0), "group_snapshot");
  EXPECT_EQ(snap.next_seq(), changes(*store_).end);
  EXPECT_EQ(install(*follower_, snap), snap.next_seq());
  EXPECT_EQ(state_of(*follower_, "g"), state_of(*store_, "g"));
  EXPECT_EQ(state_of(*follower_, "x"), "");  // the junk of partition 0 is gone
  EXPECT_EQ(changes(*follower_).end, snap.next_seq());
  // Then it follows change by change again, and survives a reopen.
  group_update a;
  a.group = "g";
  a.acks = {{"t", 0, 2}};
  update(a);
  ASSERT_THAT(replicate(), is_ok());
  EXPECT_EQ(state_of(*follower_, "g"), state_of(*store_, "g"));
  EXPECT_NE(state_of(*follower_, "g").find("dead3 x2"), std::string::npos);
  follower_->close();
  follower_.reset();
  auto o = options();
  o.dir = follower_dir_;
  follower_ = value_of(open_store(o), "reopen follower");
  EXPECT_EQ(changes(*follower_).end, changes(*store_).end);
  EXPECT_EQ(state_of(*follower_, "g"), state_of(*store_, "g"));
}

TEST_F(group_replica_test, a_followed_partition_takes_no_local_group_change_until_its_node_leads_it) {
  setup(4);
  ASSERT_THAT(replicate(), is_ok());
  const auto before = state_of(*follower_, "g");
  const auto end = changes(*follower_).end;
  group_update u;
  u.group = "g";
  u.dispatched = {{"t", 0, 0, 4}};
  u.acks = {{"t", 0, 0}};
  auto r = value_of(call_sync<group_update_result>([&](auto done) { follower_->update_group(u, done); }), "update");
  EXPECT_THAT(r.changes, IsEmpty());
  EXPECT_EQ(state_of(*follower_, "g"), before);
  EXPECT_EQ(changes(*follower_).end, end);
  // Leading it (its epoch recorded): its own changes count again, after the replicated ones.
  value_of(call_sync<std::uint64_t>([&](auto done) { follower_->begin_epoch("t", 0, 2, done); }), "begin_epoch");
  r = value_of(call_sync<group_update_result>([&](auto done) { follower_->update_group(u, done); }), "update");
  EXPECT_THAT(r.changes, ElementsAre(group_change_ref{"t", 0, end + 1}));
  auto last = changes(*follower_, end);
  ASSERT_EQ(last.changes.size(), 1u);
  EXPECT_EQ(last.changes[0].leader_epoch(), 2);
}

TEST_F(group_replica_test, a_group_learned_while_following_gets_the_partitions_cursor_once_its_node_leads_it) {
  setup(4);
  ASSERT_THAT(replicate(), is_ok());  // the follower's partition 0 is followed from here on
  auto ensure = [&](const std::string& name) {
    return value_of(call_sync<group_state>([&](auto done) { follower_->ensure_group({name, {"t"}, 0}, group_start::earliest, done); }),
                    "ensure_group");
  };
  auto cursors = [](const group_state& g) {
    std::vector<std::uint32_t> out;
    for (auto& c : g.cursors) out.push_back(c.partition);
    return out;
  };
  EXPECT_THAT(cursors(ensure("late")), ElementsAre(1u));  // partition 0 is the leader's to start
  EXPECT_THAT(cursors(ensure("late")), ElementsAre(1u));
  value_of(call_sync<std::uint64_t>([&](auto done) { follower_->begin_epoch("t", 0, 2, done); }), "begin_epoch");
  auto g = ensure("late");
  EXPECT_THAT(cursors(g), ElementsAre(0u, 1u));
  EXPECT_EQ(g.cursors[0].ack_floor, 0u);
}

class group_replica_off_test : public store_test {};

TEST_F(group_replica_off_test, single_node_mode_writes_no_change_sequence) {
  create_topic("t", 1);
  append("t", {make_message("a")});
  ensure_group("g", {"t"});
  group_update u;
  u.group = "g";
  u.acks = {{"t", 0, 0}};
  auto r = update_group(u);
  EXPECT_THAT(r.changes, IsEmpty());
  EXPECT_EQ(value_of(store_->group_changes("t", 0, 0, 10), "group_changes").end, 0u);
  EXPECT_THAT(value_of(store_->group_changes("t", 0, 0, 10), "group_changes").changes, IsEmpty());
}

}  // namespace
}  // namespace txmq::storage::test
