#include "txmq/protocol/partitioner.h"

#include <array>
#include <string>

#include <gtest/gtest.h>

namespace txmq::protocol {
namespace {

// Other languages must compute the same values: these are the published FNV-1a 64 results.
static_assert(fnv1a64("") == 0xcbf29ce484222325ULL);
static_assert(fnv1a64("a") == 0xaf63dc4c8601ec8cULL);
static_assert(fnv1a64("hello") == 0xa430d84680aabd0bULL);

TEST(partitioner_test, fnv1a64_known_values) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ULL);
  EXPECT_EQ(fnv1a64("hello"), 0xa430d84680aabd0bULL);
}

TEST(partitioner_test, hashes_bytes_not_c_strings) {
  const std::string with_nul("a\0b", 3);
  EXPECT_NE(fnv1a64(with_nul), fnv1a64("a"));
  // Bytes above 0x7f hash as unsigned values.
  const std::string high("\xff", 1);
  EXPECT_EQ(fnv1a64(high), (0xcbf29ce484222325ULL ^ 0xffULL) * 1099511628211ULL);
}

TEST(partitioner_test, stable_partition_values) {
  EXPECT_EQ(partition_for_key("hello", 4), 0xa430d84680aabd0bULL % 4);
  EXPECT_EQ(partition_for_key("hello", 4), 3u);
  EXPECT_EQ(partition_for_key("hello", 7), 0xa430d84680aabd0bULL % 7);
  EXPECT_EQ(partition_for_key("hello", 1), 0u);
  EXPECT_EQ(partition_for_key("hello", 0), 0u);
}

// The table in docs/protocol.md §8.
TEST(partitioner_test, documented_test_vectors) {
  EXPECT_EQ(partition_for_key("", 4), 1u);
  EXPECT_EQ(partition_for_key("", 7), 2u);
  EXPECT_EQ(partition_for_key("a", 4), 0u);
  EXPECT_EQ(partition_for_key("a", 7), 5u);
  EXPECT_EQ(partition_for_key("hello", 4), 3u);
  EXPECT_EQ(partition_for_key("hello", 7), 5u);
}

TEST(partitioner_test, same_key_same_partition) {
  for (int i = 0; i < 100; ++i) {
    const std::string key = "order-" + std::to_string(i);
    EXPECT_EQ(partition_for_key(key, 16), partition_for_key(std::string(key), 16));
    EXPECT_LT(partition_for_key(key, 16), 16u);
  }
}

TEST(partitioner_test, keys_spread_over_partitions) {
  constexpr std::uint32_t partitions = 8;
  constexpr int keys = 80'000;
  std::array<int, partitions> counts{};
  for (int i = 0; i < keys; ++i) ++counts[partition_for_key("user-" + std::to_string(i), partitions)];
  const int expected = keys / static_cast<int>(partitions);
  for (std::uint32_t p = 0; p < partitions; ++p) {
    // 10% either side: with 10k expected per bucket, an even hash stays well within this.
    EXPECT_GT(counts[p], expected * 9 / 10) << "partition " << p;
    EXPECT_LT(counts[p], expected * 11 / 10) << "partition " << p;
  }
}

}  // namespace
}  // namespace txmq::protocol
