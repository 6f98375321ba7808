// txmq-bench: load generator for txmq. `txmq-bench storage --help` for the storage workload.

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>

#include "txmq/client/tls_flags.h"

#include "peers/system_under_test.h"
#include "report.h"
#include "support/latency.h"
#include "support/options.h"
#include "workloads/broker_bench.h"
#include "workloads/http_bench.h"
#include "workloads/relay_bench.h"
#include "workloads/storage_bench.h"
#include "workloads/tx_bench.h"
#include "workloads/webhook_bench.h"
#include "support/token_options.h"

namespace po = boost::program_options;

namespace {

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  if (out.empty()) throw std::invalid_argument("empty list");
  return out;
}

int storage_command(int argc, char** argv) {
  txmq::bench::storage_bench_options o;
  std::string writers = "1,16,256", seconds = "5", warmup = "1", dir = "bench-data";
  po::options_description desc("txmq-bench storage [options]");
  desc.add_options()("help,h", "this help")
    ("writers", po::value(&writers)->default_value(writers), "appends in flight, comma-separated list")
    ("seconds", po::value(&seconds)->default_value(seconds), "measured time per run")
    ("warmup", po::value(&warmup)->default_value(warmup), "unmeasured time before each run")
    ("runs", po::value(&o.runs)->default_value(o.runs), "runs per writer count (medians are reported)")
    ("message-bytes", po::value(&o.message_bytes)->default_value(o.message_bytes), "message body size")
    ("messages-per-append", po::value(&o.messages_per_append)->default_value(o.messages_per_append), "messages per append request")
    ("partitions", po::value(&o.partitions)->default_value(o.partitions), "partitions of the topic")
    ("dir", po::value(&dir)->default_value(dir), "where the stores are made (the disk under test)")
    ("json", po::bool_switch(&o.json), "JSON lines instead of a table");
  po::variables_map vm;
  if (!txmq::bench::parse_options(argc, argv, desc, vm)) return 0;
  o.writers = parse_list(writers);
  o.seconds = std::chrono::duration<double>(txmq::bench::parse_seconds(seconds)).count();
  o.warmup = std::chrono::duration<double>(txmq::bench::parse_seconds(warmup)).count();
  o.dir = dir;
  return txmq::bench::run_storage_bench(o);
}

int broker_command(const std::string& workload, int argc, char** argv) {
  txmq::bench::broker_bench_options o;
  o.workload = workload;
  std::string seconds = "5", warmup = "1", systems, pids;
  for (const auto& n : txmq::bench::known_systems()) systems += (systems.empty() ? "" : ", ") + n;
  po::options_description desc("txmq-bench " + workload + " [options]");
  desc.add_options()("help,h", "this help")
    ("system", po::value(&o.system)->default_value(o.system), ("system under test: " + systems).c_str())
    ("label", po::value(&o.label), "name printed for the system (default: --system), to tell variants apart")
    ("broker", po::value(&o.address)->default_value(o.address),
     "HOST:PORT of the broker (txmq, RabbitMQ, NATS), or a libpq connection string (pgqueue)")
    ("topic", po::value(&o.topic)->default_value(o.topic), "prefix of the topic/queue/stream/table made for each run")
    ("partitions", po::value(&o.partitions)->default_value(o.partitions), "partitions of a new txmq topic")
    ("message-bytes", po::value(&o.message_bytes)->default_value(o.message_bytes), "message body size")
    ("random-bodies", po::bool_switch(&o.random_bodies), "bodies of random bytes (incompressible) instead of one repeated byte")
    ("in-flight", po::value(&o.in_flight)->default_value(o.in_flight), "publish, consume: messages in flight")
    ("batch", po::value(&o.batch)->default_value(o.batch), "publish: messages per request")
    ("rate", po::value(&o.rate)->default_value(o.rate), "rate, e2e: messages per second")
    ("backlog", po::value(&o.backlog)->default_value(o.backlog), "consume, fill: messages to fill (and consume)")
    ("seconds", po::value(&seconds)->default_value(seconds), "measured time per run")
    ("warmup", po::value(&warmup)->default_value(warmup), "unmeasured time before each run")
    ("runs", po::value(&o.runs)->default_value(o.runs), "runs (medians are reported)")
    ("replicas", po::value(&o.replicas)->default_value(o.replicas),
     "txmq cluster: replicas of each run's topic (0: the broker's default, min(3, live nodes))")
    ("broker-pid", po::value(&pids),
     "PID[,PID...]: report these processes' (and their children's) memory and CPU time, summed (every broker of a cluster)")
    ("json", po::bool_switch(&o.json), "one JSON line instead of a table")
    ("latency-log", po::value(&o.latency_log),
     "rate, e2e: write each measured message's send time (steady clock ns) and latency (ns) to this file");
  txmq::client::add_tls_flags(desc);
  txmq::bench::add_token_options(desc);
  po::variables_map vm;
  if (!txmq::bench::parse_options(argc, argv, desc, vm)) return 0;
  o.tls = txmq::client::tls_options_from(vm);
  o.seconds = std::chrono::duration<double>(txmq::bench::parse_seconds(seconds)).count();
  o.warmup = std::chrono::duration<double>(txmq::bench::parse_seconds(warmup)).count();
  o.auth_token = txmq::bench::token_option(vm);
  for (std::size_t at = 0; at < pids.size();) {
    const auto comma = std::min(pids.find(',', at), pids.size());
    const auto one = pids.substr(at, comma - at);
    try {
      if (!one.empty()) o.broker_pids.push_back(std::stoi(one));
    } catch (const std::exception&) {
      std::fprintf(stderr, "txmq-bench: --broker-pid: '%s' is not a process id\n", one.c_str());
      return 2;
    }
    at = comma + 1;
  }
  return txmq::bench::run_broker_bench(o);
}

int report_command(int argc, char** argv) {
  txmq::bench::report_options o;
  po::options_description desc("txmq-bench report [options] FILE...");
  desc.add_options()("help,h", "this help")
    ("input", po::value(&o.inputs)->multitoken(), "files of JSON lines (txmq-bench ... --json)")
    ("markdown", po::value(&o.markdown)->default_value("-"), "where the Markdown tables go (- = stdout)")
    ("plot-data", po::value(&o.plot_data), "where the gnuplot data go");
  if (txmq::bench::describe_sink() != nullptr) {
    txmq::bench::describe_workload("report", "", desc);
    return 0;
  }
  po::positional_options_description positional;
  positional.add("input", -1);
  po::variables_map vm;
  po::store(po::command_line_parser(argc, argv).options(desc).positional(positional).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  return txmq::bench::run_report(o);
}

int http_command(int argc, char** argv) {
  txmq::bench::http_bench_options o;
  std::string seconds = "5", warmup = "1";
  po::options_description desc("txmq-bench http-publish [options]");
  desc.add_options()("help,h", "this help")
    ("broker", po::value(&o.broker)->default_value(o.broker), "HOST:PORT of the broker's wire protocol")
    ("http", po::value(&o.http)->default_value(o.http), "HOST:PORT of the broker's admin HTTP port")
    ("topic", po::value(&o.topic)->default_value(o.topic), "topic to produce to (auto-created)")
    ("batch", po::value(&o.batch)->default_value(o.batch), "messages per request")
    ("concurrency", po::value(&o.concurrency)->default_value(o.concurrency), "requests in flight")
    ("message-bytes", po::value(&o.message_bytes)->default_value(o.message_bytes), "message body size")
    ("seconds", po::value(&seconds)->default_value(seconds), "measured time per protocol")
    ("warmup", po::value(&warmup)->default_value(warmup), "unmeasured time before each")
    ("json", po::bool_switch(&o.json), "JSON lines instead of a table");
  po::variables_map vm;
  if (!txmq::bench::parse_options(argc, argv, desc, vm)) return 0;
  o.seconds = std::chrono::duration<double>(txmq::bench::parse_seconds(seconds)).count();
  o.warmup = std::chrono::duration<double>(txmq::bench::parse_seconds(warmup)).count();
  return txmq::bench::run_http_bench(o);
}

// The workloads in the order of the usage text, with what each measures.
struct workload {
  const char* name;
  const char* summary;
};
constexpr workload k_workloads[] = {
    {"storage", "the store alone: appends per second and latency"},
    {"publish", "publish with N messages in flight"},
    {"rate", "steady publish rate: latency"},
    {"e2e", "publish and consume: end-to-end latency"},
    {"consume", "consume a backlog with acks"},
    {"fill", "store a backlog"},
    {"report", "Markdown tables (and gnuplot data) from the JSON lines of runs"},
    {"relay", "outbox relay vs. straight to the broker: backlog rows/s, commit-to-consume latency"},
    {"webhook", "signed webhooks to a local receiver: deliveries/s, commit-to-first-attempt"},
    {"tx", "transactional messages: noop, with PostgreSQL beside pgbench, recovery of orphans"},
    {"http-publish", "produce over the HTTP/JSON API beside the wire protocol, same run"},
};

int run_workload(const std::string& command, int argc, char** argv);

// txmq-bench --man-page / --bash-completion: each workload is called without arguments while
// describe_sink() is set, and records the options table it parses with.
txmq::common::manual::page manual_page() {
  std::vector<txmq::common::manual::command> commands;
  txmq::bench::describe_sink() = &commands;
  for (const auto& w : k_workloads) {
    std::string name = w.name;
    char* args[] = {name.data(), nullptr};
    const std::size_t before = commands.size();
    (void)run_workload(name, 1, args);
    if (commands.size() > before) {
      auto& c = commands.back();
      c.summary = w.summary + (c.summary.empty() ? std::string() : c.summary);
    }
  }
  txmq::bench::describe_sink() = nullptr;
  txmq::common::manual::page p;
  p.program = "txmq-bench";
  p.summary = "load generator for txmq and its peers";
  p.synopsis = {"WORKLOAD [OPTIONS]", "WORKLOAD --help"};
  p.description =
      "txmq-bench measures the store, the broker (and RabbitMQ, NATS JetStream or PostgreSQL as a queue with "
      "--system), the outbox relay, webhooks, transactional messages and the HTTP/JSON API. Each workload prints "
      "a table, or JSON lines with --json, which txmq-bench report turns into Markdown tables.";
  p.commands = std::move(commands);
  p.sections = {
      {"EXIT STATUS", "0 the run finished.\n\n1 the run failed.\n\n2 a bad workload or option."},
      {"SEE ALSO", "txmq(1), txmq-broker(1), txmq-relay(1); bench/README.md and docs/BENCHMARKS.md in the txmq "
                   "sources."},
  };
#ifdef TXMQ_VERSION
  p.version = TXMQ_VERSION;
#endif
  return p;
}

int run_workload(const std::string& command, int argc, char** argv) {
  if (command == "storage") return storage_command(argc, argv);
  if (command == "report") return report_command(argc, argv);
  if (command == "relay") return txmq::bench::relay_command(argc, argv);
  if (command == "tx") return txmq::bench::tx_command(argc, argv);
  if (command == "webhook") return txmq::bench::webhook_command(argc, argv);
  if (command == "http-publish") return http_command(argc, argv);
  if (command == "publish" || command == "rate" || command == "e2e" || command == "consume" || command == "fill") {
    return broker_command(command, argc, argv);
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage =
      "usage: txmq-bench WORKLOAD [options]   (txmq-bench WORKLOAD --help)\n"
      "workloads: storage (the store alone), publish (N in flight), rate (steady publish latency),\n"
      "           e2e (publish + consume latency), consume (backlog with acks), fill (store a backlog),\n"
      "           report (tables from JSON lines); --system picks txmq or a peer\n"
      "           relay (outbox relay vs. straight to the broker: backlog rows/s, commit-to-consume latency)\n"
      "           webhook (signed webhooks to a local receiver: deliveries/s, commit-to-first-attempt)\n"
      "           tx (transactional messages: noop / with PostgreSQL beside pgbench / recovery of orphans)\n"
      "           http-publish (produce over the HTTP/JSON API beside the wire protocol, same run)\n";
  if (argc < 2) {
    std::cerr << usage;
    return 2;
  }
  const std::string command = argv[1];
  try {
    if (const int status = run_workload(command, argc - 1, argv + 1); status != -1) return status;
    if (argc == 2 && command == "--man-page") {
      std::cout << txmq::common::manual::to_roff(manual_page());
      return 0;
    }
    if (argc == 2 && command == "--bash-completion") {
      std::cout << txmq::common::manual::to_bash_completion(manual_page());
      return 0;
    }
    if (command == "--help" || command == "-h") {
      std::cout << usage;
      return 0;
    }
    std::cerr << "txmq-bench: unknown workload '" << command << "'\n" << usage;
    return 2;
  } catch (const po::error& e) {
    std::cerr << "txmq-bench: " << e.what() << "\nTry 'txmq-bench " << command << " --help'.\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "txmq-bench: " << e.what() << "\n";
    return 1;
  }
}
