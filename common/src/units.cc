#include "txmq/common/units.h"

#include <limits>
#include <system_error>

#include "text.h"

namespace txmq::common {
namespace {

using std::chrono::milliseconds;

constexpr std::int64_t k_ms_per_second = 1000;
constexpr std::int64_t k_ms_per_minute = 60 * k_ms_per_second;
constexpr std::int64_t k_ms_per_hour = 60 * k_ms_per_minute;
constexpr std::int64_t k_ms_per_day = 24 * k_ms_per_hour;

constexpr std::uint64_t k_kib = 1024;
constexpr std::uint64_t k_mib = 1024 * k_kib;
constexpr std::uint64_t k_gib = 1024 * k_mib;

error not_a_duration(std::string_view text) {
  return invalid("'" + std::string(text) +
                 "' is not a duration: expected an integer and a unit (ms, s, m, h or d) such as "
                 "500ms, 6s, 3m, 1h or 7d");
}

}  // namespace

result<milliseconds> parse_duration(std::string_view raw) {
  const std::string_view text = detail::trim(raw);
  const auto [digits, unit] = detail::split_number(text);
  const auto value = detail::parse_unsigned(digits);
  if (!value) return not_a_duration(raw);
  std::int64_t factor = 0;
  if (unit == "ms") {
    factor = 1;
  } else if (unit == "s") {
    factor = k_ms_per_second;
  } else if (unit == "m") {
    factor = k_ms_per_minute;
  } else if (unit == "h") {
    factor = k_ms_per_hour;
  } else if (unit == "d") {
    factor = k_ms_per_day;
  } else {
    return not_a_duration(raw);
  }
  if (*value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max() / factor)) {
    return invalid("duration '" + std::string(raw) + "' is too long");
  }
  return milliseconds(static_cast<std::int64_t>(*value) * factor);
}

result<std::vector<milliseconds>> parse_duration_list(std::string_view text) {
  if (detail::trim(text).empty()) {
    return invalid("an empty list of durations: expected durations separated by commas, such as 5s,10s,1m");
  }
  std::vector<milliseconds> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item =
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    auto d = parse_duration(item);
    if (!d) return d.error();
    out.push_back(d.value());
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

result<std::uint64_t> parse_size(std::string_view raw) {
  const std::string_view text = detail::trim(raw);
  const auto [digits, suffix] = detail::split_number(text);
  const auto value = detail::parse_unsigned(digits);
  const auto not_a_size = [&] {
    return invalid("'" + std::string(raw) +
                   "' is not a size: expected bytes, optionally with a KiB, MiB or GiB suffix, such as 4MiB");
  };
  if (!value) return not_a_size();
  std::uint64_t factor = 0;
  if (suffix.empty()) {
    factor = 1;
  } else if (suffix == "KiB") {
    factor = k_kib;
  } else if (suffix == "MiB") {
    factor = k_mib;
  } else if (suffix == "GiB") {
    factor = k_gib;
  } else {
    return not_a_size();
  }
  if (*value > std::numeric_limits<std::uint64_t>::max() / factor) {
    return invalid("size '" + std::string(raw) + "' is too large");
  }
  return *value * factor;
}

std::string format_duration(milliseconds d) {
  const std::int64_t ms = d.count();
  if (ms == 0) return "0s";
  if (ms % k_ms_per_day == 0) return std::to_string(ms / k_ms_per_day) + "d";
  if (ms % k_ms_per_hour == 0) return std::to_string(ms / k_ms_per_hour) + "h";
  if (ms % k_ms_per_minute == 0) return std::to_string(ms / k_ms_per_minute) + "m";
  if (ms % k_ms_per_second == 0) return std::to_string(ms / k_ms_per_second) + "s";
  return std::to_string(ms) + "ms";
}

std::string format_size(std::uint64_t bytes) {
  if (bytes != 0 && bytes % k_gib == 0) return std::to_string(bytes / k_gib) + "GiB";
  if (bytes != 0 && bytes % k_mib == 0) return std::to_string(bytes / k_mib) + "MiB";
  if (bytes != 0 && bytes % k_kib == 0) return std::to_string(bytes / k_kib) + "KiB";
  return std::to_string(bytes);
}

}  // namespace txmq::common
