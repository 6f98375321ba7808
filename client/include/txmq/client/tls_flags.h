#pragma once

// The TLS flags every txmq client program takes, defined once (docs/security.md "TLS"):
//   --tls                   TLS with the system's CAs
//   --tls-ca FILE           TLS trusting the CAs in FILE (implies --tls)
//   --tls-cert FILE         client certificate for mTLS (with --tls-key)
//   --tls-key FILE          its private key
//   --tls-server-name NAME  the name to verify in the broker's certificate (and send as SNI)
//                           instead of the host of --broker
// Header-only over Boost.Program_options: the programs that include it (txmq, txmq-relay,
// txmq-bench) link Boost::program_options already; the client library does not.

#include <string>

#include <boost/program_options.hpp>

#include "txmq/client/connection.h"

namespace txmq::client {

inline void add_tls_flags(boost::program_options::options_description& d) {
  namespace po = boost::program_options;
  d.add_options()("tls", po::bool_switch(), "connect with TLS, trusting the system's CA certificates")(
      "tls-ca", po::value<std::string>()->value_name("FILE"),
      "connect with TLS, trusting the CA certificates in FILE (PEM); the broker's host name is verified")(
      "tls-cert", po::value<std::string>()->value_name("FILE"), "client certificate (PEM) for mTLS")(
      "tls-key", po::value<std::string>()->value_name("FILE"), "private key (PEM) of --tls-cert")(
      "tls-server-name", po::value<std::string>()->value_name("NAME"),
      "host name to verify in the broker's certificate (default: the host of the broker address)");
}

// The flags add_tls_flags() defined, as connection options. --tls-cert/--tls-key without TLS
// turn TLS on too (a client certificate is only ever sent over TLS).
[[nodiscard]] inline tls_options tls_options_from(const boost::program_options::variables_map& vm) {
  tls_options t;
  const auto text = [&](const char* name) { return vm.count(name) ? vm[name].as<std::string>() : std::string(); };
  t.ca_file = text("tls-ca");
  t.cert_file = text("tls-cert");
  t.key_file = text("tls-key");
  t.server_name = text("tls-server-name");
  t.enabled = (vm.count("tls") && vm["tls"].as<bool>()) || !t.ca_file.empty() || !t.cert_file.empty();
  return t;
}

// Names of the flags that take a value (for programs that scan global flags before a command).
[[nodiscard]] inline bool is_tls_flag_with_value(const std::string& token) {
  return token == "--tls-ca" || token == "--tls-cert" || token == "--tls-key" || token == "--tls-server-name";
}

}  // namespace txmq::client
