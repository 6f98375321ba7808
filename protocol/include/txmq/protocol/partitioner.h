#pragma once

// Which partition a keyed message goes to. Stable across processes, releases and languages
// (FNV-1a 64 of the key bytes, modulo the partition count), so a relay, a producer and the
// broker agree.

#include <cstdint>
#include <string_view>

namespace txmq::protocol {

[[nodiscard]] constexpr std::uint64_t fnv1a64(std::string_view bytes) noexcept {
  std::uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

[[nodiscard]] constexpr std::uint32_t partition_for_key(std::string_view key, std::uint32_t partitions) noexcept {
  return partitions == 0 ? 0 : static_cast<std::uint32_t>(fnv1a64(key) % partitions);
}

}  // namespace txmq::protocol
