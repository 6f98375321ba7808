// txmq-relay: parses the flags, serves /healthz and /metrics, runs the relay until SIGINT or
// SIGTERM (then finishes the batch in flight, releases its shards and exits 0).

#include <pthread.h>

#include <iostream>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "txmq/common/admin_http.h"
#include "txmq/common/crash_report.h"
#include "txmq/common/log.h"
#include "txmq/common/metrics.h"
#include "txmq/common/signals.h"
#include "txmq/relay/options.h"
#include "txmq/relay/relay.h"

int main(int argc, char** argv) {
  namespace common = txmq::common;
  namespace log = txmq::common::log;
  auto parsed = txmq::relay::parse_relay_options(argc, argv);
  if (!parsed) {
    std::cerr << "txmq-relay: " << parsed.error().message << "\n(txmq-relay --help lists the flags)\n";
    return 2;
  }
  auto& command = parsed.value();
  if (command.exit_text) {
    std::cout << *command.exit_text;
    return 0;
  }
  log::set_level(command.log_level);
  // A fault or an abort leaves a report on stderr (signal, stack, last log lines).
  common::install_crash_report("txmq-relay");
  // Before any thread starts, so that every thread inherits the mask.
  const auto stop_signals = common::block_stop_signals();

  common::metrics_registry metrics;
  auto& o = command.relay;
  o.metrics = &metrics;
  o.log = [](log::level l, std::string_view text) {
    if (log::enabled(l)) log::write(l, text);
  };
  txmq::relay::relay relay(o);

  boost::asio::io_context io;
  common::admin_http_server server(io, metrics);
  server.set_health_check([&relay] {
    const auto st = relay.status();
    if (auto pg = txmq::relay::relay_pg_health(st); !pg.healthy) return common::health_status{false, pg.reason};
    if (!st.broker_up) return common::health_status{false, "broker unavailable: " + st.last_error};
    return common::health_status{};
  });
  auto bound = server.start(command.http_endpoint);
  if (!bound) {
    std::cerr << "txmq-relay: " << bound.error().message << '\n';
    return 1;
  }
  // Tests and scripts read the port from this line when they asked for port 0.
  log::info("admin HTTP on ", bound.value().address().to_string(), ":", bound.value().port());
  std::thread http_thread([&io] { io.run(); });
  std::thread signal_thread([&relay, &stop_signals] {
    const auto sig = common::wait_for_stop_signal(stop_signals);
    log::info("received ", common::to_string(sig), ", stopping");
    relay.stop();
  });

  auto ran = relay.run();
  server.stop();
  io.stop();
  http_thread.join();
  if (!ran) {
    log::error(ran.error().to_string());
    // Wakes the signal thread as a SIGTERM would, so that it can be joined.
    pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
    return 1;
  }
  signal_thread.join();
  return 0;
}
