#pragma once

// A minimal line logger to stderr: "2026-11-25T22:31:04.123Z INFO  text", used by txmq-broker
// and txmq-relay. The servers log little: start, stop, errors a person must see; debug and
// trace are for a developer chasing a problem.
//
// Thread-safety: every function may be called from any thread. Each line goes out in one
// write(2), so lines of different threads never interleave. The level is a process-wide
// setting (relaxed atomic): set it once at start.

#include <chrono>
#include <cstddef>
#include <sstream>
#include <string>
#include <string_view>

#include "txmq/protocol/result.h"

namespace txmq::common::log {

// Ascending: enabling a level enables every level above it.
enum class level { trace, debug, info, warn, error };

// "trace", "debug", "info", "warn", "error": the names the settings use (log_level), and the
// only ones parse_level() accepts. Errors: std::errc::invalid_argument, the text naming the bad
// value and the accepted ones.
[[nodiscard]] result<level> parse_level(std::string_view name);
[[nodiscard]] std::string_view to_string(level l) noexcept;

// Lines below `l` are dropped. The default is info.
void set_level(level l) noexcept;
[[nodiscard]] level current_level() noexcept;
[[nodiscard]] bool enabled(level l) noexcept;

// One line as write() prints it, with its newline: UTC timestamp with milliseconds, the level
// padded to five characters, the text.
[[nodiscard]] std::string format_line(level l, std::string_view text,
                                      std::chrono::system_clock::time_point when);
// Writes one line to stderr, whatever the level (callers check enabled(), as line() does).
// The line is also kept in a small ring of the most recent lines (recent_lines_capacity lines,
// each cut at recent_line_bytes), which a crash report prints (crash_report.h).
void write(level l, std::string_view text);

inline constexpr std::size_t recent_lines_capacity = 32;
inline constexpr std::size_t recent_line_bytes = 512;

// Writes the kept recent lines, oldest first, to `fd` with write(2) only: async-signal-safe,
// so a signal handler may call it. A line being written by another thread at that moment is
// skipped (never printed torn). Returns how many lines were written.
std::size_t write_recent_lines(int fd) noexcept;

template <class... Args>
void line(level l, const Args&... args) {
  if (!enabled(l)) return;
  std::ostringstream os;
  (os << ... << args);
  write(l, os.str());
}

template <class... Args> void trace(const Args&... a) { line(level::trace, a...); }
template <class... Args> void debug(const Args&... a) { line(level::debug, a...); }
template <class... Args> void info(const Args&... a) { line(level::info, a...); }
template <class... Args> void warn(const Args&... a) { line(level::warn, a...); }
template <class... Args> void error(const Args&... a) { line(level::error, a...); }

}  // namespace txmq::common::log
