// Store unit tests: the index of unresolved transactions (format 2, storage/README.md), against
// a scan of every record.

#include <algorithm>
#include <random>
#include <set>

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

// The memtables of the tx and index families keep one insert position per millisecond of a
// key (rocksdb_store_open.cc, insert_position_prefix). Many Prepares per millisecond and per due
// time, written in groups while the outcomes of earlier ones land among them in another order:
// the due index still lists exactly the PREPARED transactions (a resolved one is never due),
// every record reads its state, also after a reopen (the WAL replayed into the memtables).
TEST_F(tx_index_test, interleaved_prepares_and_outcomes_in_groups_leave_an_exact_due_index) {
  std::mt19937 rng(20261128);
  std::vector<txid> prepared;
  std::set<txid> resolved;
  const std::int64_t first = now() + 6000;
  const auto prepare_async = [&](std::size_t n) {
    countdown left(n);
    std::vector<txid> ids;
    for (std::size_t i = 0; i < n; ++i) {
      ids.push_back(rng() % 8 == 0 ? protocol::uuid::make_v4() : protocol::uuid::make_v7());
      prepare_request req;
      req.id = ids.back();
      req.producer_group = "producers";
      req.messages = {make_message("m", std::nullopt, "pay")};
      req.first_check_ms = first + static_cast<std::int64_t>(rng() % 3);  // a few due times, many per time
      store_->prepare(std::move(req), [&](result<prepare_result> r) {
        EXPECT_TRUE(r) << r.error().message;
        left.done();
      });
    }
    ASSERT_TRUE(left.wait_for(std::chrono::seconds(30)));
    prepared.insert(prepared.end(), ids.begin(), ids.end());
  };
  const auto resolve_async = [&](std::size_t n) {
    std::shuffle(prepared.begin(), prepared.end(), rng);
    n = std::min(n, prepared.size());
    countdown left(n);
    for (std::size_t i = 0; i < n; ++i) {
      resolve_request req;
      req.id = prepared.back();
      req.outcome = rng() % 2 ? tx_outcome::commit : tx_outcome::rollback;
      req.by = resolver::producer;
      resolved.insert(prepared.back());
      prepared.pop_back();
      store_->resolve(std::move(req), [&](result<resolve_result> r) {
        EXPECT_TRUE(r) << r.error().message;
        left.done();
      });
    }
    ASSERT_TRUE(left.wait_for(std::chrono::seconds(30)));
  };
  for (int round = 0; round < 30; ++round) {
    prepare_async(200);
    resolve_async(150);
  }
  auto exact = [&](const std::string& when) {
    SCOPED_TRACE(when);
    std::set<txid> due;
    for (auto& id : due_check_ids(first + 10, 100'000)) EXPECT_TRUE(due.insert(id).second) << "listed twice";
    EXPECT_EQ(due, std::set<txid>(prepared.begin(), prepared.end()));
    EXPECT_EQ(value_of(store_->count_unresolved_txs(), "count_unresolved_txs").prepared, prepared.size());
    for (auto& id : resolved) {
      auto rec = find_tx(id);
      ASSERT_TRUE(rec);
      EXPECT_NE(rec->state, tx_state::prepared);
    }
  };
  exact("before a reopen");
  reopen();
  exact("after a reopen");
}

}  // namespace
}  // namespace txmq::storage::test
