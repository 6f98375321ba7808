#include "txmq/common/log.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace txmq::common::log {
namespace {

std::atomic<level> g_level{level::info};

constexpr std::array<std::string_view, 5> k_names = {"trace", "debug", "info", "warn", "error"};
// Padded so that the texts of consecutive lines start in one column.
constexpr std::array<std::string_view, 5> k_labels = {"TRACE ", "DEBUG ", "INFO  ", "WARN  ", "ERROR "};

// The ring of recent lines. Each slot is a seqlock: its sequence is odd while a writer fills it
// and even (and different) after, so the crash handler, which can take no lock, prints a slot
// only when the sequence is even and unchanged around its copy.
struct recent_slot {
  std::atomic<std::uint64_t> seq{0};
  std::atomic<std::size_t> size{0};
  char text[recent_line_bytes];
};
recent_slot g_recent[recent_lines_capacity];
std::atomic<std::uint64_t> g_recent_next{0};

void remember(std::string_view line) noexcept {
  const std::uint64_t n = g_recent_next.fetch_add(1, std::memory_order_relaxed);
  recent_slot& slot = g_recent[n % recent_lines_capacity];
  slot.seq.fetch_add(1, std::memory_order_acquire);  // odd: being written
  std::atomic_thread_fence(std::memory_order_release);
  const std::size_t size = std::min(line.size(), recent_line_bytes);
  std::memcpy(slot.text, line.data(), size);
  // A cut line still ends its line.
  if (size == recent_line_bytes && line.size() > size) slot.text[size - 1] = '\n';
  slot.size.store(size, std::memory_order_relaxed);
  slot.seq.fetch_add(1, std::memory_order_release);  // even: complete
}

}  // namespace

std::size_t write_recent_lines(int fd) noexcept {
  const std::uint64_t end = g_recent_next.load(std::memory_order_acquire);
  const std::uint64_t begin = end > recent_lines_capacity ? end - recent_lines_capacity : 0;
  std::size_t written = 0;
  char copy[recent_line_bytes];
  for (std::uint64_t i = begin; i < end; ++i) {
    recent_slot& slot = g_recent[i % recent_lines_capacity];
    const std::uint64_t before = slot.seq.load(std::memory_order_acquire);
    if (before % 2 != 0) continue;
    const std::size_t size = std::min(slot.size.load(std::memory_order_relaxed), recent_line_bytes);
    std::memcpy(copy, slot.text, size);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.seq.load(std::memory_order_relaxed) != before) continue;
    [[maybe_unused]] auto r = ::write(fd, copy, size);
    ++written;
  }
  return written;
}

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
  remember(out);
  // One write(2) per line so lines from different threads never interleave.
  [[maybe_unused]] auto n = ::write(2, out.data(), out.size());
}

}  // namespace txmq::common::log
