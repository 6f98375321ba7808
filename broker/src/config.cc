// The broker's settings: one table (k_settings) and everything that reads or writes it: flags,
// the TOML file, describe(), --help (validate() is config_validate.cc). It is one piece because every part walks the
// same table, and keeping them beside it makes a new setting a one-row change; the value
// grammars (durations, sizes, HOST:PORT) are txmq::common's.

#include "txmq/broker/config.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <fstream>
#include <limits>
#include <sstream>
#include <system_error>
#include <variant>

#include <boost/make_shared.hpp>
#include <boost/program_options.hpp>
#include <toml++/toml.h>

#include "txmq/common/address.h"
#include "txmq/common/log.h"
#include "txmq/common/manual.h"
#include "manual_page.h"
#include "webhooks/egress_guard.h"
#include "txmq/common/units.h"

#ifndef TXMQ_VERSION
#define TXMQ_VERSION "unknown"
#endif

namespace txmq::broker {
namespace {

using std::chrono::milliseconds;
namespace po = boost::program_options;

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t");
  return s.substr(first, last - first + 1);
}

// The whole of `digits` as an unsigned integer: no sign, no spaces, no trailing text.
std::optional<std::uint64_t> parse_unsigned(std::string_view digits) {
  if (digits.empty() || digits.front() < '0' || digits.front() > '9') return std::nullopt;
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
  return value;
}

// --- the settings table: one row per setting, used by flags, the file, describe and --help.

enum class kind { address, path, optional_path, host_list, url_list, optional_address, name, duration, duration_list, count, size, boolean, durability, level };

using member = std::variant<common::host_port broker_config::*, std::string broker_config::*,
                            milliseconds broker_config::*,
                            std::vector<milliseconds> broker_config::*,
                            std::uint32_t broker_config::*, std::uint64_t broker_config::*,
                            bool broker_config::*, durability_mode broker_config::*>;

struct setting {
  std::string_view name;  // TOML key; the flag is the same with '-' for '_'
  kind what;
  member field;
  std::string_view help;
};

// Kept in the order of broker_config, which is the order of describe() and --help.
const setting k_settings[] = {
    {"listen", kind::address, &broker_config::listen, "wire protocol address"},
    {"http", kind::address, &broker_config::http, "admin HTTP address (/healthz, /metrics)"},
    {"data_dir", kind::path, &broker_config::data_dir, "directory of the message store"},
    {"tx_timeout", kind::duration, &broker_config::tx_timeout,
     "time from Prepare to the first check-back"},
    {"tx_check_schedule", kind::duration_list, &broker_config::tx_check_schedule,
     "gaps between later check-backs; the last repeats"},
    {"tx_max_checks", kind::count, &broker_config::tx_max_checks,
     "undecided check-backs before a transaction is ABANDONED"},
    {"tx_checks_in_flight", kind::count, &broker_config::tx_checks_in_flight,
     "open check-backs per producer group"},
    {"tx_check_answer_timeout", kind::duration, &broker_config::tx_check_answer_timeout,
     "wait for a check-back answer before counting it undecided"},
    {"ack_deadline", kind::duration, &broker_config::ack_deadline,
     "time a consumer has to ack a delivery"},
    {"retry_schedule", kind::duration_list, &broker_config::retry_schedule,
     "delays before redeliveries; the last repeats"},
    {"max_attempts", kind::count, &broker_config::max_attempts,
     "deliveries before a message goes to the dead-letter queue"},
    {"dedupe_window", kind::duration, &broker_config::dedupe_window,
     "how long message ids and transaction outcomes are remembered"},
    {"max_message_bytes", kind::size, &broker_config::max_message_bytes,
     "largest message: key + header names and values + body"},
    {"max_frame_bytes", kind::size, &broker_config::max_frame_bytes,
     "largest wire frame (>= max_message_bytes + 64KiB)"},
    {"max_connections", kind::count, &broker_config::max_connections,
     "client connections at once"},
    {"max_in_flight_per_connection", kind::count, &broker_config::max_in_flight_per_connection,
     "requests of one connection being processed at once"},
    {"max_request_memory", kind::size, &broker_config::max_request_memory,
     "bytes of all requests being handled; above it no socket is read until answers free memory (0 = no limit)"},
    {"max_topics", kind::count, &broker_config::max_topics, "topics the broker accepts"},
    {"hello_timeout", kind::duration, &broker_config::hello_timeout,
     "close a connection that has not completed Hello by then"},
    {"frame_read_timeout", kind::duration, &broker_config::frame_read_timeout,
     "close a connection whose started frame has not arrived completely by then"},
    {"idle_timeout", kind::duration, &broker_config::idle_timeout,
     "close a connection that sent nothing and waits for no answer this long (0 = never)"},
    {"auto_create_topics", kind::boolean, &broker_config::auto_create_topics,
     "create a topic on its first produce"},
    {"default_partitions", kind::count, &broker_config::default_partitions,
     "partitions of a topic created without a count"},
    {"retention", kind::duration, &broker_config::retention,
     "keep messages this long (0 = no age limit)"},
    {"retention_bytes", kind::size, &broker_config::retention_bytes,
     "keep at most this much per partition (0 = no size limit)"},
    {"retention_interval", kind::duration, &broker_config::retention_interval,
     "how often messages past their retention are removed"},
    {"min_free_disk_bytes", kind::size, &broker_config::min_free_disk_bytes,
     "below this much free disk, produce and Prepare answer STORE_FULL (0 = no minimum)"},
    {"verify_store_on_start", kind::boolean, &broker_config::verify_store_on_start,
     "read the whole store once at start, checking every block's checksum, before serving"},
    {"low_priority_background", kind::boolean, &broker_config::low_priority_background,
     "run the store's flushes and compactions at low CPU priority while no write waits for them"},
    {"min_fsync_interval", kind::duration, &broker_config::min_fsync_interval,
     "least time between two fsyncs of the store; requests wait for the next (0 = none)"},
    {"webhook_schedule", kind::duration_list, &broker_config::webhook_schedule,
     "default delays before webhook attempts 2, 3, ... (max attempts = 1 + their number)"},
    {"webhook_timeout", kind::duration, &broker_config::webhook_timeout,
     "default time a webhook endpoint has to answer 2xx"},
    {"webhook_concurrency", kind::count, &broker_config::webhook_concurrency,
     "default webhook requests in flight per subscription"},
    {"webhook_rate_limit", kind::count, &broker_config::webhook_rate_limit,
     "default webhook attempts per second per subscription (0 = unlimited)"},
    {"webhook_attempt_retention", kind::duration, &broker_config::webhook_attempt_retention,
     "how long webhook attempts stay in the attempt log"},
    {"webhook_secret_grace", kind::duration, &broker_config::webhook_secret_grace,
     "how long a rotated-out webhook secret keeps signing"},
    {"webhook_ca_file", kind::optional_path, &broker_config::webhook_ca_file,
     "extra trusted CA certificates (PEM) for https webhooks; empty = system ones only"},
    {"webhook_max_subscriptions", kind::count, &broker_config::webhook_max_subscriptions,
     "webhook subscriptions the broker accepts"},
    {"webhook_allow_private", kind::boolean, &broker_config::webhook_allow_private,
     "deliver webhooks to loopback, private and link-local addresses too (egress guard off)"},
    {"webhook_allow_hosts", kind::host_list, &broker_config::webhook_allow_hosts,
     "webhook hosts exempt from the egress guard: comma-separated host names and CIDRs"},
    {"tls_cert_file", kind::optional_path, &broker_config::tls_cert_file,
     "PEM certificate chain: serve TLS on the wire protocol and the admin HTTP (with tls_key_file)"},
    {"tls_key_file", kind::optional_path, &broker_config::tls_key_file, "PEM private key of tls_cert_file"},
    {"tls_client_ca_file", kind::optional_path, &broker_config::tls_client_ca_file,
     "PEM CAs whose client certificates are required (mTLS); empty = none"},
    {"cluster_etcd", kind::url_list, &broker_config::cluster_etcd,
     "etcd endpoints: run as a node of a cluster (docs/cluster.md); empty = a single node"},
    {"cluster_name", kind::name, &broker_config::cluster_name, "the cluster's etcd key prefix"},
    {"node_id", kind::count, &broker_config::node_id, "this broker's node id in the cluster (from 1)"},
    {"advertise", kind::optional_address, &broker_config::advertise,
     "HOST:PORT clients use to reach this broker in a cluster; empty = listen"},
    {"node_lease_ttl", kind::duration, &broker_config::node_lease_ttl,
     "cluster: a node whose lease was not renewed this long is lost and its leaderships move"},
    {"replication_timeout", kind::duration, &broker_config::replication_timeout,
     "cluster: a write not fsynced by every in-sync replica within this is refused NOT_ENOUGH_REPLICAS"},
    {"replica_lag_max", kind::duration, &broker_config::replica_lag_max,
     "cluster: a follower not caught up with its leader for this long leaves the ISR"},
    {"replica_fetch_pipeline", kind::count, &broker_config::replica_fetch_pipeline,
     "cluster: appends a follower keeps in flight per partition (1: fetch again after the fsync)"},
    {"cluster_token_file", kind::optional_path, &broker_config::cluster_token_file,
     "cluster with auth: file holding the token brokers authenticate to each other with (the same on every broker)"},
    {"cluster_tls_ca_file", kind::optional_path, &broker_config::cluster_tls_ca_file,
     "cluster with TLS: PEM CAs the other brokers' certificates are verified against; empty = tls_client_ca_file or system CAs"},
    {"durability", kind::durability, &broker_config::durability,
     "sync: ack after fsync; async: ack before (may lose acked writes on power loss)"},
    {"auth", kind::boolean, &broker_config::auth, "require principals' tokens (docs/security.md)"},
    {"insecure", kind::boolean, &broker_config::insecure,
     "allow non-loopback addresses without auth and TLS both on (logged every hour)"},
    {"admin_token_file", kind::optional_path, &broker_config::admin_token_file,
     "file holding the admin principal's token (at least 32 characters); required with auth"},
    {"log_level", kind::level, &broker_config::log_level, "trace, debug, info, warn or error"},
};

std::string flag_name(std::string_view key) {
  std::string flag(key);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::string_view expected_text(kind what) {
  switch (what) {
    case kind::address:
      return "HOST:PORT, such as 127.0.0.1:7878 or [::1]:7878";
    case kind::path:
      return "a non-empty path";
    case kind::optional_path:
      return "a path, or \"\" for none";
    case kind::host_list:
      return "comma-separated host names and CIDRs such as hooks.internal,10.1.0.0/16, or \"\" for none";
    case kind::url_list:
      return "comma-separated URLs such as http://127.0.0.1:2379, or \"\" for none";
    case kind::optional_address:
      return "HOST:PORT such as 10.0.0.5:7878, or \"\" for none";
    case kind::name:
      return "a non-empty name";
    case kind::duration:
      return "a duration such as 500ms, 6s, 3m, 1h or 7d";
    case kind::duration_list:
      return "a comma-separated list of durations such as 5s,10s,1m";
    case kind::count:
      return "an integer from 0 to 4294967295";
    case kind::size:
      return "a size in bytes, optionally with a KiB, MiB or GiB suffix, such as 4MiB";
    case kind::boolean:
      return "true or false";
    case kind::durability:
      return "sync or async";
    case kind::level:
      return "trace, debug, info, warn or error";
  }
  return "";
}

std::string_view value_placeholder(kind what) {
  switch (what) {
    case kind::address:
      return "HOST:PORT";
    case kind::path:
      return "DIR";
    case kind::optional_path:
      return "FILE";
    case kind::host_list:
      return "HOST,CIDR,...";
    case kind::url_list:
      return "URL,URL,...";
    case kind::optional_address:
      return "HOST:PORT";
    case kind::name:
      return "NAME";
    case kind::duration:
      return "DURATION";
    case kind::duration_list:
      return "D1,D2,...";
    case kind::count:
      return "N";
    case kind::size:
      return "SIZE";
    case kind::boolean:
      return "true|false";
    case kind::durability:
      return "sync|async";
    case kind::level:
      return "LEVEL";
  }
  return "";
}

std::optional<bool> parse_bool(std::string_view text) {
  if (text == "true") return true;
  if (text == "false") return false;
  return std::nullopt;
}

// Sets the setting from its text form; false if the text is malformed for the setting's kind.
bool set_from_text(broker_config& config, const setting& s, std::string_view raw) {
  const std::string_view text = trim(raw);
  switch (s.what) {
    case kind::address: {
      auto v = common::parse_host_port(text);
      if (!v) return false;
      config.*std::get<common::host_port broker_config::*>(s.field) = std::move(v).value();
      return true;
    }
    case kind::path:
    case kind::optional_path:
    case kind::host_list:
    case kind::url_list:
    case kind::optional_address:
    case kind::name:
      if (text.empty() && (s.what == kind::path || s.what == kind::name)) return false;
      config.*std::get<std::string broker_config::*>(s.field) = std::string(text);
      return true;
    case kind::duration: {
      auto v = common::parse_duration(text);
      if (!v) return false;
      config.*std::get<milliseconds broker_config::*>(s.field) = v.value();
      return true;
    }
    case kind::duration_list: {
      auto v = common::parse_duration_list(text);
      if (!v) return false;
      config.*std::get<std::vector<milliseconds> broker_config::*>(s.field) =
          std::move(v).value();
      return true;
    }
    case kind::count: {
      auto v = parse_unsigned(text);
      if (!v || *v > std::numeric_limits<std::uint32_t>::max()) return false;
      config.*std::get<std::uint32_t broker_config::*>(s.field) = static_cast<std::uint32_t>(*v);
      return true;
    }
    case kind::size: {
      auto v = common::parse_size(text);
      if (!v) return false;
      config.*std::get<std::uint64_t broker_config::*>(s.field) = v.value();
      return true;
    }
    case kind::boolean: {
      auto v = parse_bool(text);
      if (!v) return false;
      config.*std::get<bool broker_config::*>(s.field) = *v;
      return true;
    }
    case kind::durability:
      if (text == "sync") {
        config.*std::get<durability_mode broker_config::*>(s.field) = durability_mode::sync;
      } else if (text == "async") {
        config.*std::get<durability_mode broker_config::*>(s.field) = durability_mode::async;
      } else {
        return false;
      }
      return true;
    case kind::level:
      if (!common::log::parse_level(text)) return false;
      config.*std::get<std::string broker_config::*>(s.field) = std::string(text);
      return true;
  }
  return false;
}

// A TOML basic string with the characters TOML requires escaped.
std::string toml_quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          static constexpr char k_hex[] = "0123456789ABCDEF";
          out += "\\u00";
          out += k_hex[(static_cast<unsigned char>(c) >> 4) & 0xf];
          out += k_hex[static_cast<unsigned char>(c) & 0xf];
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string value_as_toml(const broker_config& config, const setting& s) {
  switch (s.what) {
    case kind::address:
      return toml_quote((config.*std::get<common::host_port broker_config::*>(s.field)).to_string());
    case kind::path:
    case kind::optional_path:
    case kind::host_list:
    case kind::url_list:
    case kind::optional_address:
    case kind::name:
    case kind::level:
      return toml_quote(config.*std::get<std::string broker_config::*>(s.field));
    case kind::duration:
      return toml_quote(common::format_duration(config.*std::get<milliseconds broker_config::*>(s.field)));
    case kind::duration_list: {
      std::string out = "[";
      const auto& list = config.*std::get<std::vector<milliseconds> broker_config::*>(s.field);
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (i != 0) out += ", ";
        out += toml_quote(common::format_duration(list[i]));
      }
      return out + "]";
    }
    case kind::count:
      return std::to_string(config.*std::get<std::uint32_t broker_config::*>(s.field));
    case kind::size:
      return toml_quote(common::format_size(config.*std::get<std::uint64_t broker_config::*>(s.field)));
    case kind::boolean:
      return config.*std::get<bool broker_config::*>(s.field) ? "true" : "false";
    case kind::durability:
      return toml_quote(
          to_string(config.*std::get<durability_mode broker_config::*>(s.field)));
  }
  return "";
}

// The default, as shown by --help (without TOML quotes).
std::string default_text(const setting& s) {
  const broker_config defaults;
  std::string v = value_as_toml(defaults, s);
  if (s.what == kind::duration_list) {
    v.erase(std::remove_if(v.begin(), v.end(),
                           [](char c) { return c == '"' || c == ' ' || c == '[' || c == ']'; }),
            v.end());
  } else if (v.size() >= 2 && v.front() == '"') {
    v = v.substr(1, v.size() - 2);
  }
  return v;
}

const setting* find_setting(std::string_view name) {
  for (const auto& s : k_settings) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// " (did you mean 'tx_timeout'?)" when a setting name is close to `name`, else "".
std::string suggestion(std::string_view name, bool as_flag) {
  std::string normalized(name);
  std::replace(normalized.begin(), normalized.end(), '-', '_');
  const setting* best = nullptr;
  std::size_t best_distance = 3;
  for (const auto& s : k_settings) {
    const std::size_t d = edit_distance(normalized, s.name);
    if (d < best_distance) {
      best = &s;
      best_distance = d;
    }
  }
  if (best == nullptr) return "";
  return " (did you mean '" + (as_flag ? "--" + flag_name(best->name) : std::string(best->name)) +
         "'?)";
}

// The value as the user would have written it (TOML's own printer prefers 'literal' strings).
std::string node_text(const toml::node& node) {
  if (const auto* str = node.as_string()) return toml_quote(str->get());
  if (const auto* array = node.as_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < array->size(); ++i) {
      if (i != 0) out += ", ";
      out += node_text(*array->get(i));
    }
    return out + "]";
  }
  std::ostringstream os;
  node.visit([&os](const auto& n) { os << n; });
  return os.str();
}

// Applies one TOML value; returns an empty string or the reason it was refused.
std::string set_from_toml(broker_config& config, const setting& s, const toml::node& node) {
  const auto bad = [&](std::string_view extra = {}) {
    std::string msg = "invalid value " + node_text(node) + ": expected ";
    msg += expected_text(s.what);
    msg += extra;
    return msg;
  };
  if (const auto* str = node.as_string()) {
    return set_from_text(config, s, str->get()) ? std::string() : bad();
  }
  if (const auto* integer = node.as_integer()) {
    const std::int64_t v = integer->get();
    if (s.what == kind::count) {
      if (v < 0 || v > std::numeric_limits<std::uint32_t>::max()) return bad();
      config.*std::get<std::uint32_t broker_config::*>(s.field) = static_cast<std::uint32_t>(v);
      return {};
    }
    if (s.what == kind::size) {
      if (v < 0) return bad();
      config.*std::get<std::uint64_t broker_config::*>(s.field) = static_cast<std::uint64_t>(v);
      return {};
    }
    if (s.what == kind::duration || s.what == kind::duration_list) {
      return bad(", written as a string such as \"" + std::to_string(v) + "s\"");
    }
    return bad();
  }
  if (const auto* boolean = node.as_boolean()) {
    if (s.what != kind::boolean) return bad();
    config.*std::get<bool broker_config::*>(s.field) = boolean->get();
    return {};
  }
  if (const auto* array = node.as_array()) {
    if (s.what != kind::duration_list) return bad();
    if (array->empty()) return bad(" (at least one)");
    std::vector<milliseconds> list;
    for (const auto& element : *array) {
      const auto* str = element.as_string();
      if (str == nullptr) return bad(" (each element a string such as \"5s\")");
      auto d = common::parse_duration(trim(str->get()));
      if (!d) {
        return "invalid element " + node_text(element) + " in " + node_text(node) +
               ": expected a duration such as 500ms, 6s, 3m, 1h or 7d";
      }
      list.push_back(d.value());
    }
    config.*std::get<std::vector<milliseconds> broker_config::*>(s.field) = std::move(list);
    return {};
  }
  return bad();
}

// Flags of boolean settings may be written `--insecure`, `--insecure true` or
// `--insecure=false`; program_options only knows the first and last form, so the middle one is
// joined here.
std::vector<std::string> join_boolean_flags(int argc, const char* const* argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i] == nullptr ? std::string() : std::string(argv[i]);
    if (arg.starts_with("--") && arg.find('=') == std::string::npos && i + 1 < argc &&
        argv[i + 1] != nullptr) {
      std::string key = arg.substr(2);
      std::replace(key.begin(), key.end(), '-', '_');
      const setting* s = find_setting(key);
      const std::string_view next = argv[i + 1];
      if (s != nullptr && s->what == kind::boolean && (next == "true" || next == "false")) {
        arg += '=';
        arg += next;
        ++i;
      }
    }
    out.push_back(std::move(arg));
  }
  return out;
}

po::options_description make_options() {
  po::options_description desc("txmq-broker options");
  desc.add_options()("help,h", "print this help and exit")("version", "print the version and exit")(
      "config", po::value<std::string>()->value_name("FILE"),
      "TOML config file; flags override its settings");
  for (const auto& s : k_settings) {
    const std::string flag = flag_name(s.name);
    auto* value = po::value<std::string>()->value_name(std::string(value_placeholder(s.what)));
    if (s.what == kind::boolean) value->implicit_value("true");
    const std::string help = std::string(s.help) + " (default " + default_text(s) + ")";
    desc.add(boost::make_shared<po::option_description>(flag.c_str(), value, help.c_str()));
  }
  return desc;
}

}  // namespace

std::string_view to_string(durability_mode mode) noexcept {
  return mode == durability_mode::sync ? "sync" : "async";
}

result<void> apply_toml_config(std::string_view toml_text, std::string_view source_name,
                               broker_config& config) {
  const std::string where = "config file '" + std::string(source_name) + "'";
  toml::table table;
  try {
    table = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    return invalid(where + " line " + std::to_string(e.source().begin.line) + " column " +
                 std::to_string(e.source().begin.column) + ": " + std::string(e.description()) +
                 " (the file must be TOML: key = value, one per line)");
  }
  for (const auto& [key, node] : table) {
    const std::string line = " (line " + std::to_string(node.source().begin.line) + ")";
    const setting* s = find_setting(key.str());
    if (s == nullptr) {
      return invalid(where + ": unknown key '" + std::string(key.str()) + "'" + line + suggestion(key.str(), false) +
                     "; docs/configuration.md lists the settings");
    }
    std::string reason = set_from_toml(config, *s, node);
    if (!reason.empty()) {
      return invalid(where + ": key '" + std::string(s->name) + "'" + line + ": " + reason);
    }
  }
  return outcome::success();
}

result<void> apply_config_file(const std::string& path, broker_config& config) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const std::error_code ec(errno, std::generic_category());
    return invalid("cannot read config file '" + path + "': " + ec.message());
  }
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) {
    return invalid("cannot read config file '" + path + "': read error");
  }
  return apply_toml_config(content.str(), path, config);
}

std::string describe(const broker_config& config) {
  std::string out;
  for (const auto& s : k_settings) {
    out += s.name;
    out += " = ";
    out += value_as_toml(config, s);
    out += '\n';
  }
  return out;
}

std::string broker_usage() {
  std::ostringstream os;
  os << "Usage: txmq-broker [--config FILE] [--SETTING VALUE]...\n\n"
     << "Every setting can also be written in the TOML config file as `setting_name = value`.\n"
     << "Durations: 500ms, 6s, 3m, 1h, 7d. Sizes: bytes or KiB/MiB/GiB (4MiB).\n\n"
     << make_options();
  return os.str();
}

std::vector<common::manual::option> broker_option_docs() { return common::manual::options_of(make_options()); }

result<parsed_config> parse_broker_config(int argc, const char* const* argv) {
  // Build-time outputs (packaging installs them), from the table above.
  if (argc == 2 && argv[1] != nullptr && (std::string_view(argv[1]) == "--man-page" ||
                                          std::string_view(argv[1]) == "--bash-completion")) {
    const auto page = broker_manual_page(TXMQ_VERSION);
    return parsed_config{{}, std::string_view(argv[1]) == "--man-page" ? common::manual::to_roff(page)
                                                                      : common::manual::to_bash_completion(page)};
  }
  const auto options = make_options();
  const std::vector<std::string> args = join_boolean_flags(argc, argv);
  po::variables_map flags;
  try {
    // Stray words are collected so that the error can name them.
    po::options_description all = options;
    all.add_options()("txmq-stray-argument", po::value<std::vector<std::string>>());
    po::positional_options_description stray;
    stray.add("txmq-stray-argument", -1);
    po::store(po::command_line_parser(args)
                  .options(all)
                  .positional(stray)
                  .style(po::command_line_style::default_style &
                         ~po::command_line_style::allow_guessing)
                  .run(),
              flags);
  } catch (const po::unknown_option& e) {
    return invalid("unknown option '" + e.get_option_name() + "'" +
                   suggestion(std::string_view(e.get_option_name()).substr(
                                  std::min<std::size_t>(2, e.get_option_name().size())),
                              true) +
                   "; run txmq-broker --help for the list of settings");
  } catch (const po::error& e) {
    return invalid(std::string(e.what()) + "; run txmq-broker --help for the list of settings");
  }

  if (flags.count("txmq-stray-argument") != 0) {
    return invalid("unexpected argument '" + flags["txmq-stray-argument"].as<std::vector<std::string>>().front() +
                   "': settings are given as --name VALUE; run txmq-broker --help for the list");
  }

  parsed_config out;
  if (flags.count("help") != 0) {
    out.exit_text = broker_usage();
    return out;
  }
  if (flags.count("version") != 0) {
    out.exit_text = std::string("txmq-broker ") + TXMQ_VERSION + "\n";
    return out;
  }
  if (flags.count("config") != 0) {
    TXMQ_TRY(apply_config_file(flags["config"].as<std::string>(), out.config));
  }
  for (const auto& s : k_settings) {
    const std::string flag = flag_name(s.name);
    if (flags.count(flag) == 0) continue;
    const auto& text = flags[flag].as<std::string>();
    if (!set_from_text(out.config, s, text)) {
      return invalid("--" + flag + ": invalid value '" + text + "': expected " +
                   std::string(expected_text(s.what)));
    }
  }
  TXMQ_TRY(validate(out.config));
  return out;
}

}  // namespace txmq::broker
