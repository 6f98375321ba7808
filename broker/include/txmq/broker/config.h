#pragma once

// The broker's settings (docs/configuration.md): one struct with every setting and its
// default, and the parsers that fill it from the command line and a TOML config file.
//
// Precedence: defaults < config file (--config FILE) < command-line flags. Each setting has one
// name; the TOML key is the name (`tx_timeout`), the flag is the name with '-' for '_'
// (`--tx-timeout`). docs/configuration.md lists them all.
//
// Value grammar shared by flags and the file:
//   duration, duration list, size   txmq/common/units.h ("500ms", "1s,2s,5s", "4MiB"); in TOML
//                                   a duration list may also be an array of strings and a size
//                                   an integer
//   count          a non-negative integer; in TOML an integer
//   bool           true or false
//   HOST:PORT      txmq/common/address.h; the broker further requires an IPv4 address,
//                  "localhost" or "[IPv6]" (validate()), and port 0 picks any free port
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

#include "txmq/common/address.h"
#include "txmq/protocol/result.h"

namespace txmq::broker {

// How produce/Prepare/EndTx acknowledgements relate to fsync (docs/configuration.md, `durability`).
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

  // --- addresses and files
  common::host_port listen{"127.0.0.1", 7878};  // wire protocol
  common::host_port http{"127.0.0.1", 7879};    // admin HTTP: /healthz, /metrics, reconciliation
  std::string data_dir = "./data";

  // --- transactions and check-back
  duration tx_timeout = std::chrono::seconds(6);  // Prepare -> first check
  std::vector<duration> tx_check_schedule = {
      std::chrono::seconds(5),  std::chrono::seconds(10), std::chrono::seconds(30),
      std::chrono::minutes(1),  std::chrono::minutes(2),  std::chrono::minutes(5),
      std::chrono::minutes(10)};  // gaps between later checks; the last one repeats
  std::uint32_t tx_max_checks = 15;       // undecided checks before ABANDONED
  std::uint32_t tx_checks_in_flight = 32;  // open checks per producer group
  duration tx_check_answer_timeout = std::chrono::seconds(3);

  // --- delivery
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

  // --- limits
  std::uint64_t max_message_bytes = 4 * 1024 * 1024;  // key + header names and values + body
  std::uint64_t max_frame_bytes = 8 * 1024 * 1024;    // whole frame, checked before allocation
  std::uint32_t max_connections = 10000;  // the soft RLIMIT_NOFILE is raised to fit (fd_limit.h)
  std::uint32_t max_in_flight_per_connection = 1024;
  std::uint64_t max_request_memory = 256ull * 1024 * 1024;  // frames of requests being handled; 0 = no limit
  std::uint32_t max_topics = 10000;
  duration hello_timeout = std::chrono::seconds(10);       // accept to Hello, or closed
  duration frame_read_timeout = std::chrono::seconds(30);  // a frame's first byte to its last
  duration idle_timeout = duration::zero();                // nothing sent, nothing in flight; 0 = off

  // --- topics
  bool auto_create_topics = true;
  std::uint32_t default_partitions = 4;
  duration retention = std::chrono::hours(24 * 7);  // 0 = keep regardless of age
  std::uint64_t retention_bytes = 0;                // per partition; 0 = no size limit
  // How often a retention pass runs (each node's own store; a follower below its leader's
  // start offset restarts its log there: docs/cluster.md "Retention").
  duration retention_interval = std::chrono::seconds(60);
  // Below this much free space on the data directory's disk, Produce and Prepare answer
  // STORE_FULL (acks, EndTx, group updates and retention still run); 0 = no minimum.
  std::uint64_t min_free_disk_bytes = 256 * 1024 * 1024;
  // Read every block of the store once at start, checking its checksum, before serving: rot in
  // data at rest refuses the start instead of failing a later read. Costs one read of the whole
  // store per start (docs/configuration.md gives the measured rate); reads check their blocks
  // either way.
  bool verify_store_on_start = true;
  // RocksDB's flushes and compactions at nice 19 while no write waits for them, at the
  // process's priority while RocksDB holds writes back (storage/README.md "Background
  // priority"). Needs root or CAP_SYS_NICE; otherwise they keep the process's priority.
  bool low_priority_background = true;
  // The least time between the starts of two fsyncs of the store's log (0 = none): for a disk
  // that stalls above some rate of flushes (storage/README.md "Group commit").
  duration min_fsync_interval{0};

  // --- webhooks: defaults of new subscriptions and notifier limits
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
  // The egress guard (docs/security.md): deliveries to loopback, private, link-local,
  // unique-local, multicast and unspecified addresses are refused unless this is true...
  bool webhook_allow_private = false;
  // ...or the URL's host is listed here: comma-separated host names and CIDRs
  // ("hooks.internal,10.1.0.0/16").
  std::string webhook_allow_hosts;

  // --- TLS (docs/security.md): both files serve TLS on the wire protocol and the admin HTTP;
  // a client CA file additionally requires client certificates (mTLS). SIGHUP reloads them.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;

  // --- cluster mode (DESIGN.md §8, docs/cluster.md). Empty cluster_etcd: a single node, no etcd.
  std::string cluster_etcd;            // comma-separated etcd URLs: http://127.0.0.1:2379,...
  std::string cluster_name = "txmq";   // the etcd key prefix /<cluster_name>/
  std::uint32_t node_id = 0;           // this broker's id in the cluster (from 1), with cluster_etcd
  std::string advertise;               // HOST:PORT clients use for this broker; empty = listen
  duration node_lease_ttl = std::chrono::seconds(5);  // a lost node's leaderships move after this
  // Replication: a write not fsynced by the whole ISR within this is answered NOT_ENOUGH_REPLICAS;
  // a follower not caught up for replica_lag_max leaves the ISR.
  duration replication_timeout = std::chrono::seconds(10);
  duration replica_lag_max = std::chrono::seconds(10);
  // Appends a follower keeps in flight per followed partition: 1 fetches again only once its
  // last append is fsynced; more fetches the next messages while the previous are fsynced
  // (docs/cluster.md "Replication"; not faster on a 2-core machine, docs/BENCHMARKS.md "Cluster").
  std::uint32_t replica_fetch_pipeline = 1;
  // Between brokers (docs/cluster.md "Between brokers"): with auth on, every broker of the
  // cluster holds the same token in this file and authenticates to the others with it as the
  // principal `txmq-cluster`, the only one allowed ReplicaFetch. Required with auth in a cluster.
  std::string cluster_token_file;
  // With TLS on, the CAs the other brokers' certificates are verified against; empty =
  // tls_client_ca_file when set, else the system's CAs.
  std::string cluster_tls_ca_file;

  // --- durability, security, logging
  durability_mode durability = durability_mode::sync;
  bool insecure = false;  // allow non-loopback addresses without auth and TLS both on
  // Principals with tokens and ACLs (docs/security.md); off keeps the loopback-only default.
  bool auth = false;
  std::string admin_token_file;  // holds the admin principal's token; required with auth
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
// "localhost", TLS files come as cert and key together, webhook_allow_hosts parses, and, unless
// `insecure`, that listen and http are loopback addresses when auth and TLS are not both on (so
// the broker is never reachable from other hosts without them by accident).
[[nodiscard]] result<void> validate(const broker_config& config);

// One line per setting, "name = value\n", in TOML syntax, for the startup log. Feeding the text
// back to apply_toml_config() reproduces `config`.
[[nodiscard]] std::string describe(const broker_config& config);

// The usage text printed by --help.
[[nodiscard]] std::string broker_usage();

}  // namespace txmq::broker
