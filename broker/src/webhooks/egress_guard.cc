#include "webhooks/egress_guard.h"

#include <algorithm>
#include <cctype>

namespace txmq::broker {

namespace ip = boost::asio::ip;

namespace {

// Whether the first `bits` bits of `a` equal those of `prefix`.
bool has_prefix(const ip::address_v6::bytes_type& a, const ip::address_v6::bytes_type& prefix, unsigned bits) {
  for (unsigned i = 0; i < 16 && bits > 0; ++i) {
    const unsigned take = std::min(bits, 8u);
    const auto mask = static_cast<unsigned char>(0xff << (8 - take));
    if ((a[i] & mask) != (prefix[i] & mask)) return false;
    bits -= take;
  }
  return true;
}

address_class classify_v4(const ip::address_v4& a) noexcept {
  const auto v = a.to_uint();
  const auto in = [v](std::uint32_t net, unsigned bits) {
    const std::uint32_t mask = bits == 0 ? 0 : ~std::uint32_t{0} << (32 - bits);
    return (v & mask) == (net & mask);
  };
  if (in(0x00000000, 8)) return address_class::unspecified;   // 0.0.0.0/8 "this network"
  if (in(0x7f000000, 8)) return address_class::loopback;      // 127.0.0.0/8
  if (in(0x0a000000, 8) || in(0xac100000, 12) || in(0xc0a80000, 16) || in(0x64400000, 10)) {
    return address_class::private_net;  // RFC 1918, RFC 6598
  }
  if (in(0xa9fe0000, 16)) return address_class::link_local;  // 169.254.0.0/16
  if (in(0xe0000000, 4)) return address_class::multicast;    // 224.0.0.0/4
  if (in(0xf0000000, 4)) return address_class::reserved;     // 240.0.0.0/4 and the broadcast
  return address_class::global;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

address_class classify(const ip::address& address) noexcept {
  if (address.is_v4()) return classify_v4(address.to_v4());
  const auto a = address.to_v6();
  if (a.is_v4_mapped()) return classify_v4(ip::make_address_v4(ip::v4_mapped, a));
  const auto b = a.to_bytes();
  if (a.is_unspecified()) return address_class::unspecified;
  if (a.is_loopback()) return address_class::loopback;
  // ::a.b.c.d (IPv4-compatible, deprecated): some stacks still route it as the IPv4 address.
  if (has_prefix(b, ip::address_v6::bytes_type{}, 96)) {
    return classify_v4(ip::address_v4({b[12], b[13], b[14], b[15]}));
  }
  if (has_prefix(b, ip::make_address_v6("fe80::").to_bytes(), 10)) return address_class::link_local;
  if (has_prefix(b, ip::make_address_v6("fc00::").to_bytes(), 7)) return address_class::unique_local;
  if (has_prefix(b, ip::make_address_v6("ff00::").to_bytes(), 8)) return address_class::multicast;
  return address_class::global;
}

std::string_view to_string(address_class c) noexcept {
  switch (c) {
    case address_class::global: return "global";
    case address_class::loopback: return "loopback";
    case address_class::private_net: return "private";
    case address_class::link_local: return "link-local";
    case address_class::unique_local: return "unique-local";
    case address_class::multicast: return "multicast";
    case address_class::unspecified: return "unspecified";
    case address_class::reserved: return "reserved";
  }
  return "?";
}

result<allow_hosts> parse_allow_hosts(std::string_view text) {
  allow_hosts out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = std::min(text.find(',', start), text.size());
    std::string_view entry = text.substr(start, comma - start);
    start = comma + 1;
    while (!entry.empty() && (entry.front() == ' ' || entry.front() == '\t')) entry.remove_prefix(1);
    while (!entry.empty() && (entry.back() == ' ' || entry.back() == '\t')) entry.remove_suffix(1);
    if (entry.empty()) continue;
    const std::string e(entry);
    boost::system::error_code ec;
    const auto slash = e.find('/');
    const std::string addr_text = e.substr(0, slash);
    const auto addr = ip::make_address(addr_text, ec);
    if (!ec) {
      unsigned bits = addr.is_v4() ? 32 : 128;
      if (slash != std::string::npos) {
        const std::string len = e.substr(slash + 1);
        if (len.empty() || len.size() > 3 || !std::all_of(len.begin(), len.end(), ::isdigit) ||
            std::stoul(len) > bits) {
          return error(std::make_error_code(std::errc::invalid_argument),
                       "'" + e + "' has a bad prefix length (0.." + std::to_string(bits) + ")");
        }
        bits = static_cast<unsigned>(std::stoul(len));
      }
      if (addr.is_v4()) {
        out.v4.push_back(ip::network_v4(addr.to_v4(), static_cast<unsigned short>(bits)).canonical());
      } else {
        out.v6.push_back(ip::network_v6(addr.to_v6(), static_cast<unsigned short>(bits)).canonical());
      }
      continue;
    }
    const bool name_ok = slash == std::string::npos && std::all_of(e.begin(), e.end(), [](unsigned char c) {
      return std::isalnum(c) || c == '-' || c == '.' || c == '_';
    });
    if (!name_ok) {
      return error(std::make_error_code(std::errc::invalid_argument),
                   "'" + e + "' is neither a host name nor a CIDR such as 10.1.0.0/16");
    }
    out.names.push_back(lower(e));
  }
  return out;
}

std::optional<std::string> egress_guard::refuses(std::string_view host, const ip::address& address) const {
  const auto c = classify(address);
  if (c == address_class::global || allow_private) return std::nullopt;
  const std::string h = lower(host);
  if (std::find(allowed.names.begin(), allowed.names.end(), h) != allowed.names.end()) return std::nullopt;
  ip::address a = address;
  if (a.is_v6() && a.to_v6().is_v4_mapped()) a = ip::make_address_v4(ip::v4_mapped, a.to_v6());
  if (a.is_v4()) {
    for (const auto& n : allowed.v4) {
      if (n.canonical().network() == ip::network_v4(a.to_v4(), n.prefix_length()).canonical().network()) {
        return std::nullopt;
      }
    }
  } else {
    for (const auto& n : allowed.v6) {
      if (n.canonical().network() == ip::network_v6(a.to_v6(), n.prefix_length()).canonical().network()) {
        return std::nullopt;
      }
    }
  }
  return a.to_string() + " is a " + std::string(to_string(c)) +
         " address (egress guard: set webhook_allow_private = true or list the host in webhook_allow_hosts)";
}

}  // namespace txmq::broker
