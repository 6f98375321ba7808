// Store unit tests: the index of unresolved transactions (format 2, storage/README.md), against
// a scan of every record.

#include <random>

#include "store_test_fixture.h"

namespace txmq::storage::test {
namespace {

class tx_index_test : public store_test {
 protected:
  void SetUp() override {
    store_test::SetUp();
    create_topic("pay", 2);
  }
};

// The index of unresolved transactions (keys.h: the due index for PREPARED, 'a' entries for
// ABANDONED) answers what the full scan of every record answers: counts and the listings by
// state, pages included, after a random run of every kind of change (prepare with and without
// a first check, commit, rollback, checks, abandon, operator decisions on abandoned ones, the
// expiry of resolved records by compaction) and after a reopen.
TEST_F(tx_index_test, the_unresolved_index_agrees_with_a_scan_of_every_record) {
  auto by_scan = [&](tx_state st) {
    std::vector<txid> out;
    for (auto& t : value_of(store_->list_txs(std::nullopt, 100'000), "list_txs")) {
      if (t.state == st) out.push_back(t.id);
    }
    return out;
  };
  auto by_index_pages = [&](tx_state st, std::size_t page) {
    std::vector<txid> out;
    std::optional<txid> after;
    for (;;) {
      auto ids = list_tx_ids(st, page, after);
      out.insert(out.end(), ids.begin(), ids.end());
      if (ids.size() < page) return out;
      after = ids.back();
    }
  };
  auto agree = [&](const std::string& when) {
    SCOPED_TRACE(when);
    const auto prepared = by_scan(tx_state::prepared);
    const auto abandoned = by_scan(tx_state::abandoned);
    auto counts = value_of(store_->count_unresolved_txs(), "count_unresolved_txs");
    EXPECT_EQ(counts.prepared, prepared.size());
    EXPECT_EQ(counts.abandoned, abandoned.size());
    EXPECT_EQ(list_tx_ids(tx_state::prepared, 100'000), prepared);
    EXPECT_EQ(list_tx_ids(tx_state::abandoned, 100'000), abandoned);
    EXPECT_EQ(by_index_pages(tx_state::prepared, 7), prepared);
    EXPECT_EQ(by_index_pages(tx_state::abandoned, 3), abandoned);
  };
  std::mt19937 rng(20261127);
  std::vector<txid> open;  // PREPARED or ABANDONED, as far as this test knows
  for (int step = 0; step < 600; ++step) {
    const unsigned op = rng() % 10;
    if (op < 4 || open.empty()) {
      // A first check now or soon, or none (never checked: a due entry that is never due).
      const std::int64_t first = rng() % 8 == 0 ? 0 : now() + static_cast<std::int64_t>(rng() % 3) * 500;
      const txid id = rng() % 2 ? protocol::uuid::make_v4() : protocol::uuid::make_v7();
      prepare(id, {make_message("m", std::nullopt, "pay")}, first);
      open.push_back(id);
      continue;
    }
    const std::size_t pick = rng() % open.size();
    const txid id = open[pick];
    if (op < 6) {
      // Commit or rollback: of a PREPARED one by its producer, of an ABANDONED one by an operator.
      const auto r = resolve(id, rng() % 2 ? tx_outcome::commit : tx_outcome::rollback,
                             find_tx(id)->state == tx_state::abandoned ? resolver::operator_ : resolver::producer);
      EXPECT_EQ(r.status, resolve_status::applied);
      open.erase(open.begin() + static_cast<std::ptrdiff_t>(pick));
    } else if (op < 9) {
      // A check that did not decide: rescheduled (now, later, or with no next time) or abandoned.
      const auto rec = find_tx(id);
      const bool abandon = rng() % 3 == 0;
      const std::int64_t next = rng() % 5 == 0 ? 0 : now() + static_cast<std::int64_t>(rng() % 4) * 250;
      record_checks({{id, rec->check_count + 1, next, abandon}});
    } else {
      advance(400);  // resolved records older than the window expire at the next compaction
      if (rng() % 4 == 0) {
        ASSERT_THAT(store_->compact(), is_ok());
      }
    }
    if (step % 100 == 0) agree("step " + std::to_string(step));
  }
  advance(2 * k_dedupe_window.count());
  ASSERT_THAT(store_->compact(), is_ok());
  agree("after expiry");
  EXPECT_FALSE(by_scan(tx_state::prepared).empty());
  EXPECT_FALSE(by_scan(tx_state::abandoned).empty());
  reopen();
  agree("after a reopen");
}

}  // namespace
}  // namespace txmq::storage::test
