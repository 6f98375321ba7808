#pragma once

// Small text helpers shared by the grammars of address.cc and units.cc (private).

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

namespace txmq::common::detail {

// `s` without the spaces and tabs around it.
inline std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t");
  return s.substr(first, last - first + 1);
}

// The whole of `digits` as an unsigned integer: no sign, no spaces, no trailing text, no
// overflow. from_chars stops at the first non-digit, hence the check that it used everything.
inline std::optional<std::uint64_t> parse_unsigned(std::string_view digits) {
  if (digits.empty() || digits.front() < '0' || digits.front() > '9') return std::nullopt;
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
  return value;
}

// The leading digits of `text` and what follows them ("500ms" -> "500", "ms").
inline std::pair<std::string_view, std::string_view> split_number(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  return {text.substr(0, i), text.substr(i)};
}

}  // namespace txmq::common::detail
