#pragma once

// The webhook egress guard (docs/security.md "Webhook egress guard"): which addresses the
// notifier may connect to. A subscription's URL could otherwise make the broker reach what
// only it can reach (SSRF): its own loopback services, the private network, the cloud metadata
// service at 169.254.169.254. The check runs on each address the host name resolved to, and
// the client connects only to addresses that passed (webhook_client.cc), so a name cannot
// resolve to a public address for the check and to a private one for the connect.
//
// Pure: no state, no I/O. Thread-safe.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/network_v4.hpp>
#include <boost/asio/ip/network_v6.hpp>

#include "txmq/protocol/result.h"

namespace txmq::broker {

// Why an address is not a public one. An IPv4-mapped (::ffff:a.b.c.d) or IPv4-compatible
// (::a.b.c.d) IPv6 address is classified as its IPv4 address.
enum class address_class {
  global,        // none of the below: deliveries allowed
  loopback,      // 127.0.0.0/8, ::1
  private_net,   // 10/8, 172.16/12, 192.168/16 (RFC 1918), 100.64/10 (RFC 6598 shared)
  link_local,    // 169.254/16 (incl. 169.254.169.254, cloud metadata), fe80::/10
  unique_local,  // fc00::/7
  multicast,     // 224/4, ff00::/8
  unspecified,   // 0.0.0.0/8, ::
  reserved,      // 240/4 and 255.255.255.255 (broadcast)
};

[[nodiscard]] address_class classify(const boost::asio::ip::address& address) noexcept;
// "loopback", "private", "link-local", ... for messages and the attempt log.
[[nodiscard]] std::string_view to_string(address_class c) noexcept;

// webhook_allow_hosts: host names (matched without regard to case against the URL's host) and
// CIDRs (matched against the address connected to; a bare address is a /32 or /128).
struct allow_hosts {
  std::vector<std::string> names;
  std::vector<boost::asio::ip::network_v4> v4;
  std::vector<boost::asio::ip::network_v6> v6;
};

// Parses "hooks.internal, 10.1.0.0/16, fd00::/8". Errors: std::errc::invalid_argument naming the
// entry that is neither a host name nor a CIDR.
[[nodiscard]] result<allow_hosts> parse_allow_hosts(std::string_view text);

struct egress_guard {
  bool allow_private = false;
  allow_hosts allowed;

  // std::nullopt when `host` (the URL's host) may be delivered to at `address`; otherwise why
  // not, as a sentence for the attempt log ("127.0.0.1 is a loopback address").
  [[nodiscard]] std::optional<std::string> refuses(std::string_view host,
                                                   const boost::asio::ip::address& address) const;
};

}  // namespace txmq::broker
