#include "txmq/common/address.h"

#include <charconv>
#include <system_error>

#include <boost/asio/ip/address.hpp>

#include "text.h"

namespace txmq::common {

std::string host_port::to_string() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

result<host_port> parse_host_port(std::string_view raw) {
  const std::string_view text = detail::trim(raw);
  const auto bad = [&](std::string_view why) {
    return invalid("'" + std::string(raw) + "' is not HOST:PORT (" + std::string(why) + ")");
  };
  std::string_view host;
  std::string_view port_text;
  if (text.starts_with('[')) {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return bad("an IPv6 address is written [ADDR]:PORT");
    }
    host = text.substr(1, close - 1);
    // Brackets hold an IPv6 address and nothing else: "[[]:1" once parsed as host "[", which
    // to_string() wrote back as "[:1", text that no longer parses (found by fuzzing).
    boost::system::error_code ec;
    (void)boost::asio::ip::make_address_v6(std::string(host), ec);
    if (ec) return bad("brackets hold an IPv6 address");
    port_text = text.substr(close + 2);
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    host = text.substr(0, colon);
    // An unbracketed IPv6 address is ambiguous ("::1:80" could be ::1 port 80 or ::1:80 with
    // no port): require brackets.
    if (host.find(':') != std::string_view::npos) return bad("an IPv6 address is written [ADDR]:PORT");
    port_text = text.substr(colon + 1);
  }
  if (host.empty()) return bad("no host");
  const auto port = detail::parse_unsigned(port_text);
  if (!port || *port > 65535) return bad("the port must be a number from 0 to 65535");
  return host_port{std::string(host), static_cast<std::uint16_t>(*port)};
}

bool is_ip_literal(std::string_view host) {
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address(std::string(host), ec);
  return !ec;
}

bool is_loopback_host(std::string_view host) {
  if (host == "localhost") return true;
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(std::string(host), ec);
  return !ec && address.is_loopback();
}

result<boost::asio::ip::tcp::endpoint> to_endpoint(const host_port& address) {
  boost::system::error_code ec;
  const auto ip = address.host == "localhost" ? boost::asio::ip::make_address_v4("127.0.0.1")
                                              : boost::asio::ip::make_address(address.host, ec);
  if (ec) {
    return invalid("'" + address.host + "' in " + address.to_string() +
                   " is not an IP address or localhost (names are not resolved here)");
  }
  return boost::asio::ip::tcp::endpoint(ip, address.port);
}

}  // namespace txmq::common
