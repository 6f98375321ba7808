#pragma once

// HOST:PORT, the one address grammar of every txmq binary (broker settings, client
// connections, the relay's flags, the bench):
//
//   HOST:PORT      a host name or IPv4 address, ':' and a port: "127.0.0.1:7878", "broker:7878"
//   [IPv6]:PORT    an IPv6 address in brackets: "[::1]:7878" (unbracketed "::1:80" is ambiguous)
//
// The port is a decimal number from 0 to 65535 (checked, never wrapped); what port 0 means is
// the caller's to say (a listener picks a free port, a client refuses it). Spaces and tabs
// around the whole text are ignored. Names are not resolved here.
//
// Thread-safety: every function is pure and may be called from any thread.

#include <cstdint>
#include <string>
#include <string_view>

#include <boost/asio/ip/tcp.hpp>

#include "txmq/protocol/result.h"

namespace txmq::common {

// An address as the user wrote it. The host is kept as text ("localhost", "127.0.0.1", "::1"
// without brackets) so that messages and the broker's settings dump show what was configured.
struct host_port {
  std::string host;
  std::uint16_t port = 0;

  // "127.0.0.1:7878", "[::1]:7878" (brackets when the host holds a ':').
  [[nodiscard]] std::string to_string() const;
  bool operator==(const host_port&) const = default;
};

// Parses HOST:PORT or [IPv6]:PORT. Errors: std::errc::invalid_argument, the text quoting the
// input and saying what is wrong ("'127.0.0.1:x' is not HOST:PORT (the port must be a number
// from 0 to 65535)").
[[nodiscard]] result<host_port> parse_host_port(std::string_view text);

// True for IPv4 and IPv6 address literals ("10.0.0.1", "::1"), false for names.
[[nodiscard]] bool is_ip_literal(std::string_view host);

// True for "localhost" and loopback IP addresses (127.0.0.0/8, ::1).
[[nodiscard]] bool is_loopback_host(std::string_view host);

// The endpoint to bind or connect for `address` without resolving: "localhost" is 127.0.0.1,
// other hosts must be IP literals. Errors: std::errc::invalid_argument naming the host.
[[nodiscard]] result<boost::asio::ip::tcp::endpoint> to_endpoint(const host_port& address);

}  // namespace txmq::common
