// Command-line parsing of txmq: help, usage errors (exit 2) and commands of later versions.
// None of these reach a broker; the integration test (tests/cli_test.cc) covers the rest.

#include <algorithm>
#include <set>
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
    EXPECT_NE(r.out.find("cluster status"), std::string::npos);
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
      {"--broker", "127.0.0.1:7878,no-port", "topic", "list"},
      {"topic", "create", "a", "--replicas", "0"},
      {"cluster"},
      {"cluster", "status", "extra"},
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

// The commands of `txmq --help`: the leading lowercase words of each synopsis line
// ("topic create NAME ..." → "topic create").
std::vector<std::vector<std::string>> listed_commands() {
  const auto help = run_cli({"--help"}).out;
  std::vector<std::vector<std::string>> out;
  std::istringstream lines(help.substr(help.find("Commands:\n") + 10, help.find("\n\n", help.find("Commands:\n")) -
                                                                          help.find("Commands:\n") - 10));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> name;
    for (std::string w; words >> w && name.size() < 2;) {
      if (w.empty() || !std::all_of(w.begin(), w.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == '-'; }) ||
          w.front() == '-') {
        break;
      }
      name.push_back(w);
    }
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

// The long options the man page lists under the command's heading ("txmq topic create ...").
std::vector<std::string> man_page_options(const std::string& roff, const std::string& name) {
  std::string heading = ".SS\n\\fBtxmq ";
  for (const char c : name) heading += c == '-' ? std::string("\\-") : std::string(1, c);
  const auto at = roff.find(heading);
  if (at == std::string::npos) return {"<no section for " + name + ">"};
  const auto end = roff.find(".SS\n", at + heading.size());
  const auto section = roff.substr(at, end == std::string::npos ? std::string::npos : end - at);
  std::vector<std::string> out;
  const std::string marker = ".TP\n\\fB\\-\\-";
  for (auto p = section.find(marker); p != std::string::npos; p = section.find(marker, p + 1)) {
    const auto start = p + marker.size();
    std::string flag = section.substr(start, section.find("\\fR", start) - start);
    std::string plain;
    for (std::size_t i = 0; i < flag.size(); ++i) {
      if (flag[i] == '\\' && i + 1 < flag.size() && flag[i + 1] == '-') continue;
      plain += flag[i];
    }
    out.push_back("--" + plain);
  }
  return out;
}

// Issue #16 item 5: every command and subcommand has a --help (exit 0) listing the options its
// parser takes (the same table as the man page), and an unknown option names that help.
TEST(cli_usage_test, every_command_has_help_listing_its_options_as_the_man_page_does) {
  const auto commands = listed_commands();
  ASSERT_GE(commands.size(), 30u);
  const auto roff = run_cli({"--man-page"});
  ASSERT_EQ(roff.status, exit_ok);
  std::set<std::string> families;
  for (const auto& words : commands) {
    std::string name = words[0];
    if (words.size() == 2) {
      name += " " + words[1];
      families.insert(words[0]);
    }
    auto args = words;
    args.push_back("--help");
    const auto help = run_cli(args);
    EXPECT_EQ(help.status, exit_ok) << name;
    EXPECT_NE(help.out.find("usage: txmq " + name), std::string::npos) << help.out;
    EXPECT_NE(help.out.find("Global options"), std::string::npos) << name;
    EXPECT_NE(help.out.find("--broker"), std::string::npos) << name;
    const auto options = man_page_options(roff.out, name);
    for (const auto& flag : options) EXPECT_NE(help.out.find(flag), std::string::npos) << name << ": " << flag;
    // The synopsis's options are the parser's.
    std::istringstream synopsis(help.out.substr(0, help.out.find('\n')));
    for (std::string w; synopsis >> w;) {
      const auto flag = w.substr(w.find("--") == std::string::npos ? w.size() : w.find("--"));
      if (flag.empty()) continue;
      const auto bare = flag.substr(0, flag.find_first_of(" ]|)"));
      EXPECT_NE(std::find(options.begin(), options.end(), bare), options.end()) << name << ": " << bare;
    }

    auto bad = words;
    bad.push_back("--no-such-option");
    const auto r = run_cli(bad);
    EXPECT_EQ(r.status, exit_usage) << name;
    EXPECT_NE(r.err.find("no-such-option"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Try 'txmq " + name + " --help'"), std::string::npos) << r.err;
  }
  EXPECT_GE(families.size(), 8u);
  for (const auto& family : families) {
    const auto r = run_cli({family, "--help"});
    EXPECT_EQ(r.status, exit_ok) << family;
    EXPECT_NE(r.out.find("txmq " + family + " "), std::string::npos) << r.out;
  }
}

TEST(cli_usage_test, the_completion_script_knows_every_command) {
  const auto r = run_cli({"--bash-completion"});
  ASSERT_EQ(r.status, exit_ok);
  EXPECT_NE(r.out.find("complete -o default -F _txmq_complete txmq"), std::string::npos);
  for (const auto& words : listed_commands()) {
    EXPECT_NE(r.out.find(words.back()), std::string::npos) << words.back();
  }
  EXPECT_NE(r.out.find("--from) COMPREPLY=($(compgen -W 'earliest latest'"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace txmq::cli
