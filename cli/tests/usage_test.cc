// Command-line parsing of txmq: help, usage errors (exit 2) and commands of later versions.
// None of these reach a broker; the integration test (tests/cli_test.cc) covers the rest.

#include <sstream>

#include <gtest/gtest.h>

#include "txmq/cli/app.h"

namespace txmq::cli {
namespace {

struct outcome {
  int status;
  std::string out;
  std::string err;
};

outcome run_cli(std::vector<std::string> args) {
  std::istringstream in;
  std::ostringstream out;
  std::ostringstream err;
  environment env{in, out, err, [](std::string_view) -> std::optional<std::string> { return std::nullopt; }};
  const int status = run(args, env);
  return {status, out.str(), err.str()};
}

TEST(cli_usage_test, help_lists_the_commands) {
  for (const auto& args : {std::vector<std::string>{"--help"}, {"-h"}}) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.status, exit_ok);
    EXPECT_NE(r.out.find("usage: txmq"), std::string::npos);
    EXPECT_NE(r.out.find("topic create NAME [--partitions N]"), std::string::npos);
    EXPECT_NE(r.out.find("dlq redrive G"), std::string::npos);
    EXPECT_NE(r.out.find("--broker"), std::string::npos);
  }
}

TEST(cli_usage_test, command_help_shows_its_options) {
  const auto r = run_cli({"consume", "--help"});
  EXPECT_EQ(r.status, exit_ok);
  EXPECT_NE(r.out.find("usage: txmq consume TOPIC --group G"), std::string::npos);
  EXPECT_NE(r.out.find("--no-ack"), std::string::npos);
  const auto t = run_cli({"topic", "--help"});
  EXPECT_EQ(t.status, exit_ok);
  EXPECT_NE(t.out.find("txmq topic describe NAME"), std::string::npos);
}

TEST(cli_usage_test, usage_errors_exit_2_with_a_short_usage) {
  const std::vector<std::vector<std::string>> bad{
      {},
      {"frobnicate"},
      {"topic"},
      {"topic", "rename", "x"},
      {"topic", "create"},
      {"topic", "create", "a", "b"},
      {"topic", "create", "a", "--partitions", "many"},
      {"topic", "create", "a", "--partitions", "0"},
      {"topic", "list", "--bogus"},
      {"produce"},
      {"produce", "t", "--id", "not-a-uuid"},
      {"produce", "t", "--header", "novalue"},
      {"produce", "t", "body", "extra"},
      {"consume", "t"},
      {"consume", "t", "--group", "g", "--max", "0"},
      {"consume", "t", "--group", "g", "--wait", "soon"},
      {"group", "create", "g"},
      {"group", "create", "g", "--topic", "t", "--from", "middle"},
      {"dlq", "list"},
      {"--broker", "no-port", "topic", "list"},
  };
  for (const auto& args : bad) {
    const auto r = run_cli(args);
    std::string line;
    for (const auto& a : args) line += a + " ";
    EXPECT_EQ(r.status, exit_usage) << line << "\n" << r.err;
    EXPECT_TRUE(r.err.starts_with("txmq: ")) << line << "\n" << r.err;
    EXPECT_NE(r.err.find("usage"), std::string::npos) << line << "\n" << r.err;
    EXPECT_EQ(r.out, "") << line;
  }
}

}  // namespace
}  // namespace txmq::cli
