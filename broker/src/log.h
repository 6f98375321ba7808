#pragma once

// A minimal line logger to stderr: "2026-11-25T22:31:04.123Z INFO  text". Thread-safe (one
// write per line). The broker logs little: start, stop, errors a person must see.

#include <sstream>
#include <string>
#include <string_view>

namespace txmq::broker::log {

enum class level { debug, info, warn, error };

void set_level(level l);
bool enabled(level l);
void write(level l, std::string_view text);

template <class... Args>
void line(level l, const Args&... args) {
  if (!enabled(l)) return;
  std::ostringstream os;
  (os << ... << args);
  write(l, os.str());
}

template <class... Args> void debug(const Args&... a) { line(level::debug, a...); }
template <class... Args> void info(const Args&... a) { line(level::info, a...); }
template <class... Args> void warn(const Args&... a) { line(level::warn, a...); }
template <class... Args> void error(const Args&... a) { line(level::error, a...); }

}  // namespace txmq::broker::log
