#pragma once

// Durations and sizes as people write them, one grammar for every txmq binary (the broker's
// settings, the relay's flags; docs/configuration.md, "Value syntax"):
//
//   duration       an unsigned integer and a unit among ms, s, m, h, d, no space, no
//                  fraction: "500ms", "6s", "3m", "1h", "7d" ("0s" is zero)
//   duration list  durations separated by commas: "1s,2s,5s" (spaces around items allowed,
//                  no empty items, at least one)
//   size           plain bytes ("4194304") or an integer with KiB, MiB or GiB ("4MiB")
//
// Spaces and tabs around the whole text are ignored. A value that does not fit (in
// milliseconds as int64, in bytes as uint64) is an error, never wrapped.
//
// Thread-safety: every function is pure and may be called from any thread. Errors:
// std::errc::invalid_argument, the text quoting the input and saying what is expected.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "txmq/protocol/result.h"

namespace txmq::common {

[[nodiscard]] result<std::chrono::milliseconds> parse_duration(std::string_view text);
[[nodiscard]] result<std::vector<std::chrono::milliseconds>> parse_duration_list(std::string_view text);
[[nodiscard]] result<std::uint64_t> parse_size(std::string_view text);

// The largest unit that represents `d` exactly: 6000ms -> "6s", 90000ms -> "90s", 0 -> "0s".
// parse_duration() reads it back.
[[nodiscard]] std::string format_duration(std::chrono::milliseconds d);
// "4MiB" when exact in KiB/MiB/GiB, else plain bytes. parse_size() reads it back.
[[nodiscard]] std::string format_size(std::uint64_t bytes);

}  // namespace txmq::common
