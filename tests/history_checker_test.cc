// The history checker (support/history_checker.h) on synthetic histories.

#include <gtest/gtest.h>

#include "history_checker.h"

namespace txmq::test {
namespace {

// Three keys, four messages each, all acknowledged, stored in order in partitions by key.
void fill_clean(history& h) {
  for (int k = 0; k < 3; ++k) {
    for (int s = 0; s < 4; ++s) {
      const std::string id = "id-" + std::to_string(k) + "-" + std::to_string(s);
      h.attempt(id, "k" + std::to_string(k), "body " + id, static_cast<std::uint64_t>(s));
      h.resolve(id, attempt_outcome::acknowledged);
      h.consumed(id, "k" + std::to_string(k), "body " + id, static_cast<std::uint32_t>(k), static_cast<std::uint64_t>(s));
    }
  }
}

TEST(history_checker, a_clean_history_passes_with_redeliveries_and_unknown_outcomes) {
  history h;
  fill_clean(h);
  h.consumed("id-1-2", "k1", "body id-1-2", 1, 2);  // the same position again: a redelivery
  h.attempt("maybe-1", "k2", "m1", 10);             // timed out, never stored: allowed
  h.attempt("maybe-2", "k2", "m2", 11);             // timed out, stored: allowed
  h.consumed("maybe-2", "k2", "m2", 2, 4);
  h.attempt("refused", "k0", "r", 12);
  h.resolve("refused", attempt_outcome::failed);
  const auto v = h.check();
  EXPECT_TRUE(v.ok()) << v.summary();
  EXPECT_EQ(v.acknowledged, 12u);
  EXPECT_EQ(v.unknown, 2u);
  EXPECT_EQ(v.failed, 1u);
  EXPECT_EQ(v.distinct_consumed, 13u);
}

TEST(history_checker, finds_an_acknowledged_write_that_was_lost) {
  history h;
  fill_clean(h);
  h.attempt("gone", "k0", "g", 20);
  h.resolve("gone", attempt_outcome::acknowledged);
  const auto v = h.check();
  ASSERT_EQ(v.lost.size(), 1u) << v.summary();
  EXPECT_FALSE(v.ok());
}

TEST(history_checker, finds_invented_messages) {
  history h;
  fill_clean(h);
  h.consumed("never", "k0", "x", 0, 9);                 // never produced
  h.consumed("id-0-1", "k0", "other body", 0, 1);       // another body at the same position
  h.attempt("refused", "k1", "r", 30);
  h.resolve("refused", attempt_outcome::failed);
  h.consumed("refused", "k1", "r", 1, 7);               // refused for certain, yet stored
  const auto v = h.check();
  EXPECT_EQ(v.invented.size(), 3u) << v.summary();
}

TEST(history_checker, finds_an_id_stored_twice_but_not_a_redelivery) {
  history h;
  fill_clean(h);
  h.consumed("id-2-0", "k2", "body id-2-0", 2, 0);  // redelivery: allowed
  h.consumed("id-2-3", "k2", "body id-2-3", 2, 9);  // a second position: a duplicate
  const auto v = h.check();
  ASSERT_EQ(v.duplicated.size(), 1u) << v.summary();
  EXPECT_NE(v.duplicated[0].find("2@9"), std::string::npos);
}

TEST(history_checker, finds_per_key_order_broken) {
  history h;
  for (int s = 0; s < 3; ++s) {
    const std::string id = "o" + std::to_string(s);
    h.attempt(id, "k", id, static_cast<std::uint64_t>(s));
    h.resolve(id, attempt_outcome::acknowledged);
  }
  h.consumed("o0", "k", "o0", 0, 0);
  h.consumed("o2", "k", "o2", 0, 1);  // seq 2 stored before seq 1
  h.consumed("o1", "k", "o1", 0, 2);
  const auto v = h.check();
  ASSERT_EQ(v.order.size(), 1u) << v.summary();
  EXPECT_TRUE(v.lost.empty());
}

TEST(history_checker, an_acknowledgement_wins_over_an_earlier_failure_of_the_same_id) {
  history h;
  h.attempt("r", "k", "b", 0);
  h.resolve("r", attempt_outcome::unknown);
  h.resolve("r", attempt_outcome::acknowledged);
  h.resolve("r", attempt_outcome::failed);  // a stale answer of an earlier try arriving late
  EXPECT_EQ(h.check().lost.size(), 1u);
  h.consumed("r", "k", "b", 0, 0);
  EXPECT_TRUE(h.check().ok()) << h.check().summary();
}

TEST(history_checker, finds_two_acknowledgements_of_one_position_and_an_acknowledged_position_that_moved) {
  {
    history h;
    fill_clean(h);
    for (int s = 0; s < 4; ++s) h.acknowledged_at("id-0-" + std::to_string(s), 0, static_cast<std::uint64_t>(s));
    EXPECT_TRUE(h.check().ok()) << h.check().summary();
    // A second leader acknowledged another message at 0@3 (its log was later truncated).
    h.attempt("other", "k9", "o", 0);
    h.resolve("other", attempt_outcome::acknowledged);
    h.acknowledged_at("other", 0, 3);
    const auto v = h.check();
    EXPECT_EQ(v.misplaced.size(), 1u) << v.summary();
  }
  {
    history h;
    fill_clean(h);
    h.acknowledged_at("id-1-1", 1, 7);  // acknowledged at 1@7, stored at 1@1
    const auto v = h.check();
    ASSERT_EQ(v.misplaced.size(), 1u) << v.summary();
    EXPECT_FALSE(v.ok());
  }
  {
    history h;
    fill_clean(h);
    h.acknowledged_at("id-1-1", 1, 2);  // acknowledged where the log holds id-1-2
    EXPECT_EQ(h.check().misplaced.size(), 1u) << h.check().summary();
  }
}

}  // namespace
}  // namespace txmq::test
