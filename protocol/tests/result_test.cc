#include "txmq/protocol/result.h"

#include <gtest/gtest.h>

#include "txmq/protocol/errc.h"

namespace txmq {
namespace {

result<int> half(int n) {
  if (n % 2 != 0) return error(protocol::errc::invalid_argument, std::to_string(n) + " is odd");
  return n / 2;
}

result<int> quarter(int n) {
  TXMQ_TRY(auto h, half(n));
  return half(h);
}

TEST(result_test, an_error_keeps_its_code_and_text_through_try) {
  auto r = quarter(6);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), protocol::errc::invalid_argument);
  EXPECT_EQ(r.error().message, "3 is odd");
  EXPECT_EQ(r.error().to_string(), "INVALID_ARGUMENT: 3 is odd");
  EXPECT_EQ(quarter(8).value(), 2);
}

TEST(result_test, a_bare_code_gets_its_category_text) {
  const error e = std::make_error_code(std::errc::address_in_use);
  EXPECT_EQ(e, std::errc::address_in_use);
  EXPECT_EQ(e.message, std::make_error_code(std::errc::address_in_use).message());
  // The text is not repeated when it adds nothing to the code's description.
  EXPECT_EQ(e.to_string(), e.message);
}

TEST(result_test, value_of_an_error_throws_the_error) {
  try {
    (void)half(3).value();
    FAIL() << "value() of an error did not throw";
  } catch (const exception& ex) {
    EXPECT_EQ(ex.get().message, "3 is odd");
    EXPECT_STREQ(ex.what(), "INVALID_ARGUMENT: 3 is odd");
  }
}

TEST(result_test, retriable_protocol_codes) {
  EXPECT_TRUE(error(protocol::errc::storage_error).retriable());
  EXPECT_TRUE(error(protocol::errc::store_unavailable).retriable());
  EXPECT_TRUE(error(protocol::errc::store_full).retriable());
  EXPECT_TRUE(error(protocol::errc::not_leader).retriable());
  EXPECT_FALSE(error(protocol::errc::fenced).retriable());
  EXPECT_TRUE(error(protocol::errc::shutting_down).retriable());
  EXPECT_TRUE(error(protocol::errc::internal).retriable());
  EXPECT_TRUE(error(protocol::errc::limit_exceeded).retriable());
  EXPECT_FALSE(error(protocol::errc::unknown_topic).retriable());
  EXPECT_FALSE(error(protocol::errc::tx_already_resolved).retriable());
  EXPECT_FALSE(error(std::make_error_code(std::errc::timed_out)).retriable());
}

}  // namespace
}  // namespace txmq
