// Young Prepares (storage/README.md "Young Prepares"): a Prepare whose txid is a UUIDv7 of the
// store's time and whose first check is at least two seconds away gets its due entry a second
// later, if it is still PREPARED then. Until then counts and listings still include it, a
// resolve or a check writes no entry for it, and after a restart (the store closed without
// writing those entries, as after a crash) the open writes them.

#include <algorithm>
#include <string>
#include <vector>

#include "eventually.h"
#include "rocksdb_store.h"
#include "store_test_fixture.h"

namespace txmq::storage::test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using txmq::test::eventually;

class young_tx_test : public store_test {
 protected:
  void SetUp() override {
    store_test::SetUp();
    create_topic("pay", 2);
  }
  detail::rocksdb_store& db() {
    auto* s = dynamic_cast<detail::rocksdb_store*>(store_.get());
    if (s == nullptr) throw std::runtime_error("not a RocksDB store");
    return *s;
  }
  // A UUIDv7 txid of time `ms` (the rest random), as the txmq clients make them.
  static txid v7_at(std::int64_t ms) {
    std::string raw(protocol::uuid::make_v4().raw());
    for (int i = 0; i < 6; ++i) raw[i] = static_cast<char>((ms >> (8 * (5 - i))) & 0xff);
    raw[6] = static_cast<char>(0x70 | (raw[6] & 0x0f));
    raw[8] = static_cast<char>(0x80 | (raw[8] & 0x3f));
    return protocol::uuid::from_bytes(raw).value();
  }
  void prepare_at_first_check(const txid& id, std::int64_t first_check_ms) {
    prepare(id, {make_message("m-" + id.to_string(), std::nullopt, "pay")}, first_check_ms);
  }
  std::uint64_t prepared_count() { return value_of(store_->count_unresolved_txs(), "count").prepared; }

  static constexpr std::int64_t k_young = detail::rocksdb_store::k_young_ms;
  static constexpr std::int64_t k_first_check = 6'000;  // the broker's default tx_timeout
};

TEST_F(young_tx_test, a_transaction_resolved_in_its_first_second_writes_no_due_entry) {
  const auto before = db().index_writes_in_memtable();
  const txid young = v7_at(now());
  prepare_at_first_check(young, now() + k_first_check);
  EXPECT_EQ(db().index_writes_in_memtable(), before) << "a due entry was written at Prepare";
  EXPECT_EQ(prepared_count(), 1u);
  EXPECT_THAT(list_tx_ids(tx_state::prepared), ElementsAre(young));
  advance(k_young - 1);
  resolve(young, tx_outcome::commit);
  EXPECT_EQ(db().index_writes_in_memtable(), before) << "a due entry was deleted at COMMIT";
  EXPECT_EQ(prepared_count(), 0u);
  EXPECT_THAT(list_tx_ids(tx_state::prepared), IsEmpty());
  EXPECT_EQ(find_tx(young)->state, tx_state::committed);
  // What it saves: a random txid's entry is written at Prepare and deleted at COMMIT.
  const txid v4 = protocol::uuid::make_v4();
  prepare_at_first_check(v4, now() + k_first_check);
  resolve(v4, tx_outcome::commit);
  EXPECT_EQ(db().index_writes_in_memtable(), before + 2);
}

TEST_F(young_tx_test, a_young_prepare_gets_its_due_entry_a_second_later_with_no_request_and_is_checked) {
  const auto before = db().index_writes_in_memtable();
  const txid id = v7_at(now());
  prepare_at_first_check(id, now() + k_first_check);
  advance(k_young - 1);
  append("pay", {make_message("a group of its own")});
  EXPECT_EQ(db().index_writes_in_memtable(), before) << "written before its second was up";
  EXPECT_THAT(due_check_ids(now() + k_first_check), IsEmpty()) << "not indexed yet (and not due for five seconds)";
  advance(1);
  // No request comes: the writer wakes for it by itself.
  EXPECT_TRUE(eventually([&] { return db().index_writes_in_memtable() == before + 1; }, std::chrono::seconds(10)));
  EXPECT_EQ(prepared_count(), 1u);
  EXPECT_THAT(list_tx_ids(tx_state::prepared), ElementsAre(id));
  EXPECT_THAT(due_check_ids(now() + k_first_check - k_young - 1), IsEmpty());
  advance(k_first_check);
  EXPECT_THAT(due_check_ids(now()), ElementsAre(id));
  resolve(id, tx_outcome::rollback);
  EXPECT_EQ(db().index_writes_in_memtable(), before + 2) << "its entry is deleted with the outcome";
  EXPECT_EQ(prepared_count(), 0u);
}

// A writer held up past a young Prepare's first check (here: the clock moves on with no group
// written) writes its entry behind a scanner's cursor: the next scan from that cursor still
// finds it, once; later scans read from the cursor again.
TEST_F(young_tx_test, an_entry_written_after_its_check_was_due_is_found_behind_the_scan_cursor) {
  const auto before = db().index_writes_in_memtable();
  const txid id = v7_at(now());
  const std::int64_t first_check = now() + 2 * k_young;
  prepare_at_first_check(id, first_check);
  advance(5 * k_young);
  append("pay", {make_message("the writer's next group")});
  ASSERT_TRUE(eventually([&] { return db().index_writes_in_memtable() == before + 1; }, std::chrono::seconds(10)));
  // A scanner that scans every few ms has its cursor just behind the present.
  const auto scan_from = [&](std::int64_t from) {
    std::vector<txid> out;
    for (auto& t : value_of(store_->due_checks(now(), 100, from), "due_checks")) out.push_back(t.id);
    return out;
  };
  EXPECT_THAT(scan_from(now() - 20), ElementsAre(id)) << "an entry written behind the cursor was not found";
  EXPECT_THAT(scan_from(now() - 20), IsEmpty()) << "later scans read from their cursor again";
  EXPECT_THAT(scan_from(0), ElementsAre(id));
  // An entry written on time moves no cursor back.
  const txid on_time = v7_at(now());
  prepare_at_first_check(on_time, now() + k_first_check);
  advance(k_young);
  append("pay", {make_message("a group a second later")});
  ASSERT_TRUE(eventually([&] { return db().index_writes_in_memtable() == before + 2; }, std::chrono::seconds(10)));
  EXPECT_THAT(scan_from(now() - 20), IsEmpty());
}

TEST_F(young_tx_test, young_prepares_left_when_the_store_stopped_are_indexed_at_the_next_open) {
  const txid a = v7_at(now());
  prepare_at_first_check(a, now() + k_first_check);
  advance(300);
  const txid b = v7_at(now());
  prepare_at_first_check(b, now() + k_first_check);
  advance(300);
  const txid c = v7_at(now() + 500);  // a client clock half a second ahead
  prepare_at_first_check(c, now() + k_first_check);
  const txid never_checked = v7_at(now());
  prepare_at_first_check(never_checked, 0);
  const txid v4 = protocol::uuid::make_v4();  // indexed at Prepare
  prepare_at_first_check(v4, now() + k_first_check);
  resolve(b, tx_outcome::commit);
  EXPECT_EQ(prepared_count(), 4u);
  // Closing writes none of their entries: the next open finds them as after a crash.
  reopen();
  EXPECT_EQ(prepared_count(), 4u);
  EXPECT_THAT(list_tx_ids(tx_state::prepared), UnorderedElementsAre(a, c, never_checked, v4));
  EXPECT_THAT(due_check_ids(now() + k_first_check), UnorderedElementsAre(a, c, v4));
  // Written once: another open finds them indexed and writes nothing twice.
  reopen();
  EXPECT_EQ(prepared_count(), 4u);
  EXPECT_THAT(due_check_ids(now() + k_first_check), UnorderedElementsAre(a, c, v4));
  resolve(a, tx_outcome::commit);
  resolve(c, tx_outcome::rollback);
  resolve(never_checked, tx_outcome::commit);
  resolve(v4, tx_outcome::commit);
  EXPECT_EQ(prepared_count(), 0u);
  EXPECT_THAT(due_check_ids(now() + k_first_check), IsEmpty());
}

TEST_F(young_tx_test, a_check_recorded_for_a_young_prepare_moves_it_without_a_stray_entry) {
  const txid checked = v7_at(now());
  prepare_at_first_check(checked, now() + k_first_check);
  const txid abandoned = v7_at(now());
  prepare_at_first_check(abandoned, now() + k_first_check);
  record_checks({{checked, 1, now() + 30'000, false}, {abandoned, 1, 0, true}});
  advance(2 * k_young);
  append("pay", {make_message("a later group")});
  auto counts = value_of(store_->count_unresolved_txs(), "count");
  EXPECT_EQ(counts.prepared, 1u);
  EXPECT_EQ(counts.abandoned, 1u);
  EXPECT_THAT(list_tx_ids(tx_state::prepared), ElementsAre(checked));
  EXPECT_THAT(list_tx_ids(tx_state::abandoned), ElementsAre(abandoned));
  EXPECT_THAT(due_check_ids(now() + k_first_check), IsEmpty()) << "an entry at the first check's time was left";
  EXPECT_THAT(due_check_ids(now() + 30'000), ElementsAre(checked));
  reopen();
  EXPECT_EQ(prepared_count(), 1u);
  EXPECT_THAT(due_check_ids(now() + k_first_check), IsEmpty());
}

// Pages of PREPARED transactions ("after a txid") hold young and indexed ones in one txid order,
// each once, every page full but the last (a short page ends a listing).
TEST_F(young_tx_test, pages_of_prepared_transactions_mix_young_and_indexed_ones_in_txid_order) {
  std::vector<txid> all;
  for (int i = 0; i < 5; ++i) {
    all.push_back(v7_at(now()));
    prepare_at_first_check(all.back(), now() + k_first_check);   // young
    all.push_back(protocol::uuid::make_v4());
    prepare_at_first_check(all.back(), now() + k_first_check);   // indexed at once
  }
  const txid resolved = v7_at(now());
  prepare_at_first_check(resolved, now() + k_first_check);
  resolve(resolved, tx_outcome::commit);
  std::sort(all.begin(), all.end());
  const auto pages = [&] {
    std::vector<txid> out;
    std::optional<txid> after;
    for (;;) {
      auto page = list_tx_ids(tx_state::prepared, 3, after);
      out.insert(out.end(), page.begin(), page.end());
      if (page.size() < 3) return out;
      after = page.back();
    }
  };
  EXPECT_EQ(pages(), all);
  // The young ones past their second: their entries written, the pages the same.
  advance(k_young);
  append("pay", {make_message("a later group")});
  EXPECT_EQ(pages(), all);
  EXPECT_EQ(prepared_count(), all.size());
}

TEST_F(young_tx_test, a_near_first_check_or_a_txid_of_another_time_is_indexed_at_prepare) {
  const auto before = db().index_writes_in_memtable();
  prepare_at_first_check(v7_at(now()), now() + 2 * k_young - 1);
  EXPECT_EQ(db().index_writes_in_memtable(), before + 1) << "a first check within two seconds";
  prepare_at_first_check(v7_at(now() - 10'000), now() + k_first_check);
  EXPECT_EQ(db().index_writes_in_memtable(), before + 2) << "a UUIDv7 ten seconds old";
  prepare_at_first_check(protocol::uuid::make_v4(), now() + k_first_check);
  EXPECT_EQ(db().index_writes_in_memtable(), before + 3) << "a UUIDv4";
}

}  // namespace
}  // namespace txmq::storage::test
