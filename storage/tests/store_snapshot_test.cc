// The readers' snapshot of transaction records (storage/README.md "The transaction snapshot"):
// held only while a group that wrote a transaction record is written but not yet durable, so a
// store that runs no transaction holds no RocksDB snapshot (which would keep on disk everything
// it can see, and whose release marks every bottommost table file for a rewrite), while no
// reader sees a transaction record before its fsync.

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "rocksdb_store.h"
#include "store_test_fixture.h"

namespace txmq::storage::test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class snapshot_test : public store_test {
 protected:
  detail::rocksdb_store& db() {
    auto* s = dynamic_cast<detail::rocksdb_store*>(store_.get());
    if (s == nullptr) throw std::runtime_error("not a RocksDB store");
    return *s;
  }
};

// Main before this change took a snapshot at open and replaced it only after a group that wrote
// a transaction record: a publish-only broker held the one taken at its start until it stopped.
TEST_F(snapshot_test, a_store_that_runs_no_transaction_holds_no_snapshot) {
  create_topic("logs", 2);
  append("logs", {make_message("a"), make_message("b")});
  EXPECT_EQ(db().snapshots_held(), 0u) << "before a restart";
  reopen();
  EXPECT_EQ(db().snapshots_held(), 0u) << "right after the open";
  append("logs", {make_message("c")});
  EXPECT_EQ(db().snapshots_held(), 0u) << "after a publish";

  // A transaction prepared and resolved: once nothing written is waiting for its fsync, the
  // snapshot it needed is gone again.
  const txid id = protocol::uuid::make_v4();
  prepare(id, {make_message("t1", std::nullopt, "logs")}, now() + 60'000);
  EXPECT_EQ(db().snapshots_held(), 0u) << "after a durable Prepare";
  resolve(id, tx_outcome::commit);
  EXPECT_EQ(db().snapshots_held(), 0u) << "after a durable COMMIT";
  ASSERT_TRUE(find_tx(id).has_value());
  EXPECT_EQ(find_tx(id)->state, tx_state::committed);
}

// Retention frees the log family's tables of what was stored before the last open, in a store
// that publishes and runs no transaction.
TEST_F(snapshot_test, retention_frees_the_log_tables_of_messages_stored_before_a_restart) {
  create_topic("logs", 1, /*retention_ms=*/10'000);
  for (int i = 0; i < 200; ++i) append("logs", {make_message(std::string(10'000, 'x'))});  // 2 MB
  reopen();  // recovery writes the memtable into a table file
  const std::uint64_t before = db().log_table_bytes();
  ASSERT_GT(before, 1'500'000u) << "the log's 2 MB are not in table files";
  advance(11'000);
  for (int i = 0; i < 10; ++i) append("logs", {make_message(std::string(1'000, 'y'))});  // 10 kB, kept
  EXPECT_EQ(enforce_retention().messages_removed, 200u);
  ASSERT_THAT(store_->compact(), is_ok());
  EXPECT_LT(db().log_table_bytes(), 100'000u) << "of " << before << " table bytes the removed ones stayed";
  EXPECT_EQ(total_messages("logs"), 10u);
}

// A transaction record that is written but not yet fsynced is read by nobody: find_tx, list_txs,
// due_checks and count_unresolved_txs answer as of the last durable group. The fsync is held in
// observe_fsync (after SyncWAL, before the group is published).
TEST_F(snapshot_test, a_transaction_record_written_but_not_yet_synced_is_not_read) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> entered;
  std::atomic<bool> hold{false};
  tweak_options = [&](store_options& o) {
    o.observe_fsync = [&hold, &entered, &released](std::chrono::nanoseconds) {
      if (hold.exchange(false)) {
        entered.set_value();
        released.wait();
      }
    };
  };
  reopen();
  create_topic("t", 1);
  const txid durable = protocol::uuid::make_v4();
  prepare(durable, {make_message("d", std::nullopt, "t")}, now() + 1'000);
  EXPECT_EQ(db().snapshots_held(), 0u);

  hold = true;
  const txid pending = protocol::uuid::make_v4();
  prepare_request req;
  req.id = pending;
  req.producer_group = "producers";
  req.messages = {make_message("p", std::nullopt, "t")};
  req.first_check_ms = now() + 1'000;
  std::promise<result<prepare_result>> done;
  store_->prepare(req, [&done](result<prepare_result> r) { done.set_value(std::move(r)); });
  ASSERT_EQ(entered.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);

  EXPECT_FALSE(find_tx(pending).has_value()) << "a Prepare read before its fsync completed";
  EXPECT_THAT(list_tx_ids(tx_state::prepared), ElementsAre(durable));
  EXPECT_THAT(list_tx_ids(std::nullopt), ElementsAre(durable));
  EXPECT_THAT(due_check_ids(now() + 2'000), ElementsAre(durable));
  EXPECT_EQ(value_of(store_->count_unresolved_txs(), "count").prepared, 1u);
  EXPECT_GE(db().snapshots_held(), 1u) << "readers need the durable view while the Prepare waits";

  release.set_value();
  ASSERT_THAT(done.get_future().get(), is_ok());
  ASSERT_TRUE(find_tx(pending).has_value());
  EXPECT_EQ(find_tx(pending)->state, tx_state::prepared);
  EXPECT_EQ(value_of(store_->count_unresolved_txs(), "count").prepared, 2u);
  EXPECT_EQ(db().snapshots_held(), 0u) << "nothing waits for an fsync: no snapshot is needed";

  // A COMMIT waiting for its fsync: the transaction still reads PREPARED.
  hold = true;
  entered = std::promise<void>();
  release = std::promise<void>();
  released = release.get_future().share();
  std::promise<result<resolve_result>> resolved;
  resolve_request r;
  r.id = durable;
  r.outcome = tx_outcome::commit;
  store_->resolve(r, [&resolved](result<resolve_result> x) { resolved.set_value(std::move(x)); });
  ASSERT_EQ(entered.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(find_tx(durable)->state, tx_state::prepared) << "a COMMIT read before its fsync completed";
  EXPECT_EQ(value_of(store_->count_unresolved_txs(), "count").prepared, 2u);
  release.set_value();
  ASSERT_THAT(resolved.get_future().get(), is_ok());
  EXPECT_EQ(find_tx(durable)->state, tx_state::committed);
  EXPECT_THAT(list_tx_ids(tx_state::prepared), ElementsAre(pending));
}

}  // namespace
}  // namespace txmq::storage::test
