// txmq-relay: parses the flags, serves /healthz and /metrics, runs the relay until SIGINT or
// SIGTERM (then finishes the batch in flight, releases its shards and exits 0).

#include <signal.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <mutex>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/program_options.hpp>

#include "txmq/broker/admin_http.h"
#include "txmq/relay/relay.h"

namespace po = boost::program_options;

namespace {

std::chrono::milliseconds parse_duration(const std::string& text) {
  // 500ms, 1s, 2m: the broker's duration form.
  std::size_t end = 0;
  const long long n = std::stoll(text, &end);
  const std::string unit = text.substr(end);
  if (unit == "ms") return std::chrono::milliseconds(n);
  if (unit == "s" || unit.empty()) return std::chrono::seconds(n);
  if (unit == "m") return std::chrono::minutes(n);
  throw std::invalid_argument("a duration like 500ms, 1s or 2m, not '" + text + "'");
}

std::mutex log_mutex;

void log_line(txmq::relay::log_level level, std::string_view text) {
  const auto now = std::chrono::system_clock::now();
  const auto t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  const char* name = level == txmq::relay::log_level::error ? "ERROR" : level == txmq::relay::log_level::warn ? "WARN " : "INFO ";
  std::lock_guard lock(log_mutex);
  std::cerr << stamp << '.' << (ms < 100 ? (ms < 10 ? "00" : "0") : "") << ms << "Z " << name << ' ' << text << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  txmq::relay::relay_options o;
  std::string poll = "1s", http = "127.0.0.1:7880", publish_timeout = "10s";
  po::options_description desc("usage: txmq-relay --pg CONN --broker HOST:PORT [options]\n\nOptions");
  desc.add_options()("help,h", "this help")(
      "pg", po::value(&o.conninfo), "libpq connection string or URI of the database with the outbox (required)")(
      "broker", po::value(&o.broker)->default_value(o.broker), "txmq broker HOST:PORT")(
      "shards", po::value(&o.shards)->default_value(0), "outbox shards (0 = txmq_schema.shards, as `txmq outbox init` set)")(
      "batch", po::value(&o.batch)->default_value(o.batch), "rows per shard per round (read, publish, delete)")(
      "publishers", po::value(&o.publishers)->default_value(o.publishers),
      "broker connections publishing at once (a shard always uses the same one)")(
      "poll-interval", po::value(&poll)->default_value(poll), "read owned shards at least this often (NOTIFY wakes sooner)")(
      "publish-timeout", po::value(&publish_timeout)->default_value(publish_timeout),
      "how long a batch waits for the broker's acks before it is retried")(
      "http", po::value(&http)->default_value(http), "admin HTTP HOST:PORT for /healthz and /metrics (port 0: any)")(
      "relay-id", po::value(&o.relay_id), "name in txmq_relay and pg_stat_activity (default host:pid)");
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << desc << '\n';
      return 0;
    }
    if (o.conninfo.empty()) throw std::invalid_argument("--pg is required");
    o.poll_interval = parse_duration(poll);
    o.rebalance_interval = std::min(o.poll_interval, std::chrono::milliseconds(1000));
    o.publish_timeout = parse_duration(publish_timeout);
    if (o.batch < 1 || o.batch > 100000) throw std::invalid_argument("--batch must be between 1 and 100000");
    if (o.publishers < 1 || o.publishers > 64) throw std::invalid_argument("--publishers must be between 1 and 64");
    if (o.shards < 0 || o.shards > 1024) throw std::invalid_argument("--shards must be between 0 and 1024");
  } catch (const std::exception& e) {
    std::cerr << "txmq-relay: " << e.what() << "\n(txmq-relay --help lists the flags)\n";
    return 2;
  }

  // Signals are taken by sigwait on one thread, never delivered to a thread that happens to run.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  txmq::broker::metrics_registry metrics;
  o.metrics = &metrics;
  o.log = log_line;
  txmq::relay::relay relay(o);

  boost::asio::io_context io;
  txmq::broker::admin_http_server server(io, metrics);
  server.set_health_check([&relay] {
    const auto st = relay.status();
    if (!st.database_up) return txmq::broker::health_status{false, "PostgreSQL unavailable: " + st.last_error};
    if (!st.broker_up) return txmq::broker::health_status{false, "broker unavailable: " + st.last_error};
    return txmq::broker::health_status{};
  });
  const auto colon = http.rfind(':');
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(http.substr(0, colon == std::string::npos ? 0 : colon), ec);
  if (colon == std::string::npos || ec) {
    std::cerr << "txmq-relay: --http wants HOST:PORT with a numeric host, not '" << http << "'\n";
    return 2;
  }
  auto bound = server.start({address, static_cast<unsigned short>(std::stoi(http.substr(colon + 1)))});
  if (!bound) {
    std::cerr << "txmq-relay: " << bound.error().message << '\n';
    return 1;
  }
  // Tests and scripts read the port from this line when they asked for port 0.
  log_line(txmq::relay::log_level::info, "admin HTTP on " + bound.value().address().to_string() + ":" +
                                             std::to_string(bound.value().port()));
  std::thread http_thread([&io] { io.run(); });
  std::thread signal_thread([&relay, &signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    log_line(txmq::relay::log_level::info, sig == SIGINT ? "received SIGINT, stopping" : "received SIGTERM, stopping");
    relay.stop();
  });

  auto ran = relay.run();
  server.stop();
  io.stop();
  http_thread.join();
  if (!ran) {
    log_line(txmq::relay::log_level::error, ran.error().to_string());
    pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
    return 1;
  }
  signal_thread.join();
  return 0;
}
