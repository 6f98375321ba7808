// resolve_token: --token, then --token-file, then TXMQ_TOKEN; both flags at once is an error,
// and no error text carries the token.

#include <cstdio>

#include <gtest/gtest.h>

#include "txmq/client/token.h"

namespace txmq::client {
namespace {

std::optional<std::string> env_with(std::string_view name) {
  if (name == "TXMQ_TOKEN") return std::string("txmq_from_env");
  return std::nullopt;
}

TEST(resolve_token, flag_then_file_then_environment) {
  const std::string file = ::testing::TempDir() + "/txmq_token_test";
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    std::fputs("  txmq_from_file\n", f);
    std::fclose(f);
  }
  EXPECT_EQ(resolve_token(std::string("txmq_flag"), std::nullopt, env_with).value(), "txmq_flag");
  EXPECT_EQ(resolve_token(std::nullopt, file, env_with).value(), "txmq_from_file");
  EXPECT_EQ(resolve_token(std::nullopt, std::nullopt, env_with).value(), "txmq_from_env");
  EXPECT_EQ(resolve_token(std::nullopt, std::nullopt, nullptr).value(), "");
  auto both = resolve_token(std::string("txmq_secret_flag"), file, env_with);
  ASSERT_FALSE(both);
  EXPECT_EQ(both.error().message.find("txmq_secret_flag"), std::string::npos);
  auto missing = resolve_token(std::nullopt, std::string("/nonexistent/tok"), env_with);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("/nonexistent/tok"), std::string::npos);
  std::remove(file.c_str());
}

}  // namespace
}  // namespace txmq::client
