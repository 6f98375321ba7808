// Store unit tests: read-process-write, a transaction that carries a group's acks and applies
// them in its COMMIT's write.

#include "store_test_fixture.h"

namespace txmq::storage::test {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

class store_rpw_test : public store_test {
 protected:
  // Topic "in" with three messages, all dispatched to group "svc" and in flight; topic "out".
  void SetUp() override {
    store_test::SetUp();
    create_topic("in", 1);
    create_topic("out", 1);
    append("in", {make_message("0"), make_message("1"), make_message("2")});
    ensure_group("svc", {"in"});
    group_update u;
    u.group = "svc";
    u.dispatched = {{"in", 0, 0, 3}};
    for (std::uint64_t o = 0; o < 3; ++o) {
      u.deliveries.push_back({"in", 0, o, 1, now() + 30'000, delivery_status::in_flight});
    }
    update_group(u);
  }

  txid prepare_with_acks() {
    const txid id = protocol::uuid::make_v4();
    prepare(id, {make_message("result", std::nullopt, "out")}, now() + 6'000,
            {{"svc", "in", 0, 0}, {"svc", "in", 0, 1}});
    return id;
  }
};

TEST_F(store_rpw_test, commit_applies_the_acks_in_the_same_write) {
  const txid id = prepare_with_acks();
  auto before = load_group("svc");
  EXPECT_THAT(before.cursors, ElementsAre(group_cursor{"in", 0, 0, 3})) << "prepare must not apply acks";
  EXPECT_THAT(before.deliveries, SizeIs(3));
  auto tx = find_tx(id);
  EXPECT_THAT(tx->acks, ElementsAre(ack_ref{"svc", "in", 0, 0}, ack_ref{"svc", "in", 0, 1}));

  const auto groups_before = store_->stats().commit_groups;
  auto r = resolve(id, tx_outcome::commit);
  EXPECT_EQ(r.status, resolve_status::applied);
  EXPECT_EQ(store_->stats().commit_groups - groups_before, 1u) << "acks and messages in one write";

  auto after = load_group("svc");
  EXPECT_THAT(after.cursors, ElementsAre(group_cursor{"in", 0, 2, 3}));
  EXPECT_THAT(offsets_of(after.deliveries), ElementsAre(2u));
  auto due = due_deliveries(now() + 1'000'000);
  ASSERT_THAT(due, SizeIs(1));
  EXPECT_EQ(due[0].delivery.offset, 2u);
  EXPECT_THAT(read("out", 0).messages, SizeIs(1));

  reopen();
  EXPECT_THAT(load_group("svc").cursors, ElementsAre(group_cursor{"in", 0, 2, 3}));
}

TEST_F(store_rpw_test, a_rolled_back_tx_leaves_the_group_untouched) {
  const txid id = prepare_with_acks();
  auto before = load_group("svc");
  auto r = resolve(id, tx_outcome::rollback);
  EXPECT_EQ(r.status, resolve_status::applied);
  auto after = load_group("svc");
  EXPECT_EQ(after.cursors, before.cursors);
  EXPECT_EQ(after.deliveries, before.deliveries);
  EXPECT_THAT(due_deliveries(now() + 1'000'000), SizeIs(3));
  EXPECT_EQ(total_messages("out"), 0u);
}

}  // namespace
}  // namespace txmq::storage::test
