#include "log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>

namespace txmq::broker::log {
namespace {
std::atomic<level> g_level{level::info};
}

void set_level(level l) { g_level = l; }
bool enabled(level l) { return l >= g_level.load(std::memory_order_relaxed); }

void write(level l, std::string_view text) {
  const auto now = std::chrono::system_clock::now();
  const auto t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[80];
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  static constexpr const char* names[] = {"DEBUG ", "INFO  ", "WARN  ", "ERROR "};
  std::string out;
  out.reserve(text.size() + 48);
  out.append(stamp).append(names[static_cast<int>(l)]).append(text).push_back('\n');
  // One write(2) per line so lines from different threads never interleave.
  [[maybe_unused]] auto n = ::write(2, out.data(), out.size());
}

}  // namespace txmq::broker::log
