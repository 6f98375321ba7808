#pragma once

// Rate-limited log lines: a flood of the same event (thousands of refused or closed
// connections a second) must not become a flood of log lines. A log_limiter lets at most
// `lines` lines through per `window`; the lines beyond are counted, and the next line let
// through (or a flush()) says how many were left out, so no event goes unaccounted.
//
//   static common::log::log_limiter refusals(1, std::chrono::seconds(1));
//   if (auto v = refusals.admit()) common::log::warn("refusing ...", v.suppressed_note());
//
// Thread-safety: every member may be called from any thread (one mutex, held for a few
// instructions). The clock is passed in by tests; callers use the default, steady_clock::now().

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace txmq::common::log {

class log_limiter {
 public:
  using clock = std::chrono::steady_clock;

  // What admit() decided.
  struct verdict {
    bool allowed = false;
    // Lines left out before this one since the last line let through (only when allowed).
    std::uint64_t suppressed = 0;
    explicit operator bool() const noexcept { return allowed; }
    // " (N more suppressed since the last line)" when N > 0, else empty: for the end of the line.
    [[nodiscard]] std::string suppressed_note() const;
  };

  // `lines` ≥ 1 per `window` (> 0); smaller values are raised to those.
  log_limiter(std::size_t lines, clock::duration window);

  // Whether a line may be written at `now`; counts it as suppressed when not.
  [[nodiscard]] verdict admit(clock::time_point now = clock::now());

  // The count of lines left out and not yet reported, reset to 0; nonzero only once the window
  // in which they were left out has ended (so a periodic caller can log the tail of a flood that
  // stopped: "N more ... in the last second").
  [[nodiscard]] std::uint64_t flush(clock::time_point now = clock::now());

 private:
  void roll(clock::time_point now);

  const std::size_t lines_;
  const clock::duration window_;
  std::mutex mutex_;
  clock::time_point window_start_{};
  bool started_ = false;
  std::size_t used_ = 0;            // lines let through in the current window
  std::uint64_t suppressed_ = 0;    // left out since the last line let through
};

}  // namespace txmq::common::log
