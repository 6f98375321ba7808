#pragma once

// txmq-relay's command line, parsed in the library so that it is unit-tested and main() stays
// thin. The grammar of values is the one of every txmq binary: HOST:PORT from
// txmq/common/address.h, durations from txmq/common/units.h ("500ms", "1s", "2m"), log levels
// from txmq/common/log.h.
//
// Thread-safety: pure functions (no global state), callable from any thread.

#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>

#include "txmq/common/address.h"
#include "txmq/common/log.h"
#include "txmq/common/manual.h"
#include "txmq/protocol/result.h"
#include "txmq/relay/relay.h"

namespace txmq::relay {

struct command_line {
  // Everything but `metrics` and `log`, which main() sets.
  relay_options relay;
  // The admin HTTP address (/healthz, /metrics) as given, and the endpoint to bind it at.
  common::host_port http{"127.0.0.1", 7880};
  boost::asio::ip::tcp::endpoint http_endpoint;
  common::log::level log_level = common::log::level::info;
  // Set for --help (the usage text): print it to stdout and exit with status 0.
  std::optional<std::string> exit_text;
};

// Parses argv (argv[0] is the program name), then the TOML file of --config if given (its keys
// are the flag names with '_' for '-'; a flag given on the command line wins). Never throws: a missing --pg, an unknown flag, a
// malformed or out-of-range value is std::errc::invalid_argument with one message naming the
// flag, the bad value and what is expected ("--http: '127.0.0.1:x' is not HOST:PORT (the port
// must be a number from 0 to 65535)").
[[nodiscard]] result<command_line> parse_relay_options(int argc, const char* const* argv);

// The text --help prints.
[[nodiscard]] std::string relay_usage();

// The man page and bash completion (`txmq-relay --man-page`, `--bash-completion`): the options of
// the same table the parser reads.
[[nodiscard]] common::manual::page relay_manual_page();

}  // namespace txmq::relay
