#include "txmq/common/units.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace txmq::common {
namespace {

using namespace std::chrono_literals;
using testing::HasSubstr;
using ms = std::chrono::milliseconds;

TEST(units, durations) {
  EXPECT_EQ(parse_duration("500ms").value(), 500ms);
  EXPECT_EQ(parse_duration("6s").value(), 6s);
  EXPECT_EQ(parse_duration("3m").value(), 3min);
  EXPECT_EQ(parse_duration("1h").value(), 1h);
  EXPECT_EQ(parse_duration("7d").value(), 7 * 24h);
  EXPECT_EQ(parse_duration("0s").value(), 0ms);
  EXPECT_EQ(parse_duration(" 2s ").value(), 2s);
  EXPECT_EQ(parse_duration("0010s").value(), 10s);
  EXPECT_EQ(parse_duration("106751991167d").value().count(), 106751991167LL * 86400000LL);
}

TEST(units, malformed_durations_say_what_is_expected) {
  // "6" (no unit) was read as seconds by the relay alone; one grammar refuses it everywhere.
  for (const char* bad : {"", "6", "s", "6 s", "-1s", "+1s", "1.5s", "6S", "6sec", "1h30m",
                          "ms", "99999999999999999999d", "106751991167301d"}) {
    auto r = parse_duration(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, std::make_error_code(std::errc::invalid_argument)) << bad;
    EXPECT_THAT(r.error().message, HasSubstr("'" + std::string(bad) + "'")) << bad;
  }
  EXPECT_THAT(parse_duration("6").error().message, HasSubstr("500ms, 6s, 3m, 1h or 7d"));
}

TEST(units, formats_durations_in_the_largest_exact_unit) {
  EXPECT_EQ(format_duration(0ms), "0s");
  EXPECT_EQ(format_duration(500ms), "500ms");
  EXPECT_EQ(format_duration(1500ms), "1500ms");
  EXPECT_EQ(format_duration(90s), "90s");
  EXPECT_EQ(format_duration(2min), "2m");
  EXPECT_EQ(format_duration(2h), "2h");
  EXPECT_EQ(format_duration(48h), "2d");
  for (const ms d : std::vector<ms>{0ms, 1ms, 1500ms, 61s, 90min, 25h, 7 * 24h}) {
    EXPECT_EQ(parse_duration(format_duration(d)).value(), d);
  }
}

TEST(units, duration_lists) {
  EXPECT_EQ(parse_duration_list("1s,2s").value(), (std::vector<ms>{1s, 2s}));
  EXPECT_EQ(parse_duration_list(" 1s , 2m ").value(), (std::vector<ms>{1s, 2min}));
  EXPECT_EQ(parse_duration_list("5s").value(), (std::vector<ms>{5s}));
  for (const char* bad : {"", " ", "1s,", ",1s", "1s,,2s", "1s;2s", "1s 2s", "1s,x"}) {
    EXPECT_FALSE(parse_duration_list(bad)) << bad;
  }
}

TEST(units, sizes) {
  EXPECT_EQ(parse_size("0").value(), 0u);
  EXPECT_EQ(parse_size("4194304").value(), 4194304u);
  EXPECT_EQ(parse_size("64KiB").value(), 64u * 1024);
  EXPECT_EQ(parse_size("4MiB").value(), 4u * 1024 * 1024);
  EXPECT_EQ(parse_size("2GiB").value(), 2ull * 1024 * 1024 * 1024);
  for (const char* bad : {"", "MiB", "4MB", "4mib", "4 MiB", "-1", "1.5MiB", "4M", "4KB",
                          "18446744073709551616", "17179869184GiB"}) {
    auto r = parse_size(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_THAT(r.error().message, HasSubstr("'" + std::string(bad) + "'")) << bad;
  }
  EXPECT_EQ(format_size(0), "0");
  EXPECT_EQ(format_size(1000), "1000");
  EXPECT_EQ(format_size(64 * 1024), "64KiB");
  EXPECT_EQ(format_size(4 * 1024 * 1024), "4MiB");
  EXPECT_EQ(format_size(1024ull * 1024 * 1024), "1GiB");
}

}  // namespace
}  // namespace txmq::common
