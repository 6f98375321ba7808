// The crc32 instruction's CRC32C (src/crc32c_hw.cc) against the known check value and against
// RocksDB's own software function (__real_, the link's --wrap), so the WAL's checksums this build
// writes are the bytes any other build writes and reads.

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "crc32c_hw.h"

namespace txmq::storage::detail {
namespace {

TEST(crc32c_hw, gives_the_check_value_of_crc32c) {
  if (!crc32c_hw_available()) GTEST_SKIP() << "no SSE4.2 on this CPU: RocksDB's own function runs";
  const std::string check = "123456789";
  EXPECT_EQ(crc32c_extend_hw(0, check.data(), check.size()), 0xE3069283u);
  EXPECT_EQ(__real__ZN7rocksdb6crc32c6ExtendEjPKcm(0, check.data(), check.size()), 0xE3069283u);
  EXPECT_EQ(crc32c_extend_hw(0, "", 0), 0u);
}

TEST(crc32c_hw, equals_rocksdbs_software_crc_for_every_length_alignment_and_continuation) {
  if (!crc32c_hw_available()) GTEST_SKIP() << "no SSE4.2 on this CPU: RocksDB's own function runs";
  std::mt19937_64 rng(15);
  std::string buf(4096 + 16, '\0');
  for (auto& c : buf) c = static_cast<char>(rng());
  for (std::size_t offset = 0; offset < 8; ++offset) {
    for (std::size_t size = 0; size < 300; ++size) {
      const std::uint32_t start = static_cast<std::uint32_t>(rng());
      ASSERT_EQ(crc32c_extend_hw(start, buf.data() + offset, size),
                __real__ZN7rocksdb6crc32c6ExtendEjPKcm(start, buf.data() + offset, size))
          << "offset " << offset << " size " << size;
    }
  }
  // A WAL block's record (up to 32 KiB), and a CRC continued in two pieces (RocksDB extends the
  // record type's CRC with the payload).
  const std::uint32_t whole = __real__ZN7rocksdb6crc32c6ExtendEjPKcm(0, buf.data(), buf.size());
  EXPECT_EQ(crc32c_extend_hw(0, buf.data(), buf.size()), whole);
  EXPECT_EQ(crc32c_extend_hw(crc32c_extend_hw(0, buf.data(), 1000), buf.data() + 1000, buf.size() - 1000), whole);
  // The wrapper is what RocksDB's calls reach.
  EXPECT_EQ(__wrap__ZN7rocksdb6crc32c6ExtendEjPKcm(0, buf.data(), buf.size()), whole);
}

}  // namespace
}  // namespace txmq::storage::detail
