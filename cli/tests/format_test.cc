#include "txmq/cli/format.h"

#include <sstream>

#include <gtest/gtest.h>

namespace txmq::cli {
namespace {

TEST(cli_format_test, utf8_validation) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("hello"));
  EXPECT_TRUE(is_valid_utf8("gr\xC3\xBC\xC3\x9F" "e \xE4\xB8\xAD \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xFF"));
  EXPECT_FALSE(is_valid_utf8("\xC3"));              // truncated
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
}

TEST(cli_format_test, escapes_and_times) {
  EXPECT_EQ(escape_control("a\nb\tc\x01"), "a\\nb\\tc\\x01");
  EXPECT_EQ(iso_time(0), "-");
  EXPECT_EQ(iso_time(1714564800123), "2024-05-01T12:00:00.123Z");
  EXPECT_EQ(duration_text(0), "-");
  EXPECT_EQ(duration_text(7 * 86'400'000LL), "7d");
  EXPECT_EQ(duration_text(90'000), "90s");
  EXPECT_EQ(duration_text(1500), "1500ms");
  EXPECT_EQ(headers_text({}), "-");
  EXPECT_EQ(headers_text({{"a", "1"}, {"b", "x y"}}), "a=1,b=x y");
}

TEST(cli_format_test, buffered_table_aligns_columns) {
  table t({"ID", "NAME", "N"});
  t.add({"1", "orders", "12"});
  t.add({"200", "x", "3"});
  std::ostringstream out;
  t.print(out);
  EXPECT_EQ(out.str(),
            "ID   NAME    N\n"
            "1    orders  12\n"
            "200  x       3\n");
}

TEST(cli_format_test, streamed_table_prints_header_with_first_row) {
  table t({"A", "B"});
  std::ostringstream out;
  EXPECT_EQ(out.str(), "");
  t.write_row(out, {"xyz", "1"});
  t.write_row(out, {"q", "2"});
  EXPECT_EQ(out.str(),
            "A    B\n"
            "xyz  1\n"
            "q    2\n");
}

}  // namespace
}  // namespace txmq::cli
