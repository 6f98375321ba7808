#include "manual_page.h"

namespace txmq::broker {

common::manual::page broker_manual_page(std::string_view version) {
  common::manual::page p;
  p.program = "txmq-broker";
  p.summary = "the txmq transactional message broker";
  p.synopsis = {"[--config FILE] [--SETTING VALUE]..."};
  p.description =
      "txmq-broker stores messages durably (acknowledged after fsync by default), delivers them to consumer "
      "groups with ack deadlines, retries and dead letters, coordinates transactional messages with check-backs, "
      "notifies webhooks, and serves the admin HTTP port: /healthz, /metrics, the HTTP/JSON API under /v1 and "
      "the web console at /.\n\n"
      "Every setting can be given in the TOML file of --config as setting_name = value, or as the flag "
      "--setting-name VALUE; flags override the file. Durations: 500ms, 6s, 3m, 1h, 7d. Sizes: bytes or "
      "KiB, MiB, GiB (4MiB). Boolean flags may be written --name, --name true or --name=false.\n\n"
      "The broker logs its settings at startup, stops on SIGINT or SIGTERM, and reloads its TLS certificate on "
      "SIGHUP.";
  p.options = broker_option_docs();
  p.sections = {
      {"EXIT STATUS", "0 after a clean stop (or --help, --version).\n\n1 the broker could not start (the log says "
                      "why).\n\n2 a bad setting: one line naming it on standard error."},
      {"FILES", "/etc/txmq/broker.toml: the packaged configuration (txmq-broker.service runs txmq-broker --config "
                "/etc/txmq/broker.toml).\n\n/var/lib/txmq: the packaged data directory."},
      {"SEE ALSO", "txmq(1), txmq-relay(1); docs/configuration.md and docs/operations.md in the txmq "
                   "sources."},
  };
  p.version = std::string(version);
  return p;
}

}  // namespace txmq::broker
