#include "txmq/common/base64.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace txmq::common {
namespace {

using testing::HasSubstr;

// RFC 4648 §10 test vectors, and bytes that are not text.
TEST(base64, encodes_the_rfc_vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode(std::string("\xff\x00\x80", 3)), "/wCA");
  EXPECT_EQ(base64_encode(std::string("\xff\xfe", 2)), "//4=");
}

TEST(base64, round_trips) {
  for (const std::string& s : std::vector<std::string>{"", "f", "fo", "foo", "foob", "fooba", "foobar",
                                                       std::string("\0\xff\x10", 3)}) {
    auto decoded = base64_decode(base64_encode(s));
    ASSERT_TRUE(decoded) << s;
    EXPECT_EQ(decoded.value(), s);
  }
}

TEST(base64, rejects_what_is_not_padded_base64_without_quoting_it) {
  auto short_text = base64_decode("abc");
  ASSERT_FALSE(short_text);
  EXPECT_EQ(short_text.error().code, std::make_error_code(std::errc::invalid_argument));
  EXPECT_THAT(short_text.error().message, HasSubstr("multiple of 4"));
  EXPECT_THAT(short_text.error().message, testing::Not(HasSubstr("abc")));

  auto bad_char = base64_decode("a$c=");
  ASSERT_FALSE(bad_char);
  EXPECT_THAT(bad_char.error().message, HasSubstr("outside"));
}

}  // namespace
}  // namespace txmq::common
