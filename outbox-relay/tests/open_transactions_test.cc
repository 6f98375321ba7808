// The order rule's decision (open_transactions.h) on hand-written PostgreSQL snapshots.

#include "open_transactions.h"

#include <gtest/gtest.h>

namespace txmq::relay::detail {
namespace {

pg_snapshot snap(std::string_view text) {
  auto s = parse_snapshot(text);
  EXPECT_TRUE(s) << text;
  return s.value_or(pg_snapshot{});
}

TEST(relay_snapshot, parses_pg_current_snapshot_text) {
  auto s = parse_snapshot("10:20:12,15");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->xmin, 10u);
  EXPECT_EQ(s->xmax, 20u);
  EXPECT_EQ(s->xip, (std::vector<std::uint64_t>{12, 15}));
  auto empty = parse_snapshot("731:731:");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->xip.empty());
  // xid8 is 64 bits: values past 2^32 are plain numbers, no epoch arithmetic.
  auto big = parse_snapshot("5000000000:5000000009:5000000003,5000000000");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->xip, (std::vector<std::uint64_t>{5000000000u, 5000000003u}));  // sorted
  for (const char* bad : {"", "10", "10:20", "a:20:", "10:b:", "20:10:", "10:20:25", "10:20:5", "10:20:12,", "10:20:,12",
                          "10:20:12;13", "-1:20:", "10:20:99999999999999999999"}) {
    EXPECT_FALSE(parse_snapshot(bad)) << bad;
  }
}

TEST(relay_snapshot, in_progress_means_listed_or_at_or_above_xmax) {
  const auto s = snap("100:110:103,107");
  EXPECT_TRUE(in_progress(s, 103));
  EXPECT_TRUE(in_progress(s, 107));
  EXPECT_TRUE(in_progress(s, 110));  // xmax is the latest completed xid + 1: running xids go above it
  EXPECT_TRUE(in_progress(s, 5000000000u));
  EXPECT_FALSE(in_progress(s, 99));
  EXPECT_FALSE(in_progress(s, 100));
  EXPECT_FALSE(in_progress(s, 104));
  EXPECT_FALSE(in_progress(s, 109));
}

TEST(relay_snapshot, nothing_completed_means_reads_may_go_on) {
  open_transactions open;
  // The first read: nothing to compare. 105 and 106 were assigned before its own xid 107 and
  // are not listed (at or above xmax).
  EXPECT_EQ(open.observe(snap("100:105:101,103"), 107, 0), std::nullopt);
  // 101 and 103 still listed, 105 and 106 now listed too; 107 (the previous read's own xid)
  // completed, and does not count: it holds no outbox row.
  EXPECT_EQ(open.observe(snap("101:108:101,103,105,106"), 108, 500), std::nullopt);
  EXPECT_EQ(open.observe(snap("101:109:101,103,105,106"), 109, 900), std::nullopt);
}

TEST(relay_snapshot, a_listed_transaction_that_completed_moves_reads_down) {
  open_transactions open;
  EXPECT_EQ(open.observe(snap("100:105:101,103"), 107, 0), std::nullopt);
  // 103 completed: it was running at the first read, before which nothing had been read, so its
  // rows may lie anywhere: from the start.
  EXPECT_EQ(open.observe(snap("101:108:101"), 108, 500), std::optional<std::int64_t>(0));
  // 110 was assigned after read 2's xid (108), which read 2 took after it read the sequence at
  // 500: 110's seqs are above 500.
  EXPECT_EQ(open.observe(snap("101:110:101"), 111, 900), std::nullopt);
  EXPECT_EQ(open.observe(snap("101:112:101,110"), 113, 1200), std::nullopt);
  EXPECT_EQ(open.observe(snap("101:114:101"), 115, 1500), std::optional<std::int64_t>(500));
  // 101, open since before the first read, completes: from the start again.
  EXPECT_EQ(open.observe(snap("115:115:"), 116, 1800), std::optional<std::int64_t>(0));
}

TEST(relay_snapshot, a_transaction_above_xmax_that_completed_moves_reads_down) {
  open_transactions open;
  // Nothing listed, but xids 200..204 were assigned before the read's own xid 205: running at
  // the snapshot or started after it; PostgreSQL's list does not show them.
  EXPECT_EQ(open.observe(snap("200:200:"), 205, 0), std::nullopt);
  EXPECT_EQ(open.observe(snap("200:206:200,201,202,203,204"), 206, 300), std::nullopt);  // all still running
  // 202 completed (below the new xmax, not listed); the smallest completed one decides.
  EXPECT_EQ(open.observe(snap("200:207:200,201,203,204"), 207, 600), std::optional<std::int64_t>(0));
  // 208 was assigned after read 3's own xid 207, taken after read 3 saw the sequence at 600: its
  // seqs are above 600. It completes.
  EXPECT_EQ(open.observe(snap("200:208:200,201,203,204"), 209, 800), std::nullopt);
  EXPECT_EQ(open.observe(snap("200:210:200,201,203,204"), 210, 900), std::optional<std::int64_t>(600));
}

TEST(relay_snapshot, sixty_four_bit_xids_need_no_wraparound) {
  open_transactions open;
  const std::uint64_t base = 4294967290u;  // 2^32 - 6: the 32-bit xid would wrap around inside this test
  auto at = [&](std::uint64_t d) { return std::to_string(base + d); };
  EXPECT_EQ(open.observe(snap(at(0) + ":" + at(4) + ":" + at(1)), base + 5, 50), std::nullopt);
  EXPECT_EQ(open.observe(snap(at(1) + ":" + at(12) + ":" + at(1) + "," + at(4) + "," + at(10)), base + 12, 100), std::nullopt);
  // base + 10 (past 2^32) completes; base + 1 and base + 4 (below it) still run.
  EXPECT_EQ(open.observe(snap(at(1) + ":" + at(14) + ":" + at(1) + "," + at(4)), base + 14, 200), std::optional<std::int64_t>(50));
}

TEST(relay_snapshot, a_long_transaction_keeps_few_epochs_and_the_lowest_bound) {
  open_transactions open;
  EXPECT_EQ(open.observe(snap("10:11:10"), 11, 0), std::nullopt);
  std::uint64_t x = 11;
  for (int i = 1; i <= 5000; ++i, x += 2) {
    // 10 stays open; every read's own xid completes by the next.
    EXPECT_EQ(open.observe(snap("10:" + std::to_string(x + 1) + ":10"), x + 1, i * 10), std::nullopt);
  }
  EXPECT_LE(open.epochs(), 1024u);
  EXPECT_EQ(open.observe(snap(std::to_string(x) + ":" + std::to_string(x) + ":"), x + 1, 60000), std::optional<std::int64_t>(0));
}

}  // namespace
}  // namespace txmq::relay::detail
