// RocksDB's CRC32C computed with the CPU's crc32 instruction (crc32c_hw.cc).

#pragma once

#include <cstddef>
#include <cstdint>

namespace txmq::storage::detail {

// Whether this CPU has SSE4.2's crc32 instruction (otherwise RocksDB's own code runs).
bool crc32c_hw_available();

// RocksDB's crc32c::Extend with the crc32 instruction: the CRC32C (Castagnoli) of `size` bytes
// continuing from `crc` (0 to start), unmasked. Only when crc32c_hw_available().
std::uint32_t crc32c_extend_hw(std::uint32_t crc, const char* data, std::size_t size);

}  // namespace txmq::storage::detail

// The link (storage/CMakeLists.txt) sends every call of rocksdb::crc32c::Extend from RocksDB's
// objects to the wrapper and names RocksDB's own function __real_ (ld/lld --wrap).
extern "C" std::uint32_t __real__ZN7rocksdb6crc32c6ExtendEjPKcm(std::uint32_t crc, const char* data,
                                                                std::size_t size);
extern "C" std::uint32_t __wrap__ZN7rocksdb6crc32c6ExtendEjPKcm(std::uint32_t crc, const char* data,
                                                                std::size_t size);
