#pragma once

// The txmq command-line tool (cli/README.md): parses a command line, talks to the broker through
// the client libraries and writes human tables or JSON lines. main() only hands over argv and
// the standard streams, so everything here can be driven by a test.
//
// Exit status: 0 ok, 1 an operation failed (one line "txmq: <what failed>: <why>" on err),
// 2 a usage error (the problem and a short usage on err).

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace txmq::cli {

enum exit_status : int {
  exit_ok = 0,
  exit_failure = 1,
  exit_usage = 2,
};

struct environment {
  std::istream& in;   // produce without BODY reads one message per line from here
  std::ostream& out;  // results
  std::ostream& err;  // errors and diagnostics
  // Looks up an environment variable (TXMQ_BROKER); the process environment by default.
  std::function<std::optional<std::string>(std::string_view)> getenv;
};

// The process environment, as environment::getenv wants it.
[[nodiscard]] std::optional<std::string> process_getenv(std::string_view name);

// Runs one command. `args` excludes the program name. Returns the exit status; never throws for
// bad input or broker trouble.
[[nodiscard]] int run(const std::vector<std::string>& args, environment& env);

}  // namespace txmq::cli
