#pragma once

// Protobuf wire format by hand, for the few places that pass encoded messages through without
// parsing them (replication passes a leader's stored records to its followers: storage's
// raw_messages, docs/cluster.md "Replication"). Header-only; no allocation. Each take_* reads
// from the front of `s` and advances it; false (s then unspecified) when the bytes end early
// or a varint is longer than 10 bytes.

#include <cstdint>
#include <string>
#include <string_view>

namespace txmq::protocol::wire {

inline constexpr std::uint32_t k_varint = 0;
inline constexpr std::uint32_t k_fixed64 = 1;
inline constexpr std::uint32_t k_len = 2;
inline constexpr std::uint32_t k_fixed32 = 5;

[[nodiscard]] inline bool take_varint(std::string_view& s, std::uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && !s.empty(); shift += 7) {
    const auto b = static_cast<unsigned char>(s.front());
    s.remove_prefix(1);
    v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// A length-delimited value: `out` views its bytes inside the input.
[[nodiscard]] inline bool take_bytes(std::string_view& s, std::string_view& out) {
  std::uint64_t n = 0;
  if (!take_varint(s, n) || n > s.size()) return false;
  out = s.substr(0, static_cast<std::size_t>(n));
  s.remove_prefix(static_cast<std::size_t>(n));
  return true;
}

// A field's tag: its number (> 0) and wire type.
[[nodiscard]] inline bool take_tag(std::string_view& s, std::uint64_t& field, std::uint32_t& wire_type) {
  std::uint64_t tag = 0;
  if (!take_varint(s, tag) || (tag >> 3) == 0) return false;
  field = tag >> 3;
  wire_type = static_cast<std::uint32_t>(tag & 7);
  return true;
}

inline constexpr std::uint32_t k_start_group = 3;
inline constexpr std::uint32_t k_end_group = 4;

// Skips one value of a scalar or length-delimited `wire_type`; false for the group wire types,
// which skip_field handles.
[[nodiscard]] inline bool skip_value(std::string_view& s, std::uint32_t wire_type) {
  std::uint64_t v = 0;
  std::string_view b;
  switch (wire_type) {
    case k_varint: return take_varint(s, v);
    case k_fixed64:
      if (s.size() < 8) return false;
      s.remove_prefix(8);
      return true;
    case k_len: return take_bytes(s, b);
    case k_fixed32:
      if (s.size() < 4) return false;
      s.remove_prefix(4);
      return true;
    default: return false;
  }
}

// A group's contents after its start tag for `field`, through its matching end tag, nested to
// protobuf's own recursion limit (100).
[[nodiscard]] inline bool skip_group(std::string_view& s, std::uint64_t field, int depth) {
  if (depth >= 100) return false;
  for (;;) {
    std::uint64_t tag = 0;
    if (!take_varint(s, tag) || (tag >> 3) == 0) return false;
    const auto type = static_cast<std::uint32_t>(tag & 7);
    if (type == k_end_group) return (tag >> 3) == field;
    if (type == k_start_group) {
      if (!skip_group(s, tag >> 3, depth + 1)) return false;
    } else if (!skip_value(s, type)) {
      return false;
    }
  }
}

// Skips one field's value given its tag. Groups (wire types 3 and 4) are not in proto3's schema,
// but protobuf's parser keeps one a client sent as an unknown field and serializes it again, so
// a stored message may hold one. An end tag with no group open is malformed.
[[nodiscard]] inline bool skip_field(std::string_view& s, std::uint64_t field, std::uint32_t wire_type) {
  if (wire_type == k_start_group) return skip_group(s, field, 0);
  return skip_value(s, wire_type);
}

inline void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

[[nodiscard]] inline std::size_t varint_size(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// A tag byte for fields 1-15.
[[nodiscard]] constexpr char tag_byte(std::uint32_t field, std::uint32_t wire_type) {
  return static_cast<char>((field << 3) | wire_type);
}

}  // namespace txmq::protocol::wire
