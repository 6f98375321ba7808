#include "txmq/common/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace txmq::common::log {
namespace {

using testing::HasSubstr;
using testing::Not;

// What the logger writes to stderr while `fn` runs (fd 2 pointed at a file for the time).
template <class Fn>
std::string captured_stderr(Fn fn) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("txmq-log-test-" + std::to_string(::getpid()) + ".txt");
  const int file = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  EXPECT_GE(file, 0);
  const int saved = ::dup(2);
  ::dup2(file, 2);
  fn();
  ::dup2(saved, 2);
  ::close(saved);
  ::close(file);
  std::ostringstream text;
  text << std::ifstream(path).rdbuf();
  std::filesystem::remove(path);
  return text.str();
}

// Restores the process-wide level after each test.
class log_test : public testing::Test {
 protected:
  void TearDown() override { set_level(level::info); }
};

TEST_F(log_test, parses_every_level_name_to_its_own_level) {
  EXPECT_EQ(parse_level("trace").value(), level::trace);
  EXPECT_EQ(parse_level("debug").value(), level::debug);
  EXPECT_EQ(parse_level("info").value(), level::info);
  EXPECT_EQ(parse_level("warn").value(), level::warn);
  EXPECT_EQ(parse_level("error").value(), level::error);
  for (const auto l : {level::trace, level::debug, level::info, level::warn, level::error}) {
    EXPECT_EQ(parse_level(to_string(l)).value(), l);
  }
}

TEST_F(log_test, rejects_unknown_level_names_with_the_accepted_ones) {
  for (const char* bad : {"", "verbose", "TRACE", "Info", " info", "warning"}) {
    auto r = parse_level(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, std::make_error_code(std::errc::invalid_argument));
    EXPECT_THAT(r.error().message, HasSubstr("trace, debug, info, warn or error")) << bad;
  }
}

// The bug this replaces: `log_level trace` was mapped to debug, so trace lines never appeared.
TEST_F(log_test, trace_level_writes_trace_lines_and_debug_level_drops_them) {
  set_level(parse_level("trace").value());
  EXPECT_EQ(current_level(), level::trace);
  EXPECT_TRUE(enabled(level::trace));
  const std::string at_trace = captured_stderr([] { trace("wire bytes ", 42); });
  EXPECT_THAT(at_trace, HasSubstr("TRACE wire bytes 42\n"));

  set_level(level::debug);
  EXPECT_FALSE(enabled(level::trace));
  EXPECT_TRUE(enabled(level::debug));
  const std::string at_debug = captured_stderr([] {
    trace("hidden");
    debug("shown");
  });
  EXPECT_THAT(at_debug, Not(HasSubstr("hidden")));
  EXPECT_THAT(at_debug, HasSubstr("DEBUG shown\n"));
}

TEST_F(log_test, levels_below_the_set_one_are_dropped) {
  set_level(level::warn);
  EXPECT_FALSE(enabled(level::info));
  EXPECT_TRUE(enabled(level::warn));
  EXPECT_TRUE(enabled(level::error));
  const std::string out = captured_stderr([] {
    info("quiet");
    error("loud");
  });
  EXPECT_THAT(out, Not(HasSubstr("quiet")));
  EXPECT_THAT(out, HasSubstr("ERROR loud\n"));
}

TEST_F(log_test, line_format_is_utc_with_milliseconds_and_a_padded_level) {
  const auto when = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'764'109'864'123));
  EXPECT_EQ(format_line(level::info, "started", when), "2025-11-25T22:31:04.123Z INFO  started\n");
  EXPECT_EQ(format_line(level::error, "x", when), "2025-11-25T22:31:04.123Z ERROR x\n");
  EXPECT_EQ(format_line(level::trace, "x", when), "2025-11-25T22:31:04.123Z TRACE x\n");
}

}  // namespace
}  // namespace txmq::common::log
