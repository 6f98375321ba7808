#include "txmq/broker/config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "txmq/common/log.h"

namespace txmq::broker {
namespace {

using namespace std::chrono_literals;
using testing::AllOf;
using testing::HasSubstr;
using ms = std::chrono::milliseconds;

// Runs parse_broker_config over {"txmq-broker", args...}.
struct parse_outcome {
  result<parsed_config> parsed;
  std::string error;
};

parse_outcome parse(std::vector<std::string> args) {
  args.insert(args.begin(), "txmq-broker");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  auto parsed = parse_broker_config(static_cast<int>(args.size()), argv.data());
  std::string error = parsed ? std::string() : parsed.error().message;
  return {std::move(parsed), std::move(error)};
}

broker_config parse_ok(std::vector<std::string> args) {
  auto out = parse(std::move(args));
  EXPECT_TRUE(out.parsed) << out.error;
  if (!out.parsed) return {};
  EXPECT_FALSE(out.parsed.value().exit_text.has_value());
  return out.parsed.value().config;
}

std::string parse_error(std::vector<std::string> args) {
  auto out = parse(std::move(args));
  EXPECT_FALSE(out.parsed) << "expected an error";
  if (!out.parsed) {
    EXPECT_EQ(out.parsed.error(), std::make_error_code(std::errc::invalid_argument));
  }
  EXPECT_FALSE(out.error.empty());
  return out.error;
}

std::string toml_error(std::string_view text) {
  broker_config config;
  auto r = apply_toml_config(text, "test.toml", config);
  EXPECT_FALSE(r) << "expected an error for: " << text;
  return r ? std::string() : r.error().message;
}

// A file in a fresh directory, removed with the fixture.
class config_file_test : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("txmq_config_test_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(std::string_view name, std::string_view content) {
    const auto path = dir_ / name;
    std::ofstream(path) << content;
    return path.string();
  }

  std::filesystem::path dir_;
};

TEST(broker_config, defaults_are_those_of_the_design) {
  const broker_config c;
  EXPECT_EQ(c.listen, (common::host_port{"127.0.0.1", 7878}));
  EXPECT_EQ(c.http, (common::host_port{"127.0.0.1", 7879}));
  EXPECT_EQ(c.data_dir, "./data");
  EXPECT_EQ(c.tx_timeout, 6s);
  EXPECT_EQ(c.tx_check_schedule, (std::vector<ms>{5s, 10s, 30s, 1min, 2min, 5min, 10min}));
  EXPECT_EQ(c.tx_max_checks, 15u);
  EXPECT_EQ(c.tx_checks_in_flight, 32u);
  EXPECT_EQ(c.tx_check_answer_timeout, 3s);
  EXPECT_EQ(c.ack_deadline, 30s);
  EXPECT_EQ(c.retry_schedule,
            (std::vector<ms>{10s, 30s, 1min, 2min, 3min, 4min, 5min, 6min, 7min, 8min, 9min,
                             10min, 20min, 30min, 1h, 2h}));
  EXPECT_EQ(c.max_attempts, 16u);
  EXPECT_EQ(c.dedupe_window, 24h);
  EXPECT_EQ(c.max_message_bytes, 4u * 1024 * 1024);
  EXPECT_EQ(c.max_frame_bytes, 8u * 1024 * 1024);
  EXPECT_TRUE(c.auto_create_topics);
  EXPECT_EQ(c.durability, durability_mode::sync);
  EXPECT_EQ(c.default_partitions, 4u);
  EXPECT_EQ(c.retention, 7 * 24h);
  EXPECT_EQ(c.retention_bytes, 0u);
  EXPECT_EQ(c.min_free_disk_bytes, 256u * 1024 * 1024);
  EXPECT_TRUE(c.verify_store_on_start);
  EXPECT_TRUE(c.low_priority_background);
  EXPECT_EQ(c.min_fsync_interval, 0ms);
  EXPECT_EQ(c.max_connections, 10000u);
  EXPECT_EQ(c.max_in_flight_per_connection, 1024u);
  EXPECT_EQ(c.max_request_memory, 256u * 1024 * 1024);
  EXPECT_EQ(c.max_topics, 10000u);
  EXPECT_EQ(c.hello_timeout, 10s);
  EXPECT_EQ(c.frame_read_timeout, 30s);
  EXPECT_EQ(c.idle_timeout, 0s);
  EXPECT_FALSE(c.insecure);
  EXPECT_EQ(c.log_level, "info");
  EXPECT_EQ(c.cluster_etcd, "") << "single-node mode is the default: no etcd";
  EXPECT_EQ(c.cluster_name, "txmq");
  EXPECT_EQ(c.node_lease_ttl, 5s);

  const auto valid = validate(c);
  EXPECT_TRUE(valid) << valid.error();
}

TEST(broker_config, no_arguments_give_the_defaults) {
  EXPECT_EQ(parse_ok({}), broker_config{});
}

broker_config every_setting_changed() {
  broker_config c;
  c.listen = {"127.0.0.2", 17878};
  c.http = {"::1", 17879};
  c.data_dir = "/var/lib/txmq data";
  c.tx_timeout = 1500ms;
  c.tx_check_schedule = {1s, 2s};
  c.tx_max_checks = 3;
  c.tx_checks_in_flight = 2;
  c.tx_check_answer_timeout = 250ms;
  c.ack_deadline = 2min;
  c.retry_schedule = {100ms, 1h, 2 * 24h};
  c.max_attempts = 5;
  c.dedupe_window = 3h;
  c.max_message_bytes = 1024 * 1024;
  c.max_frame_bytes = 2 * 1024 * 1024;
  c.max_connections = 10;
  c.max_in_flight_per_connection = 7;
  c.max_request_memory = 64 * 1024 * 1024;
  c.max_topics = 100;
  c.hello_timeout = 2s;
  c.frame_read_timeout = 500ms;
  c.idle_timeout = 5min;
  c.auto_create_topics = false;
  c.default_partitions = 8;
  c.retention = 24h;
  c.retention_bytes = 1024ull * 1024 * 1024;
  c.min_free_disk_bytes = 64ull * 1024 * 1024;
  c.verify_store_on_start = false;
  c.low_priority_background = false;
  c.min_fsync_interval = 1ms;
  c.cluster_etcd = "http://127.0.0.1:2379,http://127.0.0.2:2379";
  c.cluster_name = "prod";
  c.node_id = 3;
  c.advertise = "10.0.0.5:7878";
  c.node_lease_ttl = std::chrono::seconds(8);
  c.replication_timeout = std::chrono::seconds(7);
  c.replica_lag_max = std::chrono::seconds(6);
  c.durability = durability_mode::async;
  c.insecure = true;
  c.log_level = "debug";
  c.webhook_schedule = {std::chrono::seconds(1), std::chrono::seconds(2)};
  c.webhook_timeout = std::chrono::seconds(2);
  c.webhook_concurrency = 4;
  c.webhook_rate_limit = 100;
  c.webhook_attempt_retention = std::chrono::hours(1);
  c.webhook_secret_grace = std::chrono::minutes(5);
  c.webhook_ca_file = "/etc/txmq/ca.pem";
  c.webhook_max_subscriptions = 10;
  c.webhook_allow_private = true;
  c.webhook_allow_hosts = "hooks.internal,10.1.0.0/16";
  c.tls_cert_file = "/etc/txmq/cert.pem";
  c.tls_key_file = "/etc/txmq/key.pem";
  c.tls_client_ca_file = "/etc/txmq/clients.pem";
  c.auth = true;
  c.admin_token_file = "/etc/txmq/admin.token";
  c.cluster_token_file = "/etc/txmq/cluster.token";
  c.cluster_tls_ca_file = "/etc/txmq/brokers.pem";
  return c;
}

TEST(broker_config, every_flag_parses) {
  const broker_config got = parse_ok({"--listen", "127.0.0.2:17878",
                                      "--http", "[::1]:17879",
                                      "--data-dir", "/var/lib/txmq data",
                                      "--tx-timeout", "1500ms",
                                      "--tx-check-schedule", "1s,2s",
                                      "--tx-max-checks", "3",
                                      "--tx-checks-in-flight", "2",
                                      "--tx-check-answer-timeout", "250ms",
                                      "--ack-deadline", "2m",
                                      "--retry-schedule", "100ms, 1h, 2d",
                                      "--max-attempts", "5",
                                      "--dedupe-window", "3h",
                                      "--max-message-bytes", "1MiB",
                                      "--max-frame-bytes", "2097152",
                                      "--max-connections", "10",
                                      "--max-in-flight-per-connection", "7",
                                      "--max-request-memory", "64MiB",
                                      "--max-topics", "100",
                                      "--hello-timeout", "2s",
                                      "--frame-read-timeout", "500ms",
                                      "--idle-timeout", "5m",
                                      "--auto-create-topics", "false",
                                      "--default-partitions", "8",
                                      "--retention", "1d",
                                      "--retention-bytes", "1GiB",
                                      "--min-free-disk-bytes", "64MiB",
                                      "--verify-store-on-start", "false",
                                      "--low-priority-background", "false",
                                      "--min-fsync-interval", "1ms",
                                      "--webhook-schedule", "1s,2s",
                                      "--webhook-timeout", "2s",
                                      "--webhook-concurrency", "4",
                                      "--webhook-rate-limit", "100",
                                      "--webhook-attempt-retention", "1h",
                                      "--webhook-secret-grace", "5m",
                                      "--webhook-ca-file", "/etc/txmq/ca.pem",
                                      "--webhook-max-subscriptions", "10",
                                      "--webhook-allow-private",
                                      "--webhook-allow-hosts", "hooks.internal,10.1.0.0/16",
                                      "--tls-cert-file", "/etc/txmq/cert.pem",
                                      "--tls-key-file", "/etc/txmq/key.pem",
                                      "--tls-client-ca-file", "/etc/txmq/clients.pem",
                                      "--cluster-etcd", "http://127.0.0.1:2379,http://127.0.0.2:2379",
                                      "--cluster-name", "prod",
                                      "--node-id", "3",
                                      "--advertise", "10.0.0.5:7878",
                                      "--node-lease-ttl", "8s", "--replication-timeout", "7s", "--replica-lag-max", "6s",
                                      "--cluster-token-file", "/etc/txmq/cluster.token",
                                      "--cluster-tls-ca-file", "/etc/txmq/brokers.pem",
                                      "--durability", "async",
                                      "--auth",
                                      "--admin-token-file", "/etc/txmq/admin.token",
                                      "--insecure",
                                      "--log-level", "debug"});
  EXPECT_EQ(got, every_setting_changed());
}

TEST(broker_config, every_file_key_parses) {
  broker_config got;
  const auto r = apply_toml_config(R"(
# every setting, in the forms the docs show
listen = "127.0.0.2:17878"
http = "[::1]:17879"
data_dir = "/var/lib/txmq data"
tx_timeout = "1500ms"
tx_check_schedule = ["1s", "2s"]
tx_max_checks = 3
tx_checks_in_flight = 2
tx_check_answer_timeout = "250ms"
ack_deadline = "2m"
retry_schedule = "100ms,1h,2d"
max_attempts = 5
dedupe_window = "3h"
max_message_bytes = "1MiB"
max_frame_bytes = 2097152
max_connections = 10
max_in_flight_per_connection = 7
max_request_memory = "64MiB"
max_topics = 100
hello_timeout = "2s"
frame_read_timeout = "500ms"
idle_timeout = "5m"
auto_create_topics = false
default_partitions = 8
retention = "1d"
retention_bytes = "1GiB"
min_free_disk_bytes = "64MiB"
verify_store_on_start = false
low_priority_background = false
min_fsync_interval = "1ms"
webhook_schedule = ["1s", "2s"]
webhook_timeout = "2s"
webhook_concurrency = 4
webhook_rate_limit = 100
webhook_attempt_retention = "1h"
webhook_secret_grace = "5m"
webhook_ca_file = "/etc/txmq/ca.pem"
webhook_max_subscriptions = 10
webhook_allow_private = true
webhook_allow_hosts = "hooks.internal,10.1.0.0/16"
tls_cert_file = "/etc/txmq/cert.pem"
tls_key_file = "/etc/txmq/key.pem"
tls_client_ca_file = "/etc/txmq/clients.pem"
cluster_etcd = "http://127.0.0.1:2379,http://127.0.0.2:2379"
cluster_name = "prod"
node_id = 3
advertise = "10.0.0.5:7878"
node_lease_ttl = "8s"
replication_timeout = "7s"
replica_lag_max = "6s"
cluster_token_file = "/etc/txmq/cluster.token"
cluster_tls_ca_file = "/etc/txmq/brokers.pem"
durability = "async"
auth = true
admin_token_file = "/etc/txmq/admin.token"
insecure = true
log_level = "debug"
)",
                                   "all.toml", got);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(got, every_setting_changed());
}

TEST(broker_config, describe_prints_one_line_per_setting_and_reads_back) {
  const std::string text = describe(broker_config{});
  EXPECT_THAT(text, HasSubstr("listen = \"127.0.0.1:7878\"\n"));
  EXPECT_THAT(text, HasSubstr("tx_timeout = \"6s\"\n"));
  EXPECT_THAT(text, HasSubstr("tx_check_schedule = [\"5s\", \"10s\", \"30s\", \"1m\", \"2m\", "
                              "\"5m\", \"10m\"]\n"));
  EXPECT_THAT(text, HasSubstr("max_message_bytes = \"4MiB\"\n"));
  EXPECT_THAT(text, HasSubstr("max_request_memory = \"256MiB\"\n"));
  EXPECT_THAT(text, HasSubstr("retention = \"7d\"\n"));
  EXPECT_THAT(text, HasSubstr("durability = \"sync\"\n"));
  EXPECT_THAT(text, HasSubstr("auto_create_topics = true\n"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 58);  // one line per setting (k_settings)
  EXPECT_THAT(text, HasSubstr("cluster_etcd = \"\"\n"));

  for (const broker_config& original : {broker_config{}, every_setting_changed()}) {
    broker_config round_trip;
    round_trip.insecure = !original.insecure;
    const auto applied = apply_toml_config(describe(original), "describe", round_trip);
    ASSERT_TRUE(applied) << applied.error();
    EXPECT_EQ(round_trip, original);
  }
}

TEST(broker_config, boolean_flags_take_every_form) {
  EXPECT_FALSE(parse_ok({"--auto-create-topics", "false"}).auto_create_topics);
  EXPECT_FALSE(parse_ok({"--auto-create-topics=false"}).auto_create_topics);
  EXPECT_TRUE(parse_ok({"--auto-create-topics", "true"}).auto_create_topics);
  EXPECT_TRUE(parse_ok({"--insecure"}).insecure);
  EXPECT_TRUE(parse_ok({"--insecure", "true"}).insecure);
  EXPECT_FALSE(parse_ok({"--insecure", "false"}).insecure);
  EXPECT_FALSE(parse_ok({"--insecure=false"}).insecure);
  EXPECT_THAT(parse_error({"--auto-create-topics", "yes"}), HasSubstr("--auto-create-topics"));
}

// txmq-broker used to start `log_level = trace` at the debug level; the name it sets the logger
// from must give the trace level, and every accepted name a level of its own.
TEST(broker_config, every_log_level_name_gives_its_own_logger_level) {
  EXPECT_EQ(common::log::parse_level(parse_ok({"--log-level", "trace"}).log_level).value(),
            common::log::level::trace);
  EXPECT_EQ(common::log::parse_level(parse_ok({"--log-level", "debug"}).log_level).value(),
            common::log::level::debug);
  EXPECT_EQ(common::log::parse_level(parse_ok({}).log_level).value(), common::log::level::info);
  EXPECT_EQ(common::log::parse_level(parse_ok({"--log-level", "warn"}).log_level).value(),
            common::log::level::warn);
  EXPECT_EQ(common::log::parse_level(parse_ok({"--log-level", "error"}).log_level).value(),
            common::log::level::error);
  EXPECT_THAT(parse_error({"--log-level", "verbose"}), HasSubstr("trace, debug, info, warn or error"));
}

TEST(broker_config, help_and_version_ask_to_exit) {
  auto help = parse({"--help"});
  ASSERT_TRUE(help.parsed) << help.error;
  ASSERT_TRUE(help.parsed.value().exit_text);
  EXPECT_THAT(*help.parsed.value().exit_text,
              AllOf(HasSubstr("--tx-timeout"), HasSubstr("default 6s"), HasSubstr("--config"),
                    HasSubstr("--retry-schedule"), HasSubstr("default 10s,30s,1m")));

  auto version = parse({"--version"});
  ASSERT_TRUE(version.parsed) << version.error;
  ASSERT_TRUE(version.parsed.value().exit_text);
  EXPECT_THAT(*version.parsed.value().exit_text, HasSubstr("txmq-broker "));
}

TEST_F(config_file_test, flags_override_the_file) {
  const auto path = write("broker.toml", R"(
tx_timeout = "10s"
max_attempts = 3
data_dir = "/from/file"
)");
  const broker_config c = parse_ok({"--config", path, "--tx-timeout", "1s", "--data-dir", "/x"});
  EXPECT_EQ(c.tx_timeout, 1s);
  EXPECT_EQ(c.max_attempts, 3u);
  EXPECT_EQ(c.data_dir, "/x");
  EXPECT_EQ(c.ack_deadline, 30s);  // untouched settings keep their default
}

TEST_F(config_file_test, file_errors_name_the_file_key_value_and_expectation) {
  const auto path = write("bad.toml", "max_attempts = 3\ntx_timeout = \"6\"\n");
  EXPECT_THAT(parse_error({"--config", path}),
              AllOf(HasSubstr(path), HasSubstr("tx_timeout"), HasSubstr("line 2"),
                    HasSubstr("\"6\""), HasSubstr("expected a duration")));

  EXPECT_THAT(parse_error({"--config", (dir_ / "missing.toml").string()}),
              AllOf(HasSubstr("missing.toml"), HasSubstr("No such file")));
}

TEST(broker_config, file_errors) {
  EXPECT_THAT(toml_error("tx_timout = \"1s\"\n"),
              AllOf(HasSubstr("test.toml"), HasSubstr("unknown key 'tx_timout'"),
                    HasSubstr("line 1"), HasSubstr("did you mean 'tx_timeout'")));
  EXPECT_THAT(toml_error("tx-timeout = \"1s\"\n"), HasSubstr("did you mean 'tx_timeout'"));
  EXPECT_THAT(toml_error("[broker]\nlisten = \"127.0.0.1:1\"\n"), HasSubstr("unknown key 'broker'"));
  EXPECT_THAT(toml_error("tx_timeout = 6\n"),
              AllOf(HasSubstr("'tx_timeout'"), HasSubstr("invalid value 6"),
                    HasSubstr("written as a string")));
  EXPECT_THAT(toml_error("retry_schedule = [\"1s\", \"soon\"]\n"),
              AllOf(HasSubstr("'retry_schedule'"), HasSubstr("\"soon\""),
                    HasSubstr("expected a duration")));
  EXPECT_THAT(toml_error("retry_schedule = [\"1s\", 2]\n"), HasSubstr("'retry_schedule'"));
  EXPECT_THAT(toml_error("retry_schedule = []\n"), HasSubstr("'retry_schedule'"));
  EXPECT_THAT(toml_error("max_attempts = \"many\"\n"),
              AllOf(HasSubstr("'max_attempts'"), HasSubstr("\"many\""), HasSubstr("integer")));
  EXPECT_THAT(toml_error("max_attempts = -1\n"),
              AllOf(HasSubstr("'max_attempts'"), HasSubstr("-1")));
  EXPECT_THAT(toml_error("max_attempts = 4294967296\n"), HasSubstr("'max_attempts'"));
  EXPECT_THAT(toml_error("max_attempts = 1.5\n"), HasSubstr("'max_attempts'"));
  EXPECT_THAT(toml_error("auto_create_topics = \"yes\"\n"),
              AllOf(HasSubstr("'auto_create_topics'"), HasSubstr("true or false")));
  EXPECT_THAT(toml_error("auto_create_topics = 1\n"), HasSubstr("'auto_create_topics'"));
  EXPECT_THAT(toml_error("max_message_bytes = \"4MB\"\n"),
              AllOf(HasSubstr("'max_message_bytes'"), HasSubstr("MiB")));
  EXPECT_THAT(toml_error("durability = \"fast\"\n"),
              AllOf(HasSubstr("'durability'"), HasSubstr("sync or async")));
  EXPECT_THAT(toml_error("log_level = \"loud\"\n"), HasSubstr("'log_level'"));
  EXPECT_THAT(toml_error("listen = \"7878\"\n"),
              AllOf(HasSubstr("'listen'"), HasSubstr("HOST:PORT")));
  EXPECT_THAT(toml_error("tx_timeout = \n"), AllOf(HasSubstr("test.toml"), HasSubstr("line 1")));
}

TEST(broker_config, flag_errors_name_the_flag_value_and_expectation) {
  EXPECT_THAT(parse_error({"--tx-timeout", "6"}),
              AllOf(HasSubstr("--tx-timeout"), HasSubstr("'6'"), HasSubstr("expected a duration")));
  EXPECT_THAT(parse_error({"--tx-check-schedule", "1s,,2s"}),
              AllOf(HasSubstr("--tx-check-schedule"), HasSubstr("'1s,,2s'")));
  EXPECT_THAT(parse_error({"--max-attempts", "-3"}),
              AllOf(HasSubstr("--max-attempts"), HasSubstr("'-3'")));
  EXPECT_THAT(parse_error({"--max-frame-bytes", "8MB"}), HasSubstr("--max-frame-bytes"));
  EXPECT_THAT(parse_error({"--durability", "fast"}), HasSubstr("sync or async"));
  EXPECT_THAT(parse_error({"--listen", "localhost"}), HasSubstr("HOST:PORT"));
  EXPECT_THAT(parse_error({"--tx-timout", "1s"}),
              AllOf(HasSubstr("unknown option"), HasSubstr("--tx-timout"),
                    HasSubstr("did you mean '--tx-timeout'")));
  EXPECT_THAT(parse_error({"--tx-timeout"}), HasSubstr("tx-timeout"));
  EXPECT_THAT(parse_error({"--tx-timeout", "1s", "stray"}),
              AllOf(HasSubstr("unexpected argument 'stray'"), HasSubstr("--help")));
  // No abbreviations: --tx-time would silently pick a setting.
  EXPECT_THAT(parse_error({"--tx-time", "1s"}), HasSubstr("unknown option"));
}

TEST(broker_config, non_loopback_addresses_need_insecure) {
  EXPECT_THAT(parse_error({"--listen", "0.0.0.0:7878"}),
              AllOf(HasSubstr("0.0.0.0:7878"), HasSubstr("loopback"), HasSubstr("--insecure")));
  EXPECT_THAT(parse_error({"--http", "10.1.2.3:80"}),
              AllOf(HasSubstr("http"), HasSubstr("10.1.2.3:80"), HasSubstr("--insecure")));
  EXPECT_EQ(parse_ok({"--listen", "0.0.0.0:7878", "--insecure"}).listen,
            (common::host_port{"0.0.0.0", 7878}));
  EXPECT_EQ(parse_ok({"--listen", "[::1]:7878"}).listen, (common::host_port{"::1", 7878}));
  EXPECT_EQ(parse_ok({"--listen", "localhost:7000"}).listen, (common::host_port{"localhost", 7000}));
  EXPECT_THAT(parse_error({"--listen", "broker.example.com:7878", "--insecure"}),
              HasSubstr("IP address or localhost"));
  // auth and TLS both on allow other hosts; either alone does not.
  const std::vector<std::string> tls = {"--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), {std::string("--listen"), std::string("0.0.0.0:7878")});
    return extra;
  };
  auto both = with(tls);
  both.insert(both.end(), {"--auth", "--admin-token-file", "admin.token"});
  EXPECT_EQ(parse_ok(both).listen, (common::host_port{"0.0.0.0", 7878}));
  EXPECT_THAT(parse_error(with(tls)), AllOf(HasSubstr("auth is off"), HasSubstr("TLS is on")));
  EXPECT_THAT(parse_error(with({"--auth", "--admin-token-file", "admin.token"})),
              AllOf(HasSubstr("auth is on"), HasSubstr("TLS is off")));
}

TEST(broker_config, tls_files_come_together) {
  EXPECT_THAT(parse_error({"--tls-cert-file", "c.pem"}), HasSubstr("only tls_cert_file is set"));
  EXPECT_THAT(parse_error({"--tls-key-file", "k.pem"}), HasSubstr("only tls_key_file is set"));
  EXPECT_THAT(parse_error({"--tls-client-ca-file", "ca.pem"}), HasSubstr("needs TLS on"));
  EXPECT_THAT(parse_error({"--webhook-allow-hosts", "a b"}), HasSubstr("webhook_allow_hosts"));
}

TEST(broker_config, validate_checks_relations_between_settings) {
  EXPECT_THAT(parse_error({"--max-message-bytes", "8MiB"}),
              AllOf(HasSubstr("max_frame_bytes"), HasSubstr("max_message_bytes"),
                    HasSubstr("8MiB"), HasSubstr("8256KiB")));
  EXPECT_THAT(parse_error({"--max-frame-bytes", "4160KiB", "--max-message-bytes", "4097KiB"}),
              HasSubstr("max_frame_bytes"));
  EXPECT_EQ(parse_ok({"--max-frame-bytes", "4160KiB"}).max_frame_bytes, 4160u * 1024);
  EXPECT_THAT(parse_error({"--max-frame-bytes", "2GiB"}), HasSubstr("max_frame_bytes"));
  EXPECT_THAT(parse_error({"--tx-check-schedule", "1s,0s"}), HasSubstr("tx_check_schedule"));
  EXPECT_THAT(parse_error({"--tx-timeout", "0s"}), HasSubstr("tx_timeout"));
  EXPECT_THAT(parse_error({"--max-attempts", "0"}), HasSubstr("max_attempts"));
  EXPECT_THAT(parse_error({"--default-partitions", "0"}), HasSubstr("default_partitions"));
  EXPECT_THAT(parse_error({"--listen", "127.0.0.1:9000", "--http", "127.0.0.1:9000"}),
              HasSubstr("--http"));
  EXPECT_EQ(parse_ok({"--retention", "0s"}).retention, 0ms);
  EXPECT_EQ(parse_ok({"--min-fsync-interval", "1s"}).min_fsync_interval, 1s);
  EXPECT_THAT(parse_error({"--min-fsync-interval", "1001ms"}), HasSubstr("min_fsync_interval is at most 1s"));
  EXPECT_EQ(parse_ok({"--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"}).listen.port, 0);

  broker_config c;
  c.log_level = "verbose";
  auto r = validate(c);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("log_level"));
  c = broker_config{};
  c.min_fsync_interval = -1ms;
  r = validate(c);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("min_fsync_interval must not be negative"));
  c = broker_config{};
  c.retry_schedule.clear();
  r = validate(c);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("retry_schedule"));
}

// Cluster mode's settings are checked only with cluster_etcd; a single node needs none of them.
TEST(broker_config, cluster_settings_are_validated_in_cluster_mode_only) {
  EXPECT_EQ(parse_ok({"--node-id", "0", "--advertise", ""}).cluster_etcd, "");
  const auto c = parse_ok({"--cluster-etcd", "http://127.0.0.1:2379", "--node-id", "2"});
  EXPECT_EQ(c.node_id, 2u);
  EXPECT_EQ(c.node_lease_ttl, std::chrono::seconds(5));
  EXPECT_THAT(parse_error({"--cluster-etcd", "http://127.0.0.1:2379"}), HasSubstr("--node-id"));
  EXPECT_THAT(parse_error({"--cluster-etcd", "https://127.0.0.1:2379", "--node-id", "1"}), HasSubstr("cluster_etcd"));
  EXPECT_THAT(parse_error({"--cluster-etcd", "http://127.0.0.1:2379", "--node-id", "1", "--advertise", "nope"}),
              HasSubstr("advertise"));
  EXPECT_THAT(parse_error({"--cluster-etcd", "http://127.0.0.1:2379", "--node-id", "1", "--listen", "127.0.0.1:0"}),
              HasSubstr("--advertise"));
  EXPECT_THAT(parse_error({"--cluster-etcd", "http://127.0.0.1:2379", "--node-id", "1", "--node-lease-ttl", "1s"}),
              HasSubstr("node_lease_ttl"));
  EXPECT_THAT(parse_error({"--cluster-name", ""}), HasSubstr("cluster-name"));
}

TEST(broker_config, connection_timeouts_are_validated) {
  broker_config c;
  c.hello_timeout = 0s;
  auto r = validate(c);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("hello_timeout"));
  c = broker_config{};
  c.frame_read_timeout = 0s;
  r = validate(c);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("frame_read_timeout"));
  c = broker_config{};
  c.idle_timeout = 0s;  // off
  r = validate(c);
  EXPECT_TRUE(r) << r.error();
  EXPECT_EQ(parse_ok({"--idle-timeout", "0s"}).idle_timeout, 0s);
}

TEST(broker_config, the_configuration_doc_lists_every_setting_and_its_example_is_valid) {
  std::ifstream in(TXMQ_CONFIGURATION_DOC);
  ASSERT_TRUE(in) << TXMQ_CONFIGURATION_DOC;
  std::stringstream content;
  content << in.rdbuf();
  const std::string doc = content.str();

  std::istringstream settings(describe(broker_config{}));
  for (std::string line; std::getline(settings, line);) {
    const std::string name = line.substr(0, line.find(' '));
    std::string flag = name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    EXPECT_THAT(doc, HasSubstr("| `" + name + "` | `--" + flag)) << name;
  }

  const auto begin = doc.find("```toml\n");
  ASSERT_NE(begin, std::string::npos);
  const auto end = doc.find("```", begin + 8);
  broker_config example;
  const auto applied = apply_toml_config(doc.substr(begin + 8, end - begin - 8), "example", example);
  ASSERT_TRUE(applied) << applied.error();
  const auto valid = validate(example);
  EXPECT_TRUE(valid) << valid.error();
}

}  // namespace
}  // namespace txmq::broker
