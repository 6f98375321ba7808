// txmq-broker: parses the configuration, starts the broker, stops it on SIGINT or SIGTERM.

#include <signal.h>

#include <iostream>

#include "log.h"
#include "txmq/broker/broker.h"
#include "txmq/broker/config.h"

int main(int argc, char** argv) {
  using namespace txmq::broker;
  auto parsed = parse_broker_config(argc, argv);
  if (!parsed) {
    std::cerr << "txmq-broker: " << parsed.error().message << "\n(txmq-broker --help lists the settings)\n";
    return 2;
  }
  if (parsed.value().exit_text) {
    std::cout << *parsed.value().exit_text;
    return 0;
  }
  const auto& config = parsed.value().config;
  const std::string& lvl = config.log_level;
  log::set_level(lvl == "debug" || lvl == "trace" ? log::level::debug
                 : lvl == "warn"                  ? log::level::warn
                 : lvl == "error"                 ? log::level::error
                                                  : log::level::info);

  // Signals are taken by sigwait below, never delivered to a thread that happens to run.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  log::info("starting with settings:\n", describe(config));
  auto b = broker::start(config);
  if (!b) {
    log::error("cannot start: ", b.error().message);
    return 1;
  }
  int sig = 0;
  sigwait(&signals, &sig);
  log::info("received ", sig == SIGINT ? "SIGINT" : "SIGTERM", ", shutting down");
  b.value()->stop();
  return 0;
}
