// txmq-broker: parses the configuration, starts the broker, reloads its TLS certificate on
// SIGHUP, stops it on SIGINT or SIGTERM.

#include <iostream>

#include "txmq/broker/broker.h"
#include "txmq/broker/config.h"
#include "txmq/common/crash_report.h"
#include "txmq/common/log.h"
#include "txmq/common/signals.h"

int main(int argc, char** argv) {
  using namespace txmq::broker;
  namespace common = txmq::common;
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
  // validate() accepted the name, so parsing it cannot fail here.
  common::log::set_level(common::log::parse_level(config.log_level).value());
  // A fault or an abort leaves a report on stderr (signal, stack, last log lines).
  common::install_crash_report("txmq-broker");
  // Before any thread starts, so that every thread inherits the mask.
  const auto stop_signals = common::block_stop_signals(common::reload_on_hangup::yes);

  common::log::info("starting with settings:\n", describe(config));
  auto b = broker::start(config);
  if (!b) {
    common::log::error("cannot start: ", b.error().message);
    return 1;
  }
  auto sig = common::wait_for_stop_signal(stop_signals);
  while (sig == common::stop_signal::hangup) {
    common::log::info("received SIGHUP, reloading the TLS certificate");
    (void)b.value()->reload_tls();  // logs its outcome; a bad file keeps the old certificate
    sig = common::wait_for_stop_signal(stop_signals);
  }
  common::log::info("received ", common::to_string(sig), ", shutting down");
  b.value()->stop();
  return 0;
}
