// validate(): the relations between the broker's settings (config.h), apart from the table of
// config.cc so that each file stays one subject: config.cc reads and writes settings, this one
// judges them.

#include <chrono>
#include <string>
#include <vector>

#include "txmq/broker/config.h"
#include "txmq/cluster/etcd_client.h"
#include "txmq/common/address.h"
#include "txmq/common/log.h"
#include "txmq/common/units.h"
#include "webhooks/egress_guard.h"

namespace txmq::broker {
namespace {

using std::chrono::milliseconds;

constexpr std::uint64_t k_max_frame_limit = 1024ull * 1024 * 1024;  // 1GiB
constexpr std::uint32_t k_max_partitions = 4096;

// Cluster mode (docs/cluster.md): nothing of it is checked while cluster_etcd is empty, so a
// single node needs none of these settings.
result<void> validate_cluster(const broker_config& c) {
  if (c.cluster_etcd.empty()) return outcome::success();
  if (auto endpoints = cluster::parse_etcd_endpoints(c.cluster_etcd); !endpoints) {
    return invalid("cluster_etcd '" + c.cluster_etcd + "': " + endpoints.error().message +
                   " (expected comma-separated URLs such as http://127.0.0.1:2379)");
  }
  if (c.node_id == 0) {
    return invalid("cluster mode (cluster_etcd is set) needs node_id (--node-id N): a number from 1, "
                   "different on every broker of the cluster");
  }
  if (!c.advertise.empty()) {
    auto a = common::parse_host_port(c.advertise);
    if (!a || a.value().port == 0) {
      return invalid("advertise '" + c.advertise + "': expected the HOST:PORT clients use to reach this broker, "
                     "such as 10.0.0.5:7878 (port not 0)");
    }
  } else if (c.listen.port == 0 || c.listen.host == "0.0.0.0" || c.listen.host == "::") {
    return invalid("cluster mode needs advertise (--advertise HOST:PORT): listen " + c.listen.to_string() +
                   " is not an address other brokers' clients can use");
  }
  if (c.cluster_name.empty() || c.cluster_name.find('/') != std::string::npos) {
    return invalid("cluster_name '" + c.cluster_name + "': expected a non-empty name without '/' (the etcd key prefix)");
  }
  if (c.node_lease_ttl < std::chrono::seconds(2) || c.node_lease_ttl > std::chrono::minutes(1)) {
    return invalid("node_lease_ttl " + common::format_duration(c.node_lease_ttl) + ": expected 2s to 1m");
  }
  return outcome::success();
}

}  // namespace

result<void> validate(const broker_config& c) {
  std::string error_text;  // set by the check_* helpers below when they find a bad value
  const auto fail = [](std::string text) -> result<void> { return invalid(std::move(text)); };
  const auto check_positive = [&](std::string_view name, milliseconds d) {
    if (d.count() > 0) return true;
    error_text = std::string(name) + " must be greater than zero, got " + common::format_duration(d);
    return false;
  };
  const auto check_schedule = [&](std::string_view name, const std::vector<milliseconds>& list) {
    if (list.empty()) {
      error_text = std::string(name) + " must list at least one duration";
      return false;
    }
    for (const auto d : list) {
      if (d.count() <= 0) {
        error_text = std::string(name) + " must contain only durations greater than zero, got " +
                     common::format_duration(d);
        return false;
      }
    }
    return true;
  };
  const auto check_at_least_one = [&](std::string_view name, std::uint64_t v) {
    if (v >= 1) return true;
    error_text = std::string(name) + " must be at least 1, got " + std::to_string(v);
    return false;
  };

  for (const auto* address : {&c.listen, &c.http}) {
    const char* name = address == &c.listen ? "listen" : "http";
    if (address->host != "localhost" && !common::is_ip_literal(address->host)) {
      return fail(std::string(name) + " address '" + address->to_string() +
                  "': the host must be an IP address or localhost (names are not resolved)");
    }
    const bool tls = !c.tls_cert_file.empty();
    if (!c.insecure && !common::is_loopback_host(address->host) && !(c.auth && tls)) {
      return fail(std::string(name) + " address " + address->to_string() +
                  " is not a loopback address, and serving other hosts needs auth = true and TLS (tls_cert_file, "
                  "tls_key_file) both on; now " + (c.auth ? "auth is on" : "auth is off") + " and TLS is " +
                  (tls ? "on" : "off") + ". Turn them on, or pass --insecure (insecure = true in the config "
                  "file) to accept connections from other hosts anyway");
    }
  }
  if (c.tls_cert_file.empty() != c.tls_key_file.empty()) {
    return fail("TLS needs both tls_cert_file and tls_key_file; only " +
                std::string(c.tls_cert_file.empty() ? "tls_key_file" : "tls_cert_file") + " is set");
  }
  if (!c.tls_client_ca_file.empty() && c.tls_cert_file.empty()) {
    return fail("tls_client_ca_file (mTLS) needs TLS on: set tls_cert_file and tls_key_file too");
  }
  if (auto hosts = parse_allow_hosts(c.webhook_allow_hosts); !hosts) {
    return fail("webhook_allow_hosts: " + hosts.error().message);
  }
  if (c.listen.port != 0 && c.listen == c.http) {
    return fail("listen and http are both " + c.listen.to_string() +
                ": give the admin HTTP server another port with --http HOST:PORT");
  }
  if (c.data_dir.empty()) return fail("data_dir must not be empty");
  if (c.auth && c.admin_token_file.empty()) {
    return fail("auth = true needs admin_token_file (--admin-token-file FILE): a file holding the admin "
                "principal's token, e.g. made with `printf 'txmq_%s' $(openssl rand -hex 24) > FILE && chmod 600 FILE`");
  }
  if (c.auth && !c.cluster_etcd.empty() && c.cluster_token_file.empty()) {
    return fail("auth = true in a cluster (cluster_etcd) needs cluster_token_file (--cluster-token-file FILE): a file "
                "holding the token the brokers authenticate to each other with, the same on every broker, e.g. made "
                "with `printf 'txmq_%s' $(openssl rand -hex 24) > FILE && chmod 600 FILE`");
  }
  if (!check_positive("tx_timeout", c.tx_timeout) ||
      !check_schedule("tx_check_schedule", c.tx_check_schedule) ||
      !check_at_least_one("tx_max_checks", c.tx_max_checks) ||
      !check_at_least_one("tx_checks_in_flight", c.tx_checks_in_flight) ||
      !check_positive("tx_check_answer_timeout", c.tx_check_answer_timeout) ||
      !check_positive("ack_deadline", c.ack_deadline) ||
      !check_schedule("retry_schedule", c.retry_schedule) ||
      !check_at_least_one("max_attempts", c.max_attempts) ||
      !check_at_least_one("replica_fetch_pipeline", c.replica_fetch_pipeline) ||
      !check_positive("dedupe_window", c.dedupe_window) ||
      !check_at_least_one("max_message_bytes", c.max_message_bytes) ||
      !check_at_least_one("max_connections", c.max_connections) ||
      !check_at_least_one("max_in_flight_per_connection", c.max_in_flight_per_connection) ||
      !check_at_least_one("max_topics", c.max_topics) ||
      !check_positive("hello_timeout", c.hello_timeout) ||
      !check_positive("frame_read_timeout", c.frame_read_timeout) ||
      !check_at_least_one("default_partitions", c.default_partitions) ||
      !check_schedule("webhook_schedule", c.webhook_schedule) ||
      !check_positive("webhook_timeout", c.webhook_timeout) ||
      !check_at_least_one("webhook_concurrency", c.webhook_concurrency) ||
      !check_positive("webhook_attempt_retention", c.webhook_attempt_retention) ||
      !check_positive("retention_interval", c.retention_interval) ||
      !check_positive("webhook_secret_grace", c.webhook_secret_grace)) {
    return invalid(error_text);
  }
  if (c.retention.count() < 0) return fail("retention must not be negative");
  if (c.idle_timeout.count() < 0) return fail("idle_timeout must not be negative");
  if (c.webhook_timeout > std::chrono::minutes(5)) return fail("webhook_timeout is at most 5m");
  // Every durable request may wait this long for its fsync: past a second it is a stall, not pacing.
  if (c.min_fsync_interval.count() < 0) return fail("min_fsync_interval must not be negative");
  if (c.min_fsync_interval > std::chrono::seconds(1)) return fail("min_fsync_interval is at most 1s");
  if (c.webhook_schedule.size() > 100) return fail("webhook_schedule has at most 100 steps");
  if (c.webhook_concurrency > 1024) return fail("webhook_concurrency is at most 1024");
  if (c.max_frame_bytes > k_max_frame_limit) {
    return fail("max_frame_bytes is " + common::format_size(c.max_frame_bytes) + ": at most " +
                common::format_size(k_max_frame_limit) + " is supported");
  }
  if (c.max_message_bytes > c.max_frame_bytes ||
      c.max_frame_bytes - c.max_message_bytes < k_frame_overhead_bytes) {
    return fail("max_frame_bytes (" + common::format_size(c.max_frame_bytes) +
                ") must be at least max_message_bytes (" + common::format_size(c.max_message_bytes) +
                ") + " + common::format_size(k_frame_overhead_bytes) +
                " for the envelope, so that a message of the largest allowed size fits in a "
                "frame; raise max_frame_bytes to " +
                common::format_size(c.max_message_bytes + k_frame_overhead_bytes) + " or more");
  }
  if (c.default_partitions > k_max_partitions) {
    return fail("default_partitions is " + std::to_string(c.default_partitions) + ": at most " +
                std::to_string(k_max_partitions) + " partitions per topic are supported");
  }
  if (auto level = common::log::parse_level(c.log_level); !level) {
    return fail("log_level '" + c.log_level + "': expected trace, debug, info, warn or error");
  }
  if (auto r = validate_cluster(c); !r) return r;
  return outcome::success();
}

}  // namespace txmq::broker
