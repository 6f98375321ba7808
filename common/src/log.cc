#include "txmq/common/log.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <ctime>

namespace txmq::common::log {
namespace {

std::atomic<level> g_level{level::info};

constexpr std::array<std::string_view, 5> k_names = {"trace", "debug", "info", "warn", "error"};
// Padded so that the texts of consecutive lines start in one column.
constexpr std::array<std::string_view, 5> k_labels = {"TRACE ", "DEBUG ", "INFO  ", "WARN  ", "ERROR "};

}  // namespace

result<level> parse_level(std::string_view name) {
  for (std::size_t i = 0; i < k_names.size(); ++i) {
    if (k_names[i] == name) return static_cast<level>(i);
  }
  return txmq::error(std::make_error_code(std::errc::invalid_argument),
                     "log level '" + std::string(name) + "': expected trace, debug, info, warn or error");
}

std::string_view to_string(level l) noexcept { return k_names[static_cast<std::size_t>(l)]; }

void set_level(level l) noexcept { g_level.store(l, std::memory_order_relaxed); }
level current_level() noexcept { return g_level.load(std::memory_order_relaxed); }
bool enabled(level l) noexcept { return l >= g_level.load(std::memory_order_relaxed); }

std::string format_line(level l, std::string_view text, std::chrono::system_clock::time_point when) {
  const auto t = std::chrono::system_clock::to_time_t(when);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[80];
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  std::string out;
  out.reserve(text.size() + 48);
  out.append(stamp).append(k_labels[static_cast<std::size_t>(l)]).append(text).push_back('\n');
  return out;
}

void write(level l, std::string_view text) {
  const std::string out = format_line(l, text, std::chrono::system_clock::now());
  // One write(2) per line so lines from different threads never interleave.
  [[maybe_unused]] auto n = ::write(2, out.data(), out.size());
}

}  // namespace txmq::common::log
