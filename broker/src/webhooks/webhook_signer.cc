#include "webhooks/webhook_signer.h"

#include <charconv>

#include <ctime>
#include <iomanip>
#include <locale>
#include <sstream>

#include <boost/url/parse.hpp>
#include <boost/url/url.hpp>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "txmq/common/base64.h"

namespace txmq::broker {

std::string random_hex(std::size_t n) {
  std::string bytes(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(n)) != 1) {
    // No entropy means no secrets worth the name: a broken invariant of the host.
    throw std::runtime_error("OpenSSL RAND_bytes failed");
  }
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (unsigned char c : bytes) {
    out.push_back(k_hex[c >> 4]);
    out.push_back(k_hex[c & 15]);
  }
  return out;
}

std::string generate_webhook_secret() {
  unsigned char bytes[24];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("OpenSSL RAND_bytes failed");
  return std::string(k_webhook_secret_prefix) +
         common::base64_encode(std::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

result<std::string> webhook_secret_key(std::string_view secret) {
  if (secret.starts_with(k_webhook_secret_prefix)) secret.remove_prefix(k_webhook_secret_prefix.size());
  auto key = common::base64_decode(secret);
  if (!key || key.value().empty()) return std::make_error_code(std::errc::invalid_argument);
  return std::move(key).value();
}

std::string webhook_signature(std::string_view key, std::string_view id, std::int64_t timestamp_s,
                              std::string_view body) {
  std::string content;
  content.reserve(id.size() + body.size() + 24);
  content.append(id).append(".").append(std::to_string(timestamp_s)).append(".").append(body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(content.data()),
       content.size(), mac, &len);
  return "v1," + common::base64_encode(std::string_view(reinterpret_cast<const char*>(mac), len));
}

std::string webhook_signature_header(const std::vector<std::string>& keys, std::string_view id,
                                     std::int64_t timestamp_s, std::string_view body) {
  std::string out;
  for (auto& k : keys) {
    if (!out.empty()) out += ' ';
    out += webhook_signature(k, id, timestamp_s, body);
  }
  return out;
}

std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value, std::int64_t now_ms) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  if (value.find_first_not_of("0123456789") == std::string_view::npos) {
    if (value.size() > 9) return std::chrono::milliseconds(std::int64_t{999'999'999} * 1000);
    return std::chrono::milliseconds(std::stoll(std::string(value)) * 1000);
  }
  // IMF-fixdate, the form RFC 9110 requires senders to use.
  std::tm tm{};
  std::istringstream in{std::string(value)};
  in.imbue(std::locale::classic());
  in >> std::get_time(&tm, "%a, %d %b %Y %H:%M:%S GMT");
  if (in.fail()) return std::nullopt;
  const std::int64_t at_ms = static_cast<std::int64_t>(timegm(&tm)) * 1000;
  return std::chrono::milliseconds(std::max<std::int64_t>(0, at_ms - now_ms));
}

std::string redact_webhook_url(std::string_view url) {
  auto u = boost::urls::parse_uri_reference(url);
  if (!u) {
    const auto cut = url.find_first_of("@?");
    return std::string(url.substr(0, cut)) + (cut == std::string_view::npos ? "" : "REDACTED");
  }
  boost::urls::url copy(*u);
  if (copy.has_userinfo()) copy.set_encoded_userinfo("REDACTED");
  if (copy.has_query()) copy.set_encoded_query("REDACTED");
  return std::string(copy.buffer());
}

result<webhook_url> parse_webhook_url(std::string_view raw) {
  const std::string url = redact_webhook_url(raw);  // what the error messages quote
  auto u = boost::urls::parse_absolute_uri(raw);
  if (!u) {
    return error(std::make_error_code(std::errc::invalid_argument), "'" + std::string(url) + "' is not an absolute URL: " + u.error().message());
  }
  webhook_url out;
  const auto scheme = u->scheme_id();
  if (scheme != boost::urls::scheme::http && scheme != boost::urls::scheme::https) {
    return error(std::make_error_code(std::errc::invalid_argument), "'" + std::string(url) + "' is not an http:// or https:// URL");
  }
  out.tls = scheme == boost::urls::scheme::https;
  if (u->has_userinfo()) {
    return error(std::make_error_code(std::errc::invalid_argument), "'" + std::string(url) + "' carries user info; put credentials in the secret instead");
  }
  out.host = std::string(u->encoded_host_address());
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']') out.host = out.host.substr(1, out.host.size() - 2);
  if (out.host.empty()) {
    return error(std::make_error_code(std::errc::invalid_argument), "'" + std::string(url) + "' names no host");
  }
  // An empty port ("http://h:/") is the scheme's default (RFC 3986 §3.2.3); any other must be a
  // number from 1 to 65535. Found by fuzzing (webhook_parse): an empty or 20-digit port went
  // through, and the client's std::stoul threw on it for every attempt (issue #13).
  out.port = u->has_port() && !u->port().empty() ? std::string(u->port()) : (out.tls ? "443" : "80");
  unsigned long port = 0;
  const auto [end, ec] = std::from_chars(out.port.data(), out.port.data() + out.port.size(), port);
  if (ec != std::errc() || end != out.port.data() + out.port.size() || port == 0 || port > 65535) {
    return error(std::make_error_code(std::errc::invalid_argument),
                 "'" + std::string(url) + "': the port must be a number from 1 to 65535");
  }
  out.target = std::string(u->encoded_path());
  if (out.target.empty()) out.target = "/";
  // Boost.URL reads "http://[::1]:9&x" as port 9 and path "&x", which is no request target
  // (found by fuzzing, webhook_parse).
  if (out.target.front() != '/') {
    return error(std::make_error_code(std::errc::invalid_argument),
                 "'" + std::string(url) + "': the path must start with '/'");
  }
  if (u->has_query()) out.target += "?" + std::string(u->encoded_query());
  return out;
}

}  // namespace txmq::broker
