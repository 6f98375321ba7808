#pragma once

// Where the tools (txmq, txmq-relay, txmq-bench) take a principal's token from, one rule for
// all: `--token TOKEN`, else `--token-file FILE` (the file's content, surrounding white space
// dropped), else the environment variable TXMQ_TOKEN, else none (a broker with auth off). The
// token itself never appears in an error text. A token on the command line is visible to other
// users in `ps`: --token-file or TXMQ_TOKEN are the safer choices (docs/security.md).

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "txmq/client/error.h"

namespace txmq::client {

// Errors (errc::invalid_argument): both --token and --token-file given; the file cannot be
// read (named, with the reason) or is empty.
[[nodiscard]] result<std::string> resolve_token(
    const std::optional<std::string>& token_flag, const std::optional<std::string>& token_file,
    const std::function<std::optional<std::string>(std::string_view)>& getenv);

}  // namespace txmq::client
