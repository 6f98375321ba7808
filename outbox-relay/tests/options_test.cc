#include "txmq/relay/options.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace txmq::relay {
namespace {

using namespace std::chrono_literals;
using testing::HasSubstr;

// parse_relay_options over {"txmq-relay", args...}.
result<command_line> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "txmq-relay");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  return parse_relay_options(static_cast<int>(args.size()), argv.data());
}

command_line parse_ok(std::vector<std::string> args) {
  args.insert(args.begin(), {"--pg", "dbname=app"});
  auto r = parse(std::move(args));
  EXPECT_TRUE(r) << r.error().message;
  return r ? r.value() : command_line{};
}

std::string parse_error(std::vector<std::string> args) {
  args.insert(args.begin(), {"--pg", "dbname=app"});
  result<command_line> r = command_line{};
  EXPECT_NO_THROW(r = parse(args));
  EXPECT_FALSE(r) << "expected an error";
  if (r) return {};
  EXPECT_EQ(r.error().code, std::make_error_code(std::errc::invalid_argument));
  return r.error().message;
}

TEST(relay_options, defaults) {
  const auto c = parse_ok({});
  EXPECT_EQ(c.relay.conninfo, "dbname=app");
  EXPECT_EQ(c.relay.broker, "127.0.0.1:7878");
  EXPECT_EQ(c.relay.shards, 0);
  EXPECT_EQ(c.relay.batch, 500);
  EXPECT_EQ(c.relay.publishers, 1);
  EXPECT_EQ(c.relay.poll_interval, 1s);
  EXPECT_EQ(c.relay.rebalance_interval, 1s);
  EXPECT_EQ(c.relay.publish_timeout, 10s);
  EXPECT_EQ(c.relay.backoff_max, 5s);
  EXPECT_EQ(c.relay.stale_after, 32s);  // twice publish_timeout + backoff_max + rebalance_interval
  EXPECT_EQ(c.http, (common::host_port{"127.0.0.1", 7880}));
  EXPECT_EQ(c.http_endpoint, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 7880));
  EXPECT_EQ(c.log_level, common::log::level::info);
  EXPECT_FALSE(c.exit_text);
}

TEST(relay_options, every_flag_parses) {
  const auto c = parse_ok({"--broker", "[::1]:7000", "--shards", "16", "--batch", "100", "--publishers", "4",
                           "--poll-interval", "200ms", "--publish-timeout", "1m", "--http", "[::1]:0",
                           "--relay-id", "r1", "--log-level", "trace"});
  EXPECT_EQ(c.relay.broker, "[::1]:7000");
  EXPECT_EQ(c.relay.shards, 16);
  EXPECT_EQ(c.relay.batch, 100);
  EXPECT_EQ(c.relay.publishers, 4);
  EXPECT_EQ(c.relay.poll_interval, 200ms);
  EXPECT_EQ(c.relay.rebalance_interval, 200ms);  // never slower than the poll
  EXPECT_EQ(c.relay.publish_timeout, 1min);
  EXPECT_EQ(c.relay.stale_after, 2 * (1min + 5s + 200ms));  // never below what a working relay needs
  EXPECT_EQ(c.http_endpoint, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("::1"), 0));
  EXPECT_EQ(c.relay.relay_id, "r1");
  EXPECT_EQ(c.log_level, common::log::level::trace);
}

TEST(relay_options, stale_after_must_exceed_what_a_working_relay_needs) {
  const auto c = parse_ok({"--publish-timeout", "1s", "--backoff-max", "500ms", "--stale-after", "3s"});
  EXPECT_EQ(c.relay.backoff_max, 500ms);
  EXPECT_EQ(c.relay.stale_after, 3s);
  EXPECT_EQ(parse_ok({"--stale-after", "0s"}).relay.stale_after, 0ms);
  EXPECT_THAT(parse_error({"--publish-timeout", "10s", "--stale-after", "12s"}),
              HasSubstr("--stale-after (12s) must exceed --publish-timeout + --backoff-max + 1000ms (16000ms)"));
  EXPECT_THAT(parse_error({"--backoff-max", "0s"}), HasSubstr("--backoff-max must be positive"));
}

TEST(relay_options, http_takes_localhost_and_port_zero) {
  EXPECT_EQ(parse_ok({"--http", "localhost:0"}).http_endpoint,
            boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
}

// `--http 127.0.0.1:x` used to end in std::terminate (std::stoi outside the try), and port 70000
// wrapped to 4464. Every bad value is now an error naming the flag and the value.
TEST(relay_options, bad_http_values_are_errors_not_crashes) {
  for (const char* bad : {"127.0.0.1:x", "127.0.0.1:70000", "127.0.0.1:65536", ":80", "host:", "127.0.0.1",
                          "127.0.0.1:-1", "::1:80", "[::1]80", ""}) {
    const std::string message = parse_error({"--http", bad});
    EXPECT_THAT(message, HasSubstr("--http")) << bad;
    EXPECT_THAT(message, HasSubstr("'" + std::string(bad) + "'")) << bad;
    EXPECT_THAT(message, HasSubstr("HOST:PORT")) << bad;
  }
  EXPECT_THAT(parse_error({"--http", "127.0.0.1:70000"}), HasSubstr("from 0 to 65535"));
}

TEST(relay_options, http_hosts_must_be_ip_addresses) {
  const std::string message = parse_error({"--http", "example.com:7880"});
  EXPECT_THAT(message, HasSubstr("--http"));
  EXPECT_THAT(message, HasSubstr("not an IP address"));
}

// The broker's duration grammar: a bare number is no longer seconds, and hours are accepted.
TEST(relay_options, durations_use_the_common_grammar) {
  EXPECT_EQ(parse_ok({"--publish-timeout", "1h"}).relay.publish_timeout, 1h);
  for (const char* bad : {"5", "1.5s", "-1s", "fast", ""}) {
    const std::string message = parse_error({"--poll-interval", bad});
    EXPECT_THAT(message, HasSubstr("--poll-interval")) << bad;
    EXPECT_THAT(message, HasSubstr("500ms, 6s, 3m, 1h or 7d")) << bad;
  }
  EXPECT_THAT(parse_error({"--publish-timeout", "10"}), HasSubstr("--publish-timeout"));
}

TEST(relay_options, other_errors_name_the_flag) {
  EXPECT_THAT(parse(std::vector<std::string>{}).error().message, HasSubstr("--pg is required"));
  EXPECT_THAT(parse_error({"--batch", "0"}), HasSubstr("--batch must be between 1 and 100000"));
  EXPECT_THAT(parse_error({"--publishers", "65"}), HasSubstr("--publishers must be between 1 and 64"));
  EXPECT_THAT(parse_error({"--shards", "2000"}), HasSubstr("--shards must be between 0 and 1024"));
  EXPECT_THAT(parse_error({"--batch", "many"}), HasSubstr("batch"));
  EXPECT_THAT(parse_error({"--log-level", "verbose"}), HasSubstr("trace, debug, info, warn or error"));
  EXPECT_THAT(parse_error({"--no-such-flag"}), HasSubstr("no-such-flag"));
}

TEST(relay_options, a_bad_broker_address_is_refused_when_parsing) {
  for (const char* bad : {"127.0.0.1", "127.0.0.1:x", "127.0.0.1:0", "127.0.0.1:70000", ""}) {
    EXPECT_THAT(parse_error({"--broker", bad}), HasSubstr("--broker")) << bad;
  }
  EXPECT_EQ(parse_ok({"--broker", "broker.internal:7878"}).relay.broker, "broker.internal:7878");
}

TEST(relay_options, help_asks_to_exit_with_the_usage) {
  auto r = parse({"--help"});
  ASSERT_TRUE(r);
  ASSERT_TRUE(r.value().exit_text);
  EXPECT_THAT(*r.value().exit_text, HasSubstr("usage: txmq-relay --pg CONN --broker HOST:PORT"));
  EXPECT_THAT(*r.value().exit_text, HasSubstr("--log-level"));
  EXPECT_EQ(*r.value().exit_text, relay_usage());
}

TEST(relay_options, the_token_comes_from_the_flag_the_file_or_the_environment) {
  ::unsetenv("TXMQ_TOKEN");
  EXPECT_EQ(parse_ok({}).relay.auth_token, "");
  EXPECT_EQ(parse_ok({"--token", "txmq_flag"}).relay.auth_token, "txmq_flag");
  const std::string file = ::testing::TempDir() + "/txmq_relay_token_test";
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    std::fputs("txmq_file\n", f);
    std::fclose(f);
  }
  EXPECT_EQ(parse_ok({"--token-file", file}).relay.auth_token, "txmq_file");
  ::setenv("TXMQ_TOKEN", "txmq_env", 1);
  EXPECT_EQ(parse_ok({}).relay.auth_token, "txmq_env");
  ::unsetenv("TXMQ_TOKEN");
  EXPECT_THAT(parse_error({"--token", "txmq_secret", "--token-file", file}), HasSubstr("not both"));
  const auto missing = parse_error({"--token-file", "/nonexistent/relay.token"});
  EXPECT_THAT(missing, HasSubstr("/nonexistent/relay.token"));
  std::remove(file.c_str());
}

// A file in the test's temporary directory holding `text`; returns its path.
std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return path;
}

TEST(relay_options, a_toml_config_file_sets_the_flags_and_flags_win) {
  const auto file = write_file("relay_config_test.toml",
                               "# comment\n"
                               "pg = \"host=/tmp dbname=from_file\"\n"
                               "broker = \"127.0.0.1:9999\"\n"
                               "batch = 42\n"
                               "publishers = 3\n"
                               "poll_interval = \"250ms\"\n"
                               "relay_id = \"file-relay\"\n"
                               "http = \"127.0.0.1:7990\"\n"
                               "log_level = \"warn\"\n"
                               "tls = true\n");
  auto r = parse({"--config", file, "--batch", "7", "--relay-id", "flag-relay"});
  ASSERT_TRUE(r) << r.error().message;
  const auto& c = r.value();
  EXPECT_EQ(c.relay.conninfo, "host=/tmp dbname=from_file");
  EXPECT_EQ(c.relay.broker, "127.0.0.1:9999");
  EXPECT_EQ(c.relay.batch, 7);  // the flag
  EXPECT_EQ(c.relay.relay_id, "flag-relay");
  EXPECT_EQ(c.relay.publishers, 3);
  EXPECT_EQ(c.relay.poll_interval, 250ms);
  EXPECT_EQ(c.http, (common::host_port{"127.0.0.1", 7990}));
  EXPECT_EQ(c.log_level, common::log::level::warn);
  EXPECT_TRUE(c.relay.tls.enabled);
  // Defaults stay for what the file does not name.
  EXPECT_EQ(c.relay.publish_timeout, 10s);
  std::remove(file.c_str());
}

TEST(relay_options, a_bad_config_file_is_named_with_its_line) {
  const auto check = [](const std::string& text, const std::string& expected) {
    const auto file = write_file("relay_bad_config_test.toml", text);
    auto r = parse({"--config", file});
    ASSERT_FALSE(r) << text;
    EXPECT_THAT(r.error().message, HasSubstr(expected)) << text;
    EXPECT_THAT(r.error().message, HasSubstr("relay_bad_config_test.toml")) << text;
    std::remove(file.c_str());
  };
  check("pg = \"dbname=a\"\npoll_intervall = \"1s\"\n", "line 2: unknown setting 'poll_intervall'");
  check("pg = \"dbname=a\"\npoll-interval = \"1s\"\n", "unknown setting 'poll-interval'");
  check("pg = \"dbname=a\"\nconfig = \"x\"\n", "unknown setting 'config'");
  check("pg = \"dbname=a\"\nbatch = [1, 2]\n", "batch wants a string or an integer");
  check("pg = \"dbname=a\"\nbatch = 1.5\n", "batch wants a string or an integer");
  check("pg = \"dbname=a\"\npoll_interval = 5\n", "line 2: poll_interval is a duration, written as a string with a unit: \"5s\"");
  check("pg = \"dbname=a\"\ntls = \"yes\"\n", "tls is true or false");
  check("pg = \"dbname=a\"\nbatch = true\n", "batch wants a value");
  check("pg = \"dbname=a\"\nbatch = \"many\"\n", "batch");
  check("pg = \n", "line 1");
  auto missing = parse({"--config", "/nonexistent/relay.toml"});
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message, HasSubstr("cannot read config file '/nonexistent/relay.toml'"));
  // pg is still required, from the file or a flag.
  const auto file = write_file("relay_nopg_test.toml", "broker = \"127.0.0.1:7878\"\n");
  auto r = parse({"--config", file});
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("--pg is required"));
  EXPECT_TRUE(parse({"--config", file, "--pg", "dbname=x"}));
  std::remove(file.c_str());
}

TEST(relay_options, the_man_page_and_completion_list_every_flag_of_help) {
  const auto help = relay_usage();
  const auto page = relay_manual_page();
  ASSERT_FALSE(page.options.empty());
  for (const auto& o : page.options) EXPECT_THAT(help, HasSubstr("--" + o.long_name));
  const auto roff = common::manual::to_roff(page);
  for (const std::string flag : {"config", "pg", "poll\\-interval", "tls\\-ca"}) {
    EXPECT_THAT(roff, HasSubstr("\\fB\\-\\-" + flag + "\\fR")) << flag;
  }
  auto man = parse({"--man-page"});
  ASSERT_TRUE(man && man.value().exit_text);
  EXPECT_EQ(*man.value().exit_text, roff);
  auto completion = parse({"--bash-completion"});
  ASSERT_TRUE(completion && completion.value().exit_text);
  EXPECT_THAT(*completion.value().exit_text, HasSubstr("--config"));
  EXPECT_THAT(*completion.value().exit_text, HasSubstr("complete -o default -F _txmq_relay_complete txmq-relay"));
}

}  // namespace
}  // namespace txmq::relay
