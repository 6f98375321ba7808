#include "txmq/protocol/message_id.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include <gtest/gtest.h>

#include "txmq/protocol/errc.h"

namespace txmq::protocol {
namespace {

std::int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

TEST(message_id_test, v7_version_and_variant_bits) {
  for (int i = 0; i < 1000; ++i) {
    const uuid id = uuid::make_v7();
    EXPECT_EQ(id.version(), 7);
    EXPECT_EQ(id.bytes()[6] >> 4, 7);
    EXPECT_EQ(id.bytes()[8] & 0xC0, 0x80);
    EXPECT_EQ(id.to_string()[14], '7');
    EXPECT_FALSE(id.is_nil());
  }
}

TEST(message_id_test, v4_version_and_variant_bits) {
  std::unordered_set<uuid, uuid_hash> seen;
  for (int i = 0; i < 1000; ++i) {
    const uuid id = uuid::make_v4();
    EXPECT_EQ(id.version(), 4);
    EXPECT_EQ(id.bytes()[8] & 0xC0, 0x80);
    EXPECT_TRUE(seen.insert(id).second);
  }
}

TEST(message_id_test, v7_unix_ms_close_to_now) {
  // Earlier bursts in this process (other tests) may have borrowed milliseconds ahead of the
  // clock; ids never go back, so first let the clock catch up with the last one.
  const uuid first = uuid::make_v7();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (now_ms() <= first.unix_ms()) ASSERT_LT(std::chrono::steady_clock::now(), deadline);

  const std::int64_t before = now_ms();
  const uuid id = uuid::make_v7();
  const std::int64_t after = now_ms();
  EXPECT_GE(id.unix_ms(), before);
  EXPECT_LE(id.unix_ms(), after);
}

TEST(message_id_test, v7_strictly_increasing_in_one_thread) {
  constexpr int n = 100'000;
  std::vector<uuid> ids;
  ids.reserve(n);
  const uuid first = uuid::make_v7();
  for (int i = 0; i < n; ++i) ids.push_back(uuid::make_v7());
  const std::int64_t end = now_ms();
  for (int i = 1; i < n; ++i) ASSERT_LT(ids[i - 1], ids[i]) << "at " << i;
  // Text order is byte order, so databases sorting the text column agree.
  for (int i = 1; i < n; i += 997) ASSERT_LT(ids[i - 1].to_string(), ids[i].to_string());
  // Faster than one id per counter step, the generator borrows milliseconds from the future,
  // but every millisecond it moves to holds at least 2049 ids (the counter starts at most at
  // 2047 and runs to 4095), so a burst of n ids runs at most n / 2049 ms ahead of the clock.
  EXPECT_GE(ids.front().unix_ms(), first.unix_ms());
  EXPECT_LE(ids.back().unix_ms(), std::max(first.unix_ms(), end) + n / 2049 + 1);
}

TEST(message_id_test, v7_unique_and_per_thread_increasing_across_threads) {
  constexpr int threads = 4;
  constexpr int per_thread = 25'000;
  std::vector<std::vector<uuid>> made(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&made, t] {
      made[t].reserve(per_thread);
      for (int i = 0; i < per_thread; ++i) made[t].push_back(uuid::make_v7());
    });
  }
  for (auto& w : workers) w.join();

  std::set<uuid> all;
  for (int t = 0; t < threads; ++t) {
    for (int i = 1; i < per_thread; ++i) ASSERT_LT(made[t][i - 1], made[t][i]) << "thread " << t << " at " << i;
    all.insert(made[t].begin(), made[t].end());
  }
  EXPECT_EQ(all.size(), static_cast<std::size_t>(threads * per_thread));
}

TEST(message_id_test, format_parse_round_trip) {
  for (int i = 0; i < 1000; ++i) {
    const uuid id = (i % 2 == 0) ? uuid::make_v7() : uuid::make_v4();
    const std::string text = id.to_string();
    ASSERT_EQ(text.size(), 36u);
    EXPECT_EQ(text, [&] {
      std::string lower = text;
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      return lower;
    }());
    auto parsed = uuid::parse(text);
    ASSERT_TRUE(parsed) << text;
    EXPECT_EQ(parsed.value(), id);
  }
}

TEST(message_id_test, parse_known_value_case_insensitive) {
  const std::string text = "01890a5d-ac96-774b-bcce-b302099a8057";
  auto lower = uuid::parse(text);
  auto upper = uuid::parse("01890A5D-AC96-774B-BCCE-B302099A8057");
  ASSERT_TRUE(lower);
  ASSERT_TRUE(upper);
  EXPECT_EQ(lower.value(), upper.value());
  EXPECT_EQ(upper.value().to_string(), text);
  EXPECT_EQ(lower.value().version(), 7);
  EXPECT_EQ(lower.value().unix_ms(), 0x01890a5dac96);
  const uuid::bytes_type expected{0x01, 0x89, 0x0a, 0x5d, 0xac, 0x96, 0x77, 0x4b,
                                  0xbc, 0xce, 0xb3, 0x02, 0x09, 0x9a, 0x80, 0x57};
  EXPECT_EQ(lower.value().bytes(), expected);
  EXPECT_EQ(uuid::parse("00000000-0000-0000-0000-000000000000").value(), uuid{});
  EXPECT_TRUE(uuid{}.is_nil());
}

TEST(message_id_test, parse_rejects_bad_text) {
  const std::vector<std::string> bad = {
      "",
      "01890a5d-ac96-774b-bcce-b302099a805",     // one short
      "01890a5d-ac96-774b-bcce-b302099a80570",   // one long
      "01890a5dac96774bbcceb302099a8057",        // no dashes, 32 hex
      "01890a5d0ac96-774b-bcce-b302099a8057",    // dash replaced by a digit
      "01890a5d-ac96-774b-bcce_b302099a8057",    // wrong separator
      "01890a5-dac96-774b-bcce-b302099a8057",    // dash in the wrong place
      "01890a5g-ac96-774b-bcce-b302099a8057",    // bad hex
      "01890a5d-ac96-774b-bcce-b302099a805 ",    // trailing space
      " 1890a5d-ac96-774b-bcce-b302099a8057",    // leading space
      "{01890a5d-ac96-774b-bcce-b302099a8057}",  // braces
      "urn:uuid:01890a5d-ac96-774b-bcce-b302099a8057",
      std::string("01890a5d-ac96-774b-bcce-b302099a80\0" "7", 36),
  };
  for (const auto& text : bad) {
    auto parsed = uuid::parse(text);
    ASSERT_FALSE(parsed) << '"' << text << '"';
    EXPECT_EQ(parsed.error(), errc::bad_message_id) << text;
  }
}

TEST(message_id_test, from_bytes_requires_exactly_16) {
  const uuid id = uuid::make_v7();
  auto copy = uuid::from_bytes(id.raw());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy.value(), id);
  EXPECT_EQ(copy.value().raw().size(), 16u);

  for (std::size_t n : {0u, 1u, 15u, 17u, 32u, 36u}) {
    const std::string raw(n, '\x01');
    auto r = uuid::from_bytes(raw);
    ASSERT_FALSE(r) << n;
    EXPECT_EQ(r.error(), errc::bad_message_id);
  }
  // The text form is not raw bytes.
  EXPECT_FALSE(uuid::from_bytes(id.to_string()));
}

TEST(message_id_test, hash_spreads_v7_ids) {
  std::unordered_set<std::size_t> hashes;
  for (int i = 0; i < 10'000; ++i) hashes.insert(uuid_hash{}(uuid::make_v7()));
  EXPECT_EQ(hashes.size(), 10'000u);
}

}  // namespace
}  // namespace txmq::protocol
