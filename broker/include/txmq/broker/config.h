#pragma once

// The broker's settings (DESIGN.md §2, §3, §6, §7): one struct with every setting and its
// default, and the parsers that fill it from the command line and a TOML config file.
//
// Precedence: defaults < config file (--config FILE) < command-line flags. Each setting has one
// name; the TOML key is the name (`tx_timeout`), the flag is the name with '-' for '_'
// (`--tx-timeout`). docs/configuration.md lists them all.
//
// Value grammar shared by flags and the file:
//   duration       an integer and a unit among ms, s, m, h, d: "500ms", "6s", "3m", "1h", "7d"
//   duration list  durations separated by commas ("1s,2s,5s"); in TOML also an array of strings
//   size           plain bytes ("4194304") or an integer with KiB, MiB or GiB ("4MiB");
//                  in TOML also an integer
//   count          a non-negative integer; in TOML an integer
//   bool           true or false
//   HOST:PORT      an IPv4 address, "localhost" or "[IPv6]", then ':' and a port (0 = any free)
//
// Thread-safety: every function here is pure (no global state) and may be called from any
// thread. Errors are values: std::errc::invalid_argument plus a message for a person that names
// the setting, the bad value and what is expected.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

#include "txmq/protocol/result.h"

namespace txmq::broker {

// A listen address as written by the user. The host is kept as text ("localhost", "127.0.0.1",
// "::1") so that describe() prints what was configured.
struct host_port {
  std::string host;
  std::uint16_t port = 0;

  // "127.0.0.1:7878", "[::1]:7878".
  [[nodiscard]] std::string to_string() const;
  bool operator==(const host_port&) const = default;
};

// How produce/Prepare/EndTx acknowledgements relate to fsync (DESIGN §7).
enum class durability_mode {
  sync,   // acknowledged after the write is fsynced (group commit)
  async,  // acknowledged after the write reached the OS; opt-in, logged as a warning at start
};

[[nodiscard]] std::string_view to_string(durability_mode mode) noexcept;

// Room a frame needs beyond the message body (ids, topic, key, headers, envelope): validate()
// requires max_frame_bytes >= max_message_bytes + k_frame_overhead_bytes.
inline constexpr std::uint64_t k_frame_overhead_bytes = 64 * 1024;

struct broker_config {
  using duration = std::chrono::milliseconds;

  // --- addresses and files (DESIGN §6)
  host_port listen{"127.0.0.1", 7878};  // wire protocol
  host_port http{"127.0.0.1", 7879};    // admin HTTP: /healthz, /metrics, reconciliation
  std::string data_dir = "./data";

  // --- transactions and check-back (DESIGN §3)
  duration tx_timeout = std::chrono::seconds(6);  // Prepare -> first check
  std::vector<duration> tx_check_schedule = {
      std::chrono::seconds(5),  std::chrono::seconds(10), std::chrono::seconds(30),
      std::chrono::minutes(1),  std::chrono::minutes(2),  std::chrono::minutes(5),
      std::chrono::minutes(10)};  // gaps between later checks; the last one repeats
  std::uint32_t tx_max_checks = 15;       // undecided checks before ABANDONED
  std::uint32_t tx_checks_in_flight = 32;  // open checks per producer group
  duration tx_check_answer_timeout = std::chrono::seconds(3);

  // --- delivery (DESIGN §2)
  duration ack_deadline = std::chrono::seconds(30);
  std::vector<duration> retry_schedule = {
      std::chrono::seconds(10), std::chrono::seconds(30), std::chrono::minutes(1),
      std::chrono::minutes(2),  std::chrono::minutes(3),  std::chrono::minutes(4),
      std::chrono::minutes(5),  std::chrono::minutes(6),  std::chrono::minutes(7),
      std::chrono::minutes(8),  std::chrono::minutes(9),  std::chrono::minutes(10),
      std::chrono::minutes(20), std::chrono::minutes(30), std::chrono::hours(1),
      std::chrono::hours(2)};  // delay before redelivery n; the last one repeats
  std::uint32_t max_attempts = 16;  // then the message goes to the group's dead-letter queue
  duration dedupe_window = std::chrono::hours(24);

  // --- limits (DESIGN §7)
  std::uint64_t max_message_bytes = 4 * 1024 * 1024;  // body size
  std::uint64_t max_frame_bytes = 8 * 1024 * 1024;    // whole frame, checked before allocation
  std::uint32_t max_connections = 1024;
  std::uint32_t max_in_flight_per_connection = 1024;
  std::uint32_t max_topics = 10000;

  // --- topics (DESIGN §2)
  bool auto_create_topics = true;
  std::uint32_t default_partitions = 4;
  duration retention = std::chrono::hours(24 * 7);  // 0 = keep regardless of age
  std::uint64_t retention_bytes = 0;                // per partition; 0 = no size limit

  // --- webhooks (DESIGN §5): defaults of new subscriptions and notifier limits
  std::vector<duration> webhook_schedule = {
      std::chrono::seconds(15), std::chrono::seconds(15), std::chrono::seconds(30),
      std::chrono::minutes(3),  std::chrono::minutes(10), std::chrono::minutes(20),
      std::chrono::minutes(30), std::chrono::minutes(30), std::chrono::minutes(30),
      std::chrono::hours(1),    std::chrono::hours(3),    std::chrono::hours(3),
      std::chrono::hours(3),    std::chrono::hours(6),    std::chrono::hours(6)};  // delays before attempts 2..16
  duration webhook_timeout = std::chrono::seconds(5);  // 2xx within this, or the attempt failed
  std::uint32_t webhook_concurrency = 16;  // requests in flight per subscription
  std::uint32_t webhook_rate_limit = 0;    // attempts started per second per subscription; 0 = none
  duration webhook_attempt_retention = std::chrono::hours(24 * 7);  // how long attempts are logged
  duration webhook_secret_grace = std::chrono::hours(24);  // an old secret keeps signing after rotation
  std::string webhook_ca_file;  // extra trusted CA certificates (PEM) for https endpoints
  std::uint32_t webhook_max_subscriptions = 1000;

  // --- durability, security, logging (DESIGN §7)
  durability_mode durability = durability_mode::sync;
  bool insecure = false;  // allow non-loopback addresses although no auth is configured
  std::string log_level = "info";  // trace, debug, info, warn or error

  bool operator==(const broker_config&) const = default;
};

// What parse_broker_config() found on the command line.
struct parsed_config {
  broker_config config;
  // Set for --help (the usage text) and --version ("txmq-broker 0.1.0"): print it to stdout and
  // exit with status 0 instead of starting.
  std::optional<std::string> exit_text;
};

// Parses argv (argv[0] is the program name): reads --config FILE if given, applies the flags
// over it, then validate()s the result. On error returns std::errc::invalid_argument with one
// message naming the flag or key, the bad value and what is expected
// ("--tx-timeout: invalid value '6': expected a duration such as 500ms, 6s, 3m, 1h or 7d").
[[nodiscard]] result<parsed_config> parse_broker_config(int argc, const char* const* argv);

// Applies the TOML document `toml_text` over `config` (keys not present keep their values).
// `source_name` names the file in messages. Unknown keys, wrong types and malformed values are
// errors; on error `config` may be partly updated. Does not validate() the result.
[[nodiscard]] result<void> apply_toml_config(std::string_view toml_text,
                                             std::string_view source_name, broker_config& config);

// Reads the TOML file at `path` and applies it over `config` as apply_toml_config() does.
[[nodiscard]] result<void> apply_config_file(const std::string& path, broker_config& config);

// Checks the relations between settings: durations and counts in range, schedules non-empty,
// max_frame_bytes >= max_message_bytes + k_frame_overhead_bytes, hosts are IP addresses or
// "localhost", and, unless `insecure`, that listen and http are loopback addresses (no auth
// exists yet, so the broker must not be reachable from other hosts by accident).
[[nodiscard]] result<void> validate(const broker_config& config);

// One line per setting, "name = value\n", in TOML syntax, for the startup log. Feeding the text
// back to apply_toml_config() reproduces `config`.
[[nodiscard]] std::string describe(const broker_config& config);

// The usage text printed by --help.
[[nodiscard]] std::string broker_usage();

// --- value parsers, shared with other broker code (webhook schedules, admin API parameters).
// Each returns std::errc::invalid_argument on malformed text or overflow.

// "500ms", "6s", "3m", "1h", "7d" (an unsigned integer and a unit, no spaces).
[[nodiscard]] result<std::chrono::milliseconds> parse_duration(std::string_view text);
// "1s,2s,5s" (whitespace around items allowed, no empty items, at least one item).
[[nodiscard]] result<std::vector<std::chrono::milliseconds>> parse_duration_list(
    std::string_view text);
// "4194304", "64KiB", "4MiB", "1GiB".
[[nodiscard]] result<std::uint64_t> parse_size(std::string_view text);
// "HOST:PORT" or "[IPv6]:PORT"; the host is not resolved here (validate() checks it).
[[nodiscard]] result<host_port> parse_host_port(std::string_view text);

// The largest unit that represents `d` exactly: 6000ms -> "6s", 90000ms -> "90s", 0 -> "0s".
[[nodiscard]] std::string format_duration(std::chrono::milliseconds d);
// "4MiB" when exact in KiB/MiB/GiB, else plain bytes.
[[nodiscard]] std::string format_size(std::uint64_t bytes);

// True for "localhost" and loopback IP addresses (127.0.0.0/8, ::1).
[[nodiscard]] bool is_loopback_host(std::string_view host);

// The endpoint to bind for `address`: "localhost" is 127.0.0.1, other hosts must be IP
// literals (as validate() ensures). Returns std::errc::invalid_argument otherwise.
[[nodiscard]] result<boost::asio::ip::tcp::endpoint> to_endpoint(const host_port& address);

}  // namespace txmq::broker
