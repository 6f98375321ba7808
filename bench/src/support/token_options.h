#pragma once

// --token and --token-file of every txmq-bench workload that talks to the broker, resolved as
// every txmq tool does (txmq/client/token.h: --token, else --token-file, else TXMQ_TOKEN).

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

#include <boost/program_options.hpp>

#include "txmq/client/token.h"

namespace txmq::bench {

inline void add_token_options(boost::program_options::options_description& desc) {
  namespace po = boost::program_options;
  desc.add_options()("token", po::value<std::string>()->value_name("TOKEN"),
                     "txmq with auth: a principal's token (default: $TXMQ_TOKEN)")(
      "token-file", po::value<std::string>()->value_name("FILE"), "txmq with auth: read the token from FILE");
}

// The token (empty: none). Throws std::invalid_argument with the reason (never the token).
inline std::string token_option(const boost::program_options::variables_map& vm) {
  auto token = client::resolve_token(
      vm.count("token") ? std::optional<std::string>(vm["token"].as<std::string>()) : std::nullopt,
      vm.count("token-file") ? std::optional<std::string>(vm["token-file"].as<std::string>()) : std::nullopt,
      [](std::string_view name) -> std::optional<std::string> {
        const char* v = std::getenv(std::string(name).c_str());
        return v ? std::optional<std::string>(v) : std::nullopt;
      });
  if (!token) throw std::invalid_argument(token.error().message);
  return std::move(token.value());
}

}  // namespace txmq::bench
