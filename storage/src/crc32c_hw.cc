// Debian's librocksdb is built portable: its crc32c::Extend, which checksums every WAL record
// (and the MANIFEST's), runs the table-driven software loop, 7.5 % of the broker's CPU at publish
// 100 per request, all of it on the writer thread (issue #15, docs/BENCHMARKS.md "Tenth round").
// The link wraps RocksDB's calls to it (storage/CMakeLists.txt) to the function below, which
// gives the same values with the crc32 instruction (same polynomial, same bits on disk: WALs
// stay readable by any build, and this build reads theirs) and calls RocksDB's own where the CPU
// has no SSE4.2.

#include "crc32c_hw.h"

#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace txmq::storage::detail {

#if defined(__x86_64__)
bool crc32c_hw_available() {
  static const bool available = __builtin_cpu_supports("sse4.2");
  return available;
}

__attribute__((target("sse4.2"))) std::uint32_t crc32c_extend_hw(std::uint32_t crc, const char* data,
                                                                 std::size_t size) {
  std::uint64_t c = crc ^ 0xffffffffu;
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  for (; size > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7) != 0; --size) c = _mm_crc32_u8(static_cast<std::uint32_t>(c), *p++);
  for (; size >= 8; size -= 8, p += 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  for (; size > 0; --size) c = _mm_crc32_u8(static_cast<std::uint32_t>(c), *p++);
  return static_cast<std::uint32_t>(c) ^ 0xffffffffu;
}
#else
// Other architectures keep RocksDB's own function (this file only makes x86-64 faster).
bool crc32c_hw_available() { return false; }

std::uint32_t crc32c_extend_hw(std::uint32_t crc, const char* data, std::size_t size) {
  return __real__ZN7rocksdb6crc32c6ExtendEjPKcm(crc, data, size);
}
#endif

}  // namespace txmq::storage::detail

extern "C" std::uint32_t __wrap__ZN7rocksdb6crc32c6ExtendEjPKcm(std::uint32_t crc, const char* data,
                                                                std::size_t size) {
  if (txmq::storage::detail::crc32c_hw_available()) return txmq::storage::detail::crc32c_extend_hw(crc, data, size);
  return __real__ZN7rocksdb6crc32c6ExtendEjPKcm(crc, data, size);
}
