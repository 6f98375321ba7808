// Store unit tests: consumer groups (cursors, deliveries, acks, dead letters, due index).

#include "store_test_fixture.h"

namespace txmq::storage::test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

std::vector<std::string> due_keys(const std::vector<due_delivery>& due) {
  std::vector<std::string> out;
  for (auto& d : due) out.push_back(d.group + "/" + d.delivery.topic + "/" + std::to_string(d.delivery.offset));
  return out;
}

class store_group_test : public store_test {
 protected:
  // Topic "t" (one partition) with n messages and group "g" consuming it from the earliest.
  void with_messages(int n) {
    create_topic("t", 1);
    std::vector<v1::Message> batch;
    for (int i = 0; i < n; ++i) batch.push_back(make_message(std::to_string(i)));
    append("t", std::move(batch));
    ensure_group("g", {"t"});
  }

  // Dispatches offsets [0, n) of "t" to group g, in flight until now + 30 s.
  void dispatch(std::uint64_t n) {
    group_update u;
    u.group = "g";
    u.dispatched = {{"t", 0, 0, n}};
    for (std::uint64_t o = 0; o < n; ++o) u.deliveries.push_back(in_flight(o));
    update_group(u);
  }

  delivery_record in_flight(std::uint64_t offset, std::int64_t deadline_in = 30'000) {
    return {"t", 0, offset, 1, now() + deadline_in, delivery_status::in_flight};
  }

  group_update_result ack(std::vector<std::uint64_t> offsets) {
    group_update u;
    u.group = "g";
    for (auto o : offsets) u.acks.push_back({"t", 0, o});
    return update_group(u);
  }
};

TEST_F(store_group_test, ensure_group_starts_at_the_earliest_or_the_latest_offset) {
  create_topic("t", 2);
  append("t", {make_message("a"), make_message("b"), make_message("c"), make_message("d")});
  auto early = ensure_group("early", {"t"}, group_start::earliest);
  EXPECT_EQ(early.info.name, "early");
  EXPECT_THAT(early.info.topics, ElementsAre("t"));
  EXPECT_EQ(early.info.created_ms, k_start_ms);
  EXPECT_THAT(early.cursors, ElementsAre(group_cursor{"t", 0, 0, 0}, group_cursor{"t", 1, 0, 0}));
  EXPECT_THAT(early.deliveries, IsEmpty());
  auto late = ensure_group("late", {"t"}, group_start::latest);
  EXPECT_THAT(late.cursors, ElementsAre(group_cursor{"t", 0, 2, 2}, group_cursor{"t", 1, 2, 2}));
  std::vector<std::string> names;
  for (auto& g : store_->groups()) names.push_back(g.name);
  EXPECT_THAT(names, ElementsAre("early", "late"));

  // Earliest means the earliest retained.
  create_topic("short", 1, /*retention_ms=*/1'000);
  append("short", {make_message("x"), make_message("y")});
  advance(2'000);
  enforce_retention();
  EXPECT_THAT(ensure_group("after-retention", {"short"}).cursors, ElementsAre(group_cursor{"short", 0, 2, 2}));
}

TEST_F(store_group_test, ensure_group_adds_a_topic_later_and_keeps_existing_cursors) {
  create_topic("a", 1);
  create_topic("b", 1);
  append("a", {make_message("a0")});
  ensure_group("g", {"a"});
  group_update u;
  u.group = "g";
  u.dispatched = {{"a", 0, 0, 1}};
  u.deliveries = {{"a", 0, 0, 1, now() + 30'000, delivery_status::in_flight}};
  update_group(u);
  append("b", {make_message("b0"), make_message("b1"), make_message("b2")});

  auto g = ensure_group("g", {"b"}, group_start::latest);
  EXPECT_THAT(g.info.topics, ElementsAre("a", "b"));
  EXPECT_THAT(g.cursors, ElementsAre(group_cursor{"a", 0, 0, 1}, group_cursor{"b", 0, 3, 3}));
  EXPECT_THAT(offsets_of(g.deliveries), ElementsAre(0u));

  // Ensuring again with topics it has changes nothing, whatever the start.
  g = ensure_group("g", {"a", "b"}, group_start::earliest);
  EXPECT_THAT(g.info.topics, ElementsAre("a", "b"));
  EXPECT_THAT(g.cursors, ElementsAre(group_cursor{"a", 0, 0, 1}, group_cursor{"b", 0, 3, 3}));
  EXPECT_EQ(g.info.created_ms, k_start_ms);
}

TEST_F(store_group_test, ensure_group_of_an_unknown_topic_fails_with_unknown_topic) {
  EXPECT_THAT(try_ensure_group("g", {"nope"}, group_start::earliest), fails_with(errc::unknown_topic));
  EXPECT_THAT(store_->load_group("g"), fails_with(errc::unknown_group));
  EXPECT_THAT(store_->groups(), IsEmpty());
}

TEST_F(store_group_test, update_group_stores_cursors_and_deliveries) {
  with_messages(3);
  group_update u;
  u.group = "g";
  u.dispatched = {{"t", 0, 0, 3}};
  const std::vector<delivery_record> deliveries = {
      in_flight(0),
      in_flight(1, 20'000),
      {"t", 0, 2, 2, now() + 5'000, delivery_status::waiting},
  };
  u.deliveries = deliveries;
  auto r = update_group(u);
  EXPECT_THAT(r.cursors, ElementsAre(group_cursor{"t", 0, 0, 3}));
  auto s = load_group("g");
  EXPECT_THAT(s.cursors, ElementsAre(group_cursor{"t", 0, 0, 3}));
  EXPECT_EQ(s.deliveries, deliveries);
  EXPECT_EQ(s.dead_letters, 0u);

  // A dispatch cursor only moves forward.
  group_update back;
  back.group = "g";
  back.dispatched = {{"t", 0, 0, 1}};
  EXPECT_THAT(update_group(back).cursors, ElementsAre(group_cursor{"t", 0, 0, 3}));
  EXPECT_THAT(load_group("g").cursors, ElementsAre(group_cursor{"t", 0, 0, 3}));
}

// What a node that starts leading a partition reloads: that partition's cursor and delivery
// records only, without counting the dead-letter queue.
TEST_F(store_group_test, load_group_partition_reads_one_partition) {
  create_topic("t", 2);
  create_topic("u", 1);
  append("t", {make_message("a"), make_message("b"), make_message("c"), make_message("d")});
  ensure_group("g", {"t", "u"});
  group_update u;
  u.group = "g";
  u.dispatched = {{"t", 0, 0, 2}, {"t", 1, 0, 2}};
  u.deliveries = {{"t", 0, 0, 1, now() + 30'000, delivery_status::in_flight},
                  {"t", 0, 1, 1, now() + 30'000, delivery_status::in_flight},
                  {"t", 1, 0, 1, now() + 30'000, delivery_status::in_flight}};
  update_group(u);
  group_update d;
  d.group = "g";
  d.dead = {dead_letter{"t", 1, 1, 3, now(), "x"}};
  update_group(d);
  auto one = store_->load_group_partition("g", "t", 0);
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(one.value().info.name, "g");
  EXPECT_THAT(one.value().cursors, ElementsAre(group_cursor{"t", 0, 0, 2}));
  EXPECT_EQ(one.value().deliveries.size(), 2u);
  for (const auto& rec : one.value().deliveries) EXPECT_EQ(rec.partition, 0u);
  EXPECT_EQ(one.value().dead_letters, 0u);
  // The same records as the whole group's load holds for that partition.
  auto other = store_->load_group_partition("g", "t", 1);
  ASSERT_TRUE(other);
  std::vector<delivery_record> want;
  for (const auto& rec : load_group("g").deliveries)
    if (rec.topic == "t" && rec.partition == 1) want.push_back(rec);
  EXPECT_EQ(other.value().deliveries, want);
  EXPECT_FALSE(want.empty());
  auto none = store_->load_group_partition("g", "nosuch", 0);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none.value().cursors.empty());
  EXPECT_FALSE(store_->load_group_partition("nogroup", "t", 0));
}

TEST_F(store_group_test, due_deliveries_are_ordered_by_visible_time_and_limited) {
  with_messages(2);
  ensure_group("h", {"t"});
  group_update g;
  g.group = "g";
  g.dispatched = {{"t", 0, 0, 2}};
  g.deliveries = {in_flight(0, 3'000), in_flight(1, 1'000)};
  update_group(g);
  group_update h;
  h.group = "h";
  h.dispatched = {{"t", 0, 0, 1}};
  h.deliveries = {{"t", 0, 0, 4, now() + 2'000, delivery_status::waiting}};
  update_group(h);

  EXPECT_THAT(due_keys(due_deliveries(now() + 999)), IsEmpty());
  EXPECT_THAT(due_keys(due_deliveries(now() + 5'000)), ElementsAre("g/t/1", "h/t/0", "g/t/0"));
  EXPECT_THAT(due_keys(due_deliveries(now() + 2'000)), ElementsAre("g/t/1", "h/t/0"));
  EXPECT_THAT(due_keys(due_deliveries(now() + 5'000, 1)), ElementsAre("g/t/1"));
  auto due = due_deliveries(now() + 2'000);
  ASSERT_THAT(due, SizeIs(2));
  EXPECT_EQ(due[1].delivery, (delivery_record{"t", 0, 0, 4, now() + 2'000, delivery_status::waiting}));
}

TEST_F(store_group_test, ack_floor_advances_only_over_the_contiguous_acked_prefix) {
  with_messages(5);
  dispatch(5);
  auto r = ack({3, 1});
  EXPECT_THAT(r.cursors, ElementsAre(group_cursor{"t", 0, 0, 5}));
  auto s = load_group("g");
  EXPECT_THAT(s.cursors, ElementsAre(group_cursor{"t", 0, 0, 5}));
  ASSERT_THAT(s.deliveries, SizeIs(5));
  EXPECT_EQ(s.deliveries[1].status, delivery_status::acked);
  EXPECT_EQ(s.deliveries[3].status, delivery_status::acked);
  EXPECT_EQ(s.deliveries[2].status, delivery_status::in_flight);
  EXPECT_THAT(due_keys(due_deliveries(now() + 1'000'000)), ElementsAre("g/t/0", "g/t/2", "g/t/4"));

  EXPECT_THAT(ack({0}).cursors, ElementsAre(group_cursor{"t", 0, 2, 5}));
  s = load_group("g");
  EXPECT_THAT(offsets_of(s.deliveries), ElementsAre(2u, 3u, 4u)) << "acked records below the floor must be gone";
  EXPECT_THAT(ack({4}).cursors, ElementsAre(group_cursor{"t", 0, 2, 5}));
  EXPECT_THAT(ack({2}).cursors, ElementsAre(group_cursor{"t", 0, 5, 5}));
  EXPECT_THAT(load_group("g").deliveries, IsEmpty());
  EXPECT_THAT(due_deliveries(now() + 1'000'000), IsEmpty());
  EXPECT_THAT(ack({1}).cursors, ElementsAre(group_cursor{"t", 0, 5, 5})) << "a late repeated ack changes nothing";
  EXPECT_THAT(load_group("g").deliveries, IsEmpty());

  reopen();
  EXPECT_THAT(load_group("g").cursors, ElementsAre(group_cursor{"t", 0, 5, 5}));
}

TEST_F(store_group_test, a_rescheduled_delivery_moves_in_the_due_index) {
  with_messages(1);
  dispatch(1);  // in flight until now + 30 s
  group_update nack;
  nack.group = "g";
  nack.deliveries = {{"t", 0, 0, 2, now() + 60'000, delivery_status::waiting}};
  update_group(nack);
  EXPECT_THAT(due_deliveries(now() + 30'000), IsEmpty()) << "the old deadline is still indexed";
  auto due = due_deliveries(now() + 60'000);
  ASSERT_THAT(due, SizeIs(1));
  EXPECT_EQ(due[0].delivery, nack.deliveries[0]);

  nack.deliveries = {{"t", 0, 0, 3, now() + 1'000, delivery_status::waiting}};
  update_group(nack);
  EXPECT_THAT(due_keys(due_deliveries(now() + 1'000)), ElementsAre("g/t/0"));
  EXPECT_THAT(due_deliveries(now() + 1'000'000), SizeIs(1));
  EXPECT_THAT(load_group("g").deliveries, ElementsAre(nack.deliveries[0]));
}

TEST_F(store_group_test, dead_letters_are_listed_in_pages_after_a_cursor) {
  with_messages(5);
  dispatch(5);
  group_update kill;
  kill.group = "g";
  for (std::uint64_t o = 0; o < 5; ++o) kill.dead.push_back({"t", 0, o, 16, now(), "max attempts"});
  update_group(kill);

  auto first = value_of(store_->dead_letters("g", 2, std::nullopt), "dead_letters");
  ASSERT_THAT(first, SizeIs(2));
  EXPECT_EQ(first[1].offset, 1u);
  auto second = value_of(store_->dead_letters("g", 2, message_ref{"t", 0, first[1].offset}), "dead_letters");
  ASSERT_THAT(second, SizeIs(2));
  EXPECT_EQ(second[0].offset, 2u);
  EXPECT_EQ(second[1].offset, 3u);
  auto last = value_of(store_->dead_letters("g", 2, message_ref{"t", 0, 3}), "dead_letters");
  ASSERT_THAT(last, SizeIs(1));
  EXPECT_EQ(last[0].offset, 4u);
  EXPECT_THAT(value_of(store_->dead_letters("g", 2, message_ref{"t", 0, 4}), "dead_letters"), IsEmpty());
  // A cursor naming no topic is refused, not read as the start.
  auto bad = store_->dead_letters("g", 2, message_ref{"nope", 0, 0});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, make_error_code(errc::invalid_argument));
}

TEST_F(store_group_test, dead_letters_count_as_done_and_redrive_brings_them_back) {
  with_messages(2);
  dispatch(2);
  group_update kill;
  kill.group = "g";
  kill.dead = {{"t", 0, 0, 16, now() + 7, "max attempts"}};
  EXPECT_THAT(update_group(kill).cursors, ElementsAre(group_cursor{"t", 0, 1, 2}));

  auto dlq = value_of(store_->dead_letters("g", 10), "dead_letters");
  ASSERT_THAT(dlq, SizeIs(1));
  EXPECT_EQ(dlq[0].topic, "t");
  EXPECT_EQ(dlq[0].partition, 0u);
  EXPECT_EQ(dlq[0].offset, 0u);
  EXPECT_EQ(dlq[0].attempts, 16u);
  EXPECT_EQ(dlq[0].dead_at_ms, now() + 7);
  EXPECT_EQ(dlq[0].reason, "max attempts");
  auto s = load_group("g");
  EXPECT_EQ(s.dead_letters, 1u);
  EXPECT_THAT(s.cursors, ElementsAre(group_cursor{"t", 0, 1, 2}));
  EXPECT_THAT(offsets_of(s.deliveries), ElementsAre(1u));
  EXPECT_THAT(due_keys(due_deliveries(now() + 1'000'000)), ElementsAre("g/t/1"));

  advance(50);
  group_update redrive;
  redrive.group = "g";
  redrive.redrive = {{"t", 0, 0}};
  update_group(redrive);
  EXPECT_THAT(value_of(store_->dead_letters("g", 10), "dead_letters"), IsEmpty());
  s = load_group("g");
  EXPECT_EQ(s.dead_letters, 0u);
  const delivery_record back{"t", 0, 0, 0, now(), delivery_status::waiting};
  EXPECT_THAT(s.deliveries, ElementsAre(back, in_flight(1, 30'000 - 50)));
  auto due = due_deliveries(now());
  ASSERT_THAT(due, SizeIs(1));
  EXPECT_EQ(due[0].delivery, back);

  ack({0});
  EXPECT_THAT(offsets_of(load_group("g").deliveries), ElementsAre(1u));
  EXPECT_THAT(due_keys(due_deliveries(now() + 1'000'000)), ElementsAre("g/t/1"));
  EXPECT_THAT(ack({1}).cursors, ElementsAre(group_cursor{"t", 0, 2, 2}));
  EXPECT_THAT(load_group("g").deliveries, IsEmpty());
}

TEST_F(store_group_test, update_of_an_unknown_group_fails_with_unknown_group) {
  with_messages(1);
  group_update u;
  u.group = "nope";
  u.acks = {{"t", 0, 0}};
  EXPECT_THAT(try_update_group(u), fails_with(errc::unknown_group));
  EXPECT_THAT(store_->load_group("nope"), fails_with(errc::unknown_group));
}

TEST_F(store_group_test, a_rejected_group_update_changes_nothing) {
  with_messages(3);
  const auto before = load_group("g");

  group_update bad_status;
  bad_status.group = "g";
  bad_status.dispatched = {{"t", 0, 0, 2}};
  bad_status.deliveries = {in_flight(0), {"t", 0, 1, 1, now(), delivery_status::acked}};
  EXPECT_THAT(try_update_group(bad_status), fails_with(errc::invalid_argument));

  group_update bad_topic;
  bad_topic.group = "g";
  bad_topic.dispatched = {{"t", 0, 0, 2}};
  bad_topic.deliveries = {in_flight(0)};
  bad_topic.acks = {{"nope", 0, 0}};
  EXPECT_FALSE(try_update_group(bad_topic));

  auto after = load_group("g");
  EXPECT_EQ(after.cursors, before.cursors);
  EXPECT_EQ(after.deliveries, before.deliveries);
  EXPECT_THAT(due_deliveries(now() + 1'000'000), IsEmpty());
}

TEST_F(store_group_test, group_state_survives_reopen) {
  with_messages(4);
  create_topic("u", 2);
  ensure_group("g", {"u"}, group_start::latest);
  dispatch(4);
  ack({1});
  group_update u;
  u.group = "g";
  u.dead = {{"t", 0, 2, 5, now(), "poison"}};
  u.deliveries = {{"t", 0, 3, 2, now() + 9'000, delivery_status::waiting}};
  update_group(u);  // acks and these updates are not synced: a clean close keeps them

  const auto before = load_group("g");
  const auto due_before = due_keys(due_deliveries(now() + 1'000'000));
  reopen();
  const auto after = load_group("g");
  EXPECT_EQ(after.info.name, before.info.name);
  EXPECT_EQ(after.info.topics, before.info.topics);
  EXPECT_EQ(after.info.created_ms, before.info.created_ms);
  EXPECT_EQ(after.cursors, before.cursors);
  EXPECT_EQ(after.deliveries, before.deliveries);
  EXPECT_EQ(after.dead_letters, 1u);
  EXPECT_THAT(after.cursors, ElementsAre(group_cursor{"t", 0, 0, 4}, group_cursor{"u", 0, 0, 0},
                                         group_cursor{"u", 1, 0, 0}));
  EXPECT_THAT(offsets_of(after.deliveries), ElementsAre(0u, 1u, 2u, 3u));
  EXPECT_EQ(due_keys(due_deliveries(now() + 1'000'000)), due_before);
  EXPECT_THAT(due_before, ElementsAre("g/t/3", "g/t/0"));  // 3 is due in 9 s, 0 in 30 s
  auto dlq = value_of(store_->dead_letters("g", 10), "dead_letters");
  ASSERT_THAT(dlq, SizeIs(1));
  EXPECT_EQ(dlq[0].reason, "poison");
  ASSERT_THAT(store_->groups(), SizeIs(1));

  // It keeps working: acking 0 moves the floor over the acked and dead records to 3.
  EXPECT_THAT(ack({0}).cursors, ElementsAre(group_cursor{"t", 0, 3, 4}));
}

}  // namespace
}  // namespace txmq::storage::test
