#include "txmq/cli/app.h"

#include <cstdlib>
#include <istream>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include <boost/program_options.hpp>

#include "txmq/client/tls_flags.h"
#include "group_commands.h"
#include "message_commands.h"
#include "outbox_commands.h"
#include "session.h"
#include "cluster_commands.h"
#include "txmq/client/bootstrap.h"
#include "topic_commands.h"
#include "tx_commands.h"
#include "auth_commands.h"
#include "webhook_commands.h"
#include "txmq/client/token.h"
#include "txmq/client/connection.h"
#include "txmq/common/manual.h"

namespace txmq::cli {

std::optional<std::string> process_getenv(std::string_view name) {
  const char* v = std::getenv(std::string(name).c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

namespace {

namespace po = boost::program_options;
using std::chrono::milliseconds;

// A command line that does not say what to do; the text names the problem.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct command {
  std::string name;      // "topic create"
  std::string synopsis;  // after "txmq "
  std::string summary;
  std::vector<std::string> positionals;  // names, each taking one token, in order
  void (*add_options)(po::options_description&);
  int (*execute)(detail::session&, const po::variables_map&);
};

std::string required(const po::variables_map& vm, const std::string& name) {
  if (!vm.count(name)) throw usage_error("missing " + name);
  return vm[name].as<std::string>();
}

void no_options(po::options_description&) {}

protocol::txid txid_arg(const po::variables_map& vm) {
  const auto text = required(vm, "TXID");
  auto id = protocol::uuid::parse(text);
  if (!id) throw usage_error("TXID: '" + text + "' is not a UUID in canonical text (8-4-4-4-12 hex digits)");
  return id.value();
}

const std::vector<command>& commands() {
  static const std::vector<command> k_commands{
      {"topic create", "topic create NAME [--partitions N] [--replicas N] [--min-insync M] [--retention-bytes B]",
       "create a topic", {"NAME"},
       [](po::options_description& o) {
         o.add_options()("partitions", po::value<std::uint32_t>()->value_name("N"),
                         "number of partitions (default: the broker's, 4)")(
             "replicas", po::value<std::uint32_t>()->value_name("N"),
             "copies of each partition in a cluster (default: min(3, live nodes))")(
             "min-insync", po::value<std::uint32_t>()->value_name("M"),
             "cluster: in-sync replicas a write needs (at most N; default 2 with 3 or more replicas, else 1)")(
             "retention-bytes", po::value<std::uint64_t>()->value_name("B"),
             "keep at most B bytes per partition (default: the broker's retention_bytes)");
       },
       [](detail::session& s, const po::variables_map& vm) {
         client::topic_spec spec;
         spec.name = required(vm, "NAME");
         spec.partitions = vm.count("partitions") ? vm["partitions"].as<std::uint32_t>() : 0;
         if (vm.count("partitions") && spec.partitions == 0) throw usage_error("--partitions must be at least 1");
         spec.replicas = vm.count("replicas") ? vm["replicas"].as<std::uint32_t>() : 0;
         if (vm.count("replicas") && spec.replicas == 0) throw usage_error("--replicas must be at least 1");
         spec.min_insync = vm.count("min-insync") ? vm["min-insync"].as<std::uint32_t>() : 0;
         if (vm.count("min-insync") && spec.min_insync == 0) throw usage_error("--min-insync must be at least 1");
         if (spec.replicas != 0 && spec.min_insync > spec.replicas) {
           throw usage_error("--min-insync must not be more than --replicas: no write could be acknowledged");
         }
         spec.retention_bytes = vm.count("retention-bytes") ? vm["retention-bytes"].as<std::uint64_t>() : 0;
         return detail::topic_create(s, spec);
       }},
      {"topic alter", "topic alter NAME [--min-insync M] [--retention-ms MS] [--retention-bytes B]",
       "change a topic's settings (cluster: every node applies them; single broker: retention only)", {"NAME"},
       [](po::options_description& o) {
         o.add_options()("min-insync", po::value<std::uint32_t>()->value_name("M"),
                         "cluster: in-sync replicas a write needs (1 to the topic's replicas)")(
             "retention-ms", po::value<std::int64_t>()->value_name("MS"),
             "keep messages MS milliseconds (0: the broker's retention)")(
             "retention-bytes", po::value<std::uint64_t>()->value_name("B"),
             "keep at most B bytes per partition (0: the broker's retention_bytes)");
       },
       [](detail::session& s, const po::variables_map& vm) {
         v1::AlterTopicRequest req;
         req.set_name(required(vm, "NAME"));
         if (vm.count("min-insync")) {
           if (vm["min-insync"].as<std::uint32_t>() == 0) throw usage_error("--min-insync must be at least 1");
           req.set_min_insync_replicas(vm["min-insync"].as<std::uint32_t>());
         }
         if (vm.count("retention-ms")) {
           if (vm["retention-ms"].as<std::int64_t>() < 0) throw usage_error("--retention-ms must not be negative");
           req.set_retention_ms(vm["retention-ms"].as<std::int64_t>());
         }
         if (vm.count("retention-bytes")) req.set_retention_bytes(vm["retention-bytes"].as<std::uint64_t>());
         if (!req.has_min_insync_replicas() && !req.has_retention_ms() && !req.has_retention_bytes()) {
           throw usage_error("topic alter: give at least one of --min-insync, --retention-ms, --retention-bytes");
         }
         return detail::topic_alter(s, req);
       }},
      {"cluster status", "cluster status", "nodes, controller, and each partition's leader, epoch, replicas and ISR",
       {}, no_options, [](detail::session& s, const po::variables_map&) { return detail::cluster_status(s); }},
      {"topic list", "topic list", "list topics with their size (a cluster's: each partition's from its leader)", {}, no_options,
       [](detail::session& s, const po::variables_map&) { return detail::topic_list(s); }},
      {"topic describe", "topic describe NAME", "show a topic and its partitions", {"NAME"}, no_options,
       [](detail::session& s, const po::variables_map& vm) { return detail::topic_describe(s, required(vm, "NAME")); }},
      {"produce", "produce TOPIC [--key K] [--header k=v]... [--id ID] [BODY]",
       "send BODY, or one message per stdin line",
       {"TOPIC", "BODY"},
       [](po::options_description& o) {
         o.add_options()("key", po::value<std::string>()->value_name("K"), "ordering key (same key, same partition)")(
             "header", po::value<std::vector<std::string>>()->value_name("k=v"), "application header; repeatable")(
             "id", po::value<std::string>()->value_name("ID"),
             "message id as canonical UUID text (a retry with the same id is stored once); one message only");
       },
       [](detail::session& s, const po::variables_map& vm) {
         detail::produce_args a;
         a.topic = required(vm, "TOPIC");
         if (vm.count("key")) a.key = vm["key"].as<std::string>();
         if (vm.count("header")) {
           for (const auto& h : vm["header"].as<std::vector<std::string>>()) {
             const auto eq = h.find('=');
             if (eq == std::string::npos || eq == 0) throw usage_error("--header wants k=v, got '" + h + "'");
             a.headers[h.substr(0, eq)] = h.substr(eq + 1);
           }
         }
         if (vm.count("id")) {
           const auto& text = vm["id"].as<std::string>();
           auto id = protocol::uuid::parse(text);
           if (!id) throw usage_error("--id: '" + text + "' is not a UUID in canonical text (8-4-4-4-12 hex digits)");
           a.id = id.value();
         }
         if (vm.count("BODY")) a.body = vm["BODY"].as<std::string>();
         return detail::produce(s, a);
       }},
      {"consume", "consume TOPIC --group G [--max N] [--wait MS] [--no-ack]",
       "print and ack the group's messages", {"TOPIC"},
       [](po::options_description& o) {
         o.add_options()("group", po::value<std::string>()->value_name("G"), "consumer group (required)")(
             "max", po::value<std::uint64_t>()->value_name("N"), "stop after N messages (default: no limit)")(
             "wait", po::value<std::uint32_t>()->value_name("MS"), "stop when nothing arrived for MS ms (default 1000)")(
             "no-ack", "do not ack: the messages are redelivered after their ack deadline");
       },
       [](detail::session& s, const po::variables_map& vm) {
         detail::consume_args a;
         a.topic = required(vm, "TOPIC");
         if (!vm.count("group")) throw usage_error("missing --group");
         a.group = vm["group"].as<std::string>();
         if (vm.count("max")) {
           a.max = vm["max"].as<std::uint64_t>();
           if (a.max == 0) throw usage_error("--max must be at least 1");
         }
         if (vm.count("wait")) a.wait = milliseconds(vm["wait"].as<std::uint32_t>());
         a.no_ack = vm.count("no-ack") > 0;
         return detail::consume(s, a);
       }},
      {"group create", "group create G --topic T [--from earliest|latest]",
       "create a consumer group on a topic", {"G"},
       [](po::options_description& o) {
         o.add_options()("topic", po::value<std::string>()->value_name("T"), "topic the group consumes (required)")(
             "from", po::value<std::string>()->value_name("earliest|latest"), "where the group starts (default earliest)");
       },
       [](detail::session& s, const po::variables_map& vm) {
         const auto group = required(vm, "G");
         if (!vm.count("topic")) throw usage_error("missing --topic");
         bool from_latest = false;
         if (vm.count("from")) {
           const auto& from = vm["from"].as<std::string>();
           if (from == "latest") {
             from_latest = true;
           } else if (from != "earliest") {
             throw usage_error("--from wants earliest or latest, got '" + from + "'");
           }
         }
         return detail::group_create(s, group, vm["topic"].as<std::string>(), from_latest);
       }},
      {"group list", "group list", "list consumer groups with their lag", {}, no_options,
       [](detail::session& s, const po::variables_map&) { return detail::group_list(s); }},
      {"group describe", "group describe G",
       "show a group's state per partition", {"G"}, no_options,
       [](detail::session& s, const po::variables_map& vm) { return detail::group_describe(s, required(vm, "G")); }},
      {"dlq list", "dlq list G [--limit N]", "list the group's dead letters", {"G"},
       [](po::options_description& o) {
         o.add_options()("limit", po::value<std::uint32_t>()->value_name("N"), "at most N (default 100; more than the broker's 1,000 a page: the pages are followed)");
       },
       [](detail::session& s, const po::variables_map& vm) {
         const std::uint32_t limit = vm.count("limit") ? vm["limit"].as<std::uint32_t>() : 0;
         return detail::dlq_list(s, required(vm, "G"), limit);
       }},
      {"dlq redrive", "dlq redrive G", "move every dead letter of the group back to delivery", {"G"}, no_options,
       [](detail::session& s, const po::variables_map& vm) { return detail::dlq_redrive(s, required(vm, "G")); }},
      {"tx list", "tx list [--state prepared|abandoned|all] [--topic T]",
       "list transactions (default: the unresolved ones, prepared and abandoned; in a cluster, each from its home partition's leader)", {},
       [](po::options_description& o) {
         o.add_options()("state", po::value<std::string>()->value_name("prepared|abandoned|all"),
                         "only this state; all includes the resolved ones")(
             "topic", po::value<std::string>()->value_name("T"), "only transactions with a message for T");
       },
       [](detail::session& s, const po::variables_map& vm) {
         detail::tx_list_args a;
         if (vm.count("state")) {
           a.state = vm["state"].as<std::string>();
           if (a.state != "prepared" && a.state != "abandoned" && a.state != "all") {
             throw usage_error("--state wants prepared, abandoned or all, got '" + a.state + "'");
           }
         }
         if (vm.count("topic")) a.topic = vm["topic"].as<std::string>();
         return detail::tx_list(s, a);
       }},
      {"tx show", "tx show TXID", "show a transaction and its messages", {"TXID"}, no_options,
       [](detail::session& s, const po::variables_map& vm) { return detail::tx_show(s, txid_arg(vm)); }},
      {"tx commit", "tx commit TXID", "commit a prepared or abandoned transaction (operator decision)", {"TXID"},
       no_options,
       [](detail::session& s, const po::variables_map& vm) { return detail::tx_resolve(s, txid_arg(vm), true); }},
      {"tx rollback", "tx rollback TXID", "roll back a prepared or abandoned transaction (operator decision)",
       {"TXID"}, no_options,
       [](detail::session& s, const po::variables_map& vm) { return detail::tx_resolve(s, txid_arg(vm), false); }},
      {"tx prepare", "tx prepare TOPIC BODY --group PG [--key K]",
       "store a half message, print its txid and exit without ending it", {"TOPIC", "BODY"},
       [](po::options_description& o) {
         o.add_options()("group", po::value<std::string>()->value_name("PG"),
                         "producer group asked to check the transaction back (required)")(
             "key", po::value<std::string>()->value_name("K"), "ordering key");
       },
       [](detail::session& s, const po::variables_map& vm) {
         detail::tx_prepare_args a;
         a.topic = required(vm, "TOPIC");
         a.body = required(vm, "BODY");
         if (!vm.count("group")) throw usage_error("missing --group");
         a.group = vm["group"].as<std::string>();
         if (vm.count("key")) a.key = vm["key"].as<std::string>();
         return detail::tx_prepare(s, a);
       }},
      {"tx checker", "tx checker --group PG (--answer commit|rollback|unknown | --pg CONN)",
       "answer the group's check-backs, fixed or from the barrier table in CONN, until SIGINT or SIGTERM", {},
       [](po::options_description& o) {
         o.add_options()("group", po::value<std::string>()->value_name("PG"), "producer group (required)")(
             "answer", po::value<std::string>()->value_name("commit|rollback|unknown"), "the answer to every check")(
             "pg", po::value<std::string>()->value_name("CONN"), "answer from txmq_tx_barrier in this PostgreSQL database");
       },
       [](detail::session& s, const po::variables_map& vm) -> int {
         if (!vm.count("group")) throw usage_error("missing --group");
         if (vm.count("pg") == vm.count("answer")) throw usage_error("give exactly one of --answer and --pg");
         if (vm.count("pg")) return detail::tx_checker(s, vm["group"].as<std::string>(), "", vm["pg"].as<std::string>());
         const auto answer = vm["answer"].as<std::string>();
         if (answer != "commit" && answer != "rollback" && answer != "unknown") {
           throw usage_error("--answer wants commit, rollback or unknown, got '" + answer + "'");
         }
         return detail::tx_checker(s, vm["group"].as<std::string>(), answer, "");
       }},
      {"outbox init", "outbox init --pg CONN [--shards N]",
       "create or migrate the outbox, barrier, inbox and relay tables in a PostgreSQL database", {},
       [](po::options_description& o) {
         o.add_options()("pg", po::value<std::string>()->value_name("CONN"), "libpq connection string or URI (required)")(
             "shards", po::value<int>()->value_name("N"), "outbox shards, 1..1024 (default 16)");
       },
       [](detail::session& s, const po::variables_map& vm) {
         const int shards = vm.count("shards") ? vm["shards"].as<int>() : 0;  // 0: the schema's default
         if (vm.count("shards") && (shards < 1 || shards > 1024)) throw usage_error("--shards must be between 1 and 1024");
         return detail::outbox_init(s, required(vm, "pg"), shards);
       }},
      {"outbox status", "outbox status --pg CONN", "rows waiting per shard, oldest age, relays holding shards", {},
       [](po::options_description& o) {
         o.add_options()("pg", po::value<std::string>()->value_name("CONN"), "libpq connection string or URI (required)");
       },
       [](detail::session& s, const po::variables_map& vm) { return detail::outbox_status(s, required(vm, "pg")); }},
      {"webhook create",
       "webhook create TOPIC --url URL [--secret S] [--schedule 15s,15s,...] [--timeout 5s] [--key K] [--header k=v]...",
       "notify URL of each message of TOPIC (signed, retried on the schedule)", {"TOPIC"},
       detail::webhook_create_options, detail::webhook_create},
      {"webhook list", "webhook list", "list webhook subscriptions with backlog and exhausted messages", {}, no_options,
       detail::webhook_list},
      {"webhook delete", "webhook delete ID", "delete a webhook subscription", {"ID"}, no_options, detail::webhook_delete},
      {"webhook attempts", "webhook attempts ID [--message MSGID]", "the attempt log of a webhook subscription", {"ID"},
       detail::webhook_attempts_options, detail::webhook_attempts},
      {"webhook replay", "webhook replay ID --since TIME", "send the messages published since TIME once more", {"ID"},
       detail::webhook_replay_options, detail::webhook_replay},
      {"principal create", "principal create NAME", "create a principal and print its token (shown only this once)",
       {"NAME"}, no_options,
       [](detail::session& s, const po::variables_map& vm) { return detail::principal_create(s, required(vm, "NAME")); }},
      {"principal list", "principal list", "list principals (never their tokens)", {}, no_options,
       [](detail::session& s, const po::variables_map&) { return detail::principal_list(s); }},
      {"principal delete", "principal delete NAME", "delete a principal and its grants; closes its connections",
       {"NAME"}, no_options,
       [](detail::session& s, const po::variables_map& vm) { return detail::principal_delete(s, required(vm, "NAME")); }},
      {"acl grant", "acl grant PRINCIPAL PERMISSION RESOURCE",
       "grant produce|consume|transact|admin on topic:N|group:N|producer-group:N|cluster (N* = prefix)",
       {"PRINCIPAL", "PERMISSION", "RESOURCE"}, no_options,
       [](detail::session& s, const po::variables_map& vm) {
         return detail::acl_change(s, true, required(vm, "PRINCIPAL"), required(vm, "PERMISSION"),
                                   required(vm, "RESOURCE"));
       }},
      {"acl revoke", "acl revoke PRINCIPAL PERMISSION RESOURCE", "remove a grant", {"PRINCIPAL", "PERMISSION", "RESOURCE"},
       no_options,
       [](detail::session& s, const po::variables_map& vm) {
         return detail::acl_change(s, false, required(vm, "PRINCIPAL"), required(vm, "PERMISSION"),
                                   required(vm, "RESOURCE"));
       }},
      {"acl list", "acl list [PRINCIPAL]", "list grants (of one principal)", {"PRINCIPAL"}, no_options,
       [](detail::session& s, const po::variables_map& vm) {
         return detail::acl_list(s, vm.count("PRINCIPAL") ? vm["PRINCIPAL"].as<std::string>() : std::string());
       }},
      {"webhook rotate-secret", "webhook rotate-secret ID [--secret S] [--grace D]",
       "sign with a new secret; the old one keeps signing for the grace period", {"ID"}, detail::webhook_rotate_options,
       detail::webhook_rotate},
  };
  return k_commands;
}

bool is_command_family(const std::string& word) { return word == "topic" || word == "group" || word == "dlq" || word == "tx" || word == "outbox" || word == "webhook" || word == "principal" || word == "acl" || word == "cluster"; }

// without_timeout: the command has a --timeout of its own (webhook create), which wins.
po::options_description global_options(bool without_timeout = false) {
  po::options_description o("Global options");
  o.add_options()("broker", po::value<std::string>()->value_name("HOST:PORT"),
                  "broker address, or a cluster's bootstrap list HOST:PORT,HOST:PORT (default: $TXMQ_BROKER, else "
                  "127.0.0.1:7878)")(
      "token", po::value<std::string>()->value_name("TOKEN"),
      "principal's token for a broker with auth (default: $TXMQ_TOKEN); visible in ps, prefer --token-file")(
      "token-file", po::value<std::string>()->value_name("FILE"), "read the token from FILE")(
      "json", "one JSON object per line instead of tables");
  if (!without_timeout) {
    o.add_options()("timeout", po::value<std::uint32_t>()->value_name("MS"),
                    "per request, and for produce per message (default 10000)");
  }
  o.add_options()(
      "connect-timeout", po::value<std::uint32_t>()->value_name("MS"), "to reach the broker (default 3000)")(
      "help,h", "show help (also: txmq COMMAND --help)");
  client::add_tls_flags(o);
  return o;
}

constexpr const char* k_short_usage =
    "usage: txmq [--broker HOST:PORT] [--json] COMMAND [ARGS]\nTry 'txmq --help'.\n";

bool takes_value(const std::string& token) {
  return token == "--broker" || token == "--timeout" || token == "--connect-timeout" || token == "--token" ||
         token == "--token-file" || client::is_tls_flag_with_value(token);
}

std::string general_usage() {
  std::ostringstream out;
  out << "usage: txmq [--broker HOST:PORT] [--json] COMMAND [ARGS]\n\n"
         "Administer and inspect a txmq broker.\n\nCommands:\n";
  std::size_t width = 0;
  for (const auto& c : commands()) width = std::max(width, c.synopsis.size());
  for (const auto& c : commands()) {
    out << "  " << c.synopsis << std::string(width - c.synopsis.size() + 2, ' ') << c.summary << '\n';
  }
  out << "\n" << global_options() << "\nExit status: 0 ok, 1 error, 2 usage error.\n";
  return out.str();
}

std::string family_usage(const std::string& family) {
  std::ostringstream out;
  out << "usage:\n";
  for (const auto& c : commands()) {
    if (c.name.starts_with(family + " ")) out << "  txmq " << c.synopsis << '\n';
  }
  return out.str();
}

// `txmq tx --help`: the family's commands with what each does, and where their options are.
std::string family_help(const std::string& family) {
  std::ostringstream out;
  out << "usage: txmq " << family << " SUBCOMMAND [ARGS]\n\nSubcommands:\n";
  std::size_t width = 0;
  for (const auto& c : commands()) {
    if (c.name.starts_with(family + " ")) width = std::max(width, c.synopsis.size());
  }
  for (const auto& c : commands()) {
    if (!c.name.starts_with(family + " ")) continue;
    out << "  txmq " << c.synopsis << std::string(width - c.synopsis.size() + 2, ' ') << c.summary << '\n';
  }
  out << "\n'txmq " << family << " SUBCOMMAND --help' lists the options of one; 'txmq --help' the global ones.\n";
  return out.str();
}

po::options_description command_options(const command& c) {
  po::options_description o("Options");
  c.add_options(o);
  return o;
}

std::string command_help(const command& c) {
  std::ostringstream out;
  out << "usage: txmq " << c.synopsis << "\n\n" << c.summary << ".\n\n";
  auto o = command_options(c);
  if (!o.options().empty()) out << o << '\n';
  out << global_options();
  return out.str();
}

// The man page and the completion, from the same tables as the parsing and --help above.
common::manual::page manual_page() {
  namespace manual = common::manual;
  manual::page p;
  p.program = "txmq";
  p.summary = "administer and inspect a txmq broker";
  p.synopsis = {"[--broker HOST:PORT] [--json] COMMAND [ARGS]", "COMMAND --help"};
  p.description =
      "txmq talks to a txmq broker over its wire protocol: topics, producing and consuming, consumer groups and "
      "their dead letters, transactions (list, show, operator commit and rollback), the PostgreSQL outbox, "
      "webhooks, principals and ACLs.\n\n"
      "Global options may come before or after the command. Output is a table, or one JSON object per line with "
      "--json. Ids are canonical UUID text; bodies and keys are text when valid UTF-8, else base64 (body_base64 "
      "in JSON, base64:... in tables).";
  for (const auto& c : commands()) {
    p.commands.push_back({c.name, c.synopsis, c.summary, manual::options_of(command_options(c))});
  }
  p.options_title = "GLOBAL OPTIONS";
  p.options = manual::options_of(global_options());
  p.sections = {
      {"EXIT STATUS", "0 the command succeeded.\n\n1 an operation failed: one line on standard error, txmq: "
                      "<what failed>: <CODE: the broker's message>.\n\n2 a usage error: the problem and a short "
                      "usage on standard error."},
      {"ENVIRONMENT", "TXMQ_BROKER: the broker address when --broker is not given (default 127.0.0.1:7878).\n\n"
                      "TXMQ_TOKEN: the principal's token when neither --token nor --token-file is given."},
      {"SEE ALSO", "txmq-broker(1), txmq-relay(1); cli/README.md, docs/semantics.md and "
                   "docs/security.md in the txmq sources."},
  };
#ifdef TXMQ_VERSION
  p.version = TXMQ_VERSION;
#endif
  return p;
}

int usage(environment& env, const std::string& problem, const std::string& text) {
  env.err << "txmq: " << problem << '\n' << text;
  env.err.flush();
  return exit_usage;
}

int run_checked(const std::vector<std::string>& args, environment& env) {
  // The command words are the first one or two arguments that are not options (or values of
  // the global options); every other argument goes to the command's parser in order, so that
  // global options may come before or after the command.
  // Build-time outputs (cli/CMakeLists.txt installs them), not commands.
  if (args.size() == 1 && args[0] == "--man-page") {
    env.out << common::manual::to_roff(manual_page());
    return exit_ok;
  }
  if (args.size() == 1 && args[0] == "--bash-completion") {
    env.out << common::manual::to_bash_completion(manual_page());
    return exit_ok;
  }
  std::vector<std::string> words;
  std::vector<std::string> rest;
  bool help = false;
  bool options_ended = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (options_ended) {
      rest.push_back(a);
      continue;
    }
    if (a == "--") {
      options_ended = true;
      rest.push_back(a);
      continue;
    }
    if (a == "--help" || a == "-h") {
      help = true;
      continue;
    }
    const bool is_option = a.size() > 1 && a[0] == '-';
    if (!is_option && (words.empty() || (words.size() == 1 && is_command_family(words[0])))) {
      words.push_back(a);
      continue;
    }
    rest.push_back(a);
    if (takes_value(a) && i + 1 < args.size()) rest.push_back(args[++i]);
  }

  if (words.empty()) {
    if (help) {
      env.out << general_usage();
      return exit_ok;
    }
    // Options without a command: let the global parser name a bad one, else ask for a command.
    return usage(env, rest.empty() ? "no command given" : "no command given (only options: " + rest.front() + " ...)",
                 k_short_usage);
  }
  if (words.size() == 1 && is_command_family(words[0])) {
    if (help) {
      env.out << family_help(words[0]);
      return exit_ok;
    }
    return usage(env, "'" + words[0] + "' wants a subcommand", family_usage(words[0]));
  }
  const std::string name = words.size() == 1 ? words[0] : words[0] + " " + words[1];
  const command* cmd = nullptr;
  for (const auto& c : commands()) {
    if (c.name == name) cmd = &c;
  }
  if (cmd == nullptr) {
    if (words.size() == 2) return usage(env, "unknown command '" + name + "'", family_usage(words[0]));
    return usage(env, "unknown command '" + name + "'", k_short_usage);
  }
  if (help) {
    env.out << command_help(*cmd);
    return exit_ok;
  }

  const std::string short_usage = "usage: txmq " + cmd->synopsis + "\nTry 'txmq " + cmd->name + " --help'.\n";
  try {
    po::options_description all;
    const auto own = command_options(*cmd);
    const bool own_timeout = own.find_nothrow("timeout", false) != nullptr;
    all.add(global_options(own_timeout)).add(own);
    po::options_description hidden;
    po::positional_options_description positional;
    for (const auto& p : cmd->positionals) {
      hidden.add_options()(p.c_str(), po::value<std::string>());
      positional.add(p.c_str(), 1);
    }
    all.add(hidden);
    po::variables_map vm;
    po::store(po::command_line_parser(rest).options(all).positional(positional).run(), vm);
    po::notify(vm);

    std::string broker(client::default_broker_address);
    if (auto e = env.getenv ? env.getenv("TXMQ_BROKER") : std::nullopt; e && !e->empty()) broker = *e;
    if (vm.count("broker")) broker = vm["broker"].as<std::string>();
    // One address, or a bootstrap list of a cluster's brokers (HOST:PORT,HOST:PORT).
    if (auto parsed = client::parse_bootstrap_list(broker); !parsed) {
      throw usage_error("broker address: " + parsed.error().message);
    }
    const auto timeout = milliseconds(vm.count("timeout") && !own_timeout ? vm["timeout"].as<std::uint32_t>() : 10000);
    const auto connect_timeout = milliseconds(vm.count("connect-timeout") ? vm["connect-timeout"].as<std::uint32_t>() : 3000);
    if (timeout.count() == 0 || connect_timeout.count() == 0) throw usage_error("timeouts must be at least 1 ms");

    auto token = client::resolve_token(
        vm.count("token") ? std::optional<std::string>(vm["token"].as<std::string>()) : std::nullopt,
        vm.count("token-file") ? std::optional<std::string>(vm["token-file"].as<std::string>()) : std::nullopt,
        env.getenv);
    if (!token) {
      if (token.error().message.starts_with("give either")) throw usage_error(token.error().message);
      env.err << "txmq: " << token.error().message << '\n';
      return exit_failure;
    }

    detail::session s(env, vm.count("json") > 0, broker, connect_timeout, timeout, std::move(token.value()),
                      client::tls_options_from(vm));
    return cmd->execute(s, vm);
  } catch (const usage_error& e) {
    return usage(env, e.what(), short_usage);
  } catch (const po::too_many_positional_options_error&) {
    return usage(env, "too many arguments", short_usage);
  } catch (const po::error& e) {
    return usage(env, e.what(), short_usage);
  }
}

}  // namespace

int run(const std::vector<std::string>& args, environment& env) {
  try {
    return run_checked(args, env);
  } catch (const std::exception& e) {
    // Not expected: the client libraries report failures as values. Still a clean exit.
    env.err << "txmq: internal error: " << e.what() << '\n';
    return exit_failure;
  }
}

}  // namespace txmq::cli
