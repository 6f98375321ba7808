#include "txmq/relay/options.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <system_error>

#include <boost/program_options.hpp>
#include <toml++/toml.h>

#include "txmq/client/bootstrap.h"
#include "txmq/client/connection.h"
#include "txmq/client/tls_flags.h"
#include "txmq/client/token.h"
#include "txmq/common/manual.h"
#include "txmq/common/units.h"

#ifndef TXMQ_VERSION
#define TXMQ_VERSION "unknown"
#endif

namespace txmq::relay {
namespace {

namespace po = boost::program_options;

// Flags whose value goes through our own grammars are read as text first.
struct text_values {
  std::string poll = "1s";
  std::string publish_timeout = "10s";
  std::string stale_after = "30s";
  std::string backoff_max = "5s";
  std::string http = "127.0.0.1:7880";
  std::string log_level = "info";
  std::optional<std::string> token;
  std::optional<std::string> token_file;
};

po::options_description make_options(relay_options& o, text_values& t) {
  po::options_description desc("usage: txmq-relay --pg CONN --broker HOST:PORT [options]\n"
                               "       txmq-relay --config FILE [options]\n\nOptions");
  desc.add_options()("help,h", "this help")(
      "config", po::value<std::string>()->value_name("FILE"),
      "TOML file with the settings below as `name = value` (flag names with _ for -, such as poll_interval = "
      "\"1s\"); flags override the file")(
      "pg", po::value(&o.conninfo)->value_name("CONN"), "libpq connection string or URI of the database with the outbox (required)")(
      "broker", po::value(&o.broker)->default_value(o.broker)->value_name("HOST:PORT"), "txmq broker HOST:PORT, or a cluster's bootstrap list HOST:PORT,HOST:PORT")(
      "token", po::value<std::string>()->value_name("TOKEN")->notifier([&t](const std::string& v) { t.token = v; }),
      "principal's token for a broker with auth (default: $TXMQ_TOKEN); visible in ps, prefer --token-file")(
      "token-file", po::value<std::string>()->value_name("FILE")->notifier([&t](const std::string& v) { t.token_file = v; }),
      "read the token from FILE")(
      "shards", po::value(&o.shards)->default_value(0)->value_name("N"), "outbox shards (0 = txmq_schema.shards, as `txmq outbox init` set)")(
      "batch", po::value(&o.batch)->default_value(o.batch)->value_name("N"), "rows per shard per round (read, publish, delete)")(
      "publishers", po::value(&o.publishers)->default_value(o.publishers)->value_name("N"),
      "broker connections publishing at once (a shard always uses the same one)")(
      "poll-interval", po::value(&t.poll)->default_value(t.poll)->value_name("DURATION"),
      "read owned shards at least this often (NOTIFY wakes sooner)")(
      "publish-timeout", po::value(&t.publish_timeout)->default_value(t.publish_timeout)->value_name("DURATION"),
      "how long a batch waits for the broker's acks before it is retried")(
      "backoff-max", po::value(&t.backoff_max)->default_value(t.backoff_max)->value_name("DURATION"),
      "longest pause between retries after PostgreSQL or the broker failed")(
      "stale-after", po::value(&t.stale_after)->default_value(t.stale_after)->value_name("DURATION"),
      "end the session of a relay without a heartbeat this long (frozen), so its shards move (0s = never; "
      "more than publish-timeout + backoff-max + 1s; default 30s or twice that sum)")(
      "http", po::value(&t.http)->default_value(t.http)->value_name("HOST:PORT"), "admin HTTP HOST:PORT for /healthz and /metrics (port 0: any)")(
      "relay-id", po::value(&o.relay_id)->value_name("NAME"), "name in txmq_relay and pg_stat_activity (default host:pid)")(
      "log-level", po::value(&t.log_level)->default_value(t.log_level)->value_name("LEVEL"), "trace, debug, info, warn or error");
  client::add_tls_flags(desc);
  return desc;
}

// The settings of a TOML file as command-line words ("--poll-interval=1s"), checked against the
// flags: a key is a flag name with '_' for '-'. Parsed after the command line and stored into the
// same variables_map, which keeps the first value it was given, so flags win over the file.
result<std::vector<std::string>> config_file_words(const std::string& path, const po::options_description& desc) {
  const std::string where = "config file '" + path + "'";
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalid("cannot read " + where + ": " + std::error_code(errno, std::generic_category()).message());
  std::ostringstream content;
  content << in.rdbuf();
  toml::table table;
  try {
    table = toml::parse(content.str(), path);
  } catch (const toml::parse_error& e) {
    return invalid(where + " line " + std::to_string(e.source().begin.line) + ": " + std::string(e.description()) +
                   " (the file must be TOML: name = value, one per line)");
  }
  std::vector<std::string> words;
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    const std::string at = where + " line " + std::to_string(node.source().begin.line) + ": ";
    std::string flag = name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    const auto* d = desc.find_nothrow(flag, false);
    if (name.find('-') != std::string::npos || d == nullptr || flag == "help" || flag == "config") {
      return invalid(at + "unknown setting '" + name + "' (the settings are the flags of txmq-relay --help, " +
                     "with _ for -, such as poll_interval)");
    }
    const bool is_switch = d->semantic()->max_tokens() == 0;
    if (const auto* b = node.as_boolean()) {
      if (!is_switch) return invalid(at + name + " wants a value, not true or false");
      if (b->get()) words.push_back("--" + flag);
    } else if (is_switch) {
      return invalid(at + name + " is true or false");
    } else if (const auto* str = node.as_string()) {
      words.push_back("--" + flag + "=" + str->get());
    } else if (const auto* integer = node.as_integer()) {
      if (d->format_parameter().starts_with("DURATION")) {
        return invalid(at + name + " is a duration, written as a string with a unit: \"" +
                       std::to_string(integer->get()) + "s\" or \"" + std::to_string(integer->get()) + "ms\"");
      }
      words.push_back("--" + flag + "=" + std::to_string(integer->get()));
    } else {
      return invalid(at + name + " wants a string or an integer (durations as strings: \"1s\")");
    }
  }
  return words;
}

// "--poll-interval: '5' is not a duration: ..." for a value our grammars refuse.
error bad_value(std::string_view flag, const error& e) { return invalid("--" + std::string(flag) + ": " + e.message); }

result<void> check_range(std::string_view flag, int value, int low, int high) {
  if (value >= low && value <= high) return outcome::success();
  return invalid("--" + std::string(flag) + " must be between " + std::to_string(low) + " and " + std::to_string(high) +
                 ", not " + std::to_string(value));
}

}  // namespace

common::manual::page relay_manual_page() {
  relay_options o;
  text_values t;
  common::manual::page p;
  p.program = "txmq-relay";
  p.summary = "publish the rows of a PostgreSQL outbox to a txmq broker";
  p.synopsis = {"--pg CONN --broker HOST:PORT [OPTIONS]", "--config FILE [OPTIONS]"};
  p.description =
      "txmq-relay reads the committed rows of txmq_outbox (made by txmq outbox init), publishes each with its row "
      "id as the message id, and deletes the rows once the broker has acknowledged them. Several relays on one "
      "database share its shards through advisory locks; a dead relay's shards move to the others within about a "
      "second. It serves /healthz and /metrics on --http, stops on SIGINT or SIGTERM after the batch in flight, "
      "and exits 0.\n\n"
      "Every option can also be written in the TOML file of --config as name = value, the flag's name with _ for "
      "- (poll_interval = \"1s\", pg = \"postgresql://app@localhost/app\", tls = true); flags override the "
      "file. Durations: 500ms, 1s, 2m, 1h.";
  p.options = common::manual::options_of(make_options(o, t));
  p.sections = {
      {"EXIT STATUS", "0 after a stop by signal (or --help).\n\n1 the relay could not start or failed for good "
                      "(the log says why).\n\n2 a bad option or config file: one line naming it on standard error."},
      {"ENVIRONMENT", "TXMQ_TOKEN: the principal's token when neither --token nor --token-file is given."},
      {"FILES", "/etc/txmq/relay-NAME.toml: the settings of txmq-relay@NAME.service (the package ships "
                "/etc/txmq/relay-example.toml)."},
      {"SEE ALSO", "txmq(1) (outbox init, outbox status), txmq-broker(1); outbox-relay/README.md and "
                   "docs/operations.md in the txmq sources."},
  };
  p.version = TXMQ_VERSION;
  return p;
}

std::string relay_usage() {
  relay_options o;
  text_values t;
  std::ostringstream os;
  os << make_options(o, t) << '\n';
  return os.str();
}

result<command_line> parse_relay_options(int argc, const char* const* argv) {
  command_line out;
  text_values text;
  const auto desc = make_options(out.relay, text);
  po::variables_map vm;
  if (argc == 2 && argv[1] != nullptr &&
      (std::string_view(argv[1]) == "--man-page" || std::string_view(argv[1]) == "--bash-completion")) {
    out.exit_text = std::string_view(argv[1]) == "--man-page" ? common::manual::to_roff(relay_manual_page())
                                                              : common::manual::to_bash_completion(relay_manual_page());
    return out;
  }
  std::string config_path;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("config") != 0 && vm.count("help") == 0) {
      config_path = vm["config"].as<std::string>();
      auto words = config_file_words(config_path, desc);
      if (!words) return words.error();
      try {
        po::store(po::command_line_parser(words.value()).options(desc).run(), vm);
      } catch (const po::error& e) {
        return invalid("config file '" + config_path + "': " + e.what());
      }
    }
    po::notify(vm);
  } catch (const po::error& e) {
    return invalid(e.what());
  } catch (const std::exception& e) {
    // program_options reports everything as po::error; this is the net under it, so that no
    // flag can end the process with std::terminate.
    return invalid(std::string("cannot read the command line: ") + e.what());
  }
  if (vm.count("help") != 0) {
    out.exit_text = relay_usage();
    return out;
  }

  auto& o = out.relay;
  if (o.conninfo.empty()) return invalid("--pg is required (the database with the outbox; pg = \"...\" in a --config file)");

  // The broker's address is checked here, so a typo exits 2 with the flag named instead of
  // failing later, when the relay first connects.
  if (auto broker = client::parse_bootstrap_list(o.broker); !broker) return bad_value("broker", broker.error());
  o.tls = client::tls_options_from(vm);
  auto token = client::resolve_token(text.token, text.token_file, [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  });
  if (!token) return invalid(token.error().message);
  o.auth_token = std::move(token.value());

  auto poll = common::parse_duration(text.poll);
  if (!poll) return bad_value("poll-interval", poll.error());
  o.poll_interval = poll.value();
  o.rebalance_interval = std::min(o.poll_interval, std::chrono::milliseconds(1000));
  auto publish_timeout = common::parse_duration(text.publish_timeout);
  if (!publish_timeout) return bad_value("publish-timeout", publish_timeout.error());
  o.publish_timeout = publish_timeout.value();
  auto backoff_max = common::parse_duration(text.backoff_max);
  if (!backoff_max) return bad_value("backoff-max", backoff_max.error());
  if (backoff_max.value().count() <= 0) return invalid("--backoff-max must be positive");
  o.backoff_max = backoff_max.value();
  o.backoff_initial = std::min(o.backoff_initial, o.backoff_max);
  auto stale_after = common::parse_duration(text.stale_after);
  if (!stale_after) return bad_value("stale-after", stale_after.error());
  o.stale_after = stale_after.value();
  // A working relay may go this long without a heartbeat (waiting for acks, then backing off):
  // a shorter --stale-after would end healthy relays' sessions.
  const auto quiet = o.publish_timeout + o.backoff_max + o.rebalance_interval;
  if (vm["stale-after"].defaulted()) o.stale_after = std::max(o.stale_after, 2 * quiet);
  if (o.stale_after.count() > 0 && o.stale_after <= quiet) {
    return invalid("--stale-after (" + text.stale_after + ") must exceed --publish-timeout + --backoff-max + " +
                   std::to_string(o.rebalance_interval.count()) + "ms (" + std::to_string(quiet.count()) +
                   "ms), the longest a working relay goes without a heartbeat");
  }

  auto http = common::parse_host_port(text.http);
  if (!http) return bad_value("http", http.error());
  out.http = std::move(http).value();
  auto endpoint = common::to_endpoint(out.http);
  if (!endpoint) return bad_value("http", endpoint.error());
  out.http_endpoint = endpoint.value();

  auto level = common::log::parse_level(text.log_level);
  if (!level) return bad_value("log-level", level.error());
  out.log_level = level.value();

  TXMQ_TRY(check_range("batch", o.batch, 1, 100000));
  TXMQ_TRY(check_range("publishers", o.publishers, 1, 64));
  TXMQ_TRY(check_range("shards", o.shards, 0, 1024));
  return out;
}

}  // namespace txmq::relay
