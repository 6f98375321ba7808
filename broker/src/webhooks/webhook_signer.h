#pragma once

// The pure parts of webhook delivery (docs/semantics.md §5), unit-tested without a network:
//   - Standard Webhooks signing: `whsec_<base64>` secrets whose HMAC key is the decoded part,
//     and `webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`, one
//     signature per secret still valid (rotation keeps the old one signing for a grace period);
//   - the Retry-After header (delta-seconds or an HTTP-date);
//   - target URLs (http/https, host, port, path) checked once when a subscription is created.
// Crypto comes from OpenSSL, base64 from txmq/common/base64.h. Every function is pure and
// thread-safe.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "txmq/protocol/result.h"

namespace txmq::broker {

inline constexpr std::string_view k_webhook_secret_prefix = "whsec_";

// A new secret: "whsec_" and the base64 of 24 random bytes (OpenSSL RAND_bytes).
[[nodiscard]] std::string generate_webhook_secret();
// `n` random bytes as lower-case hex (ids and tokens).
[[nodiscard]] std::string random_hex(std::size_t n);
// The HMAC key of a secret: the decoded part after "whsec_" (a secret without the prefix is
// decoded whole). std::errc::invalid_argument when it is not base64 or decodes to nothing.
[[nodiscard]] result<std::string> webhook_secret_key(std::string_view secret);

// "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>" for one key.
[[nodiscard]] std::string webhook_signature(std::string_view key, std::string_view id, std::int64_t timestamp_s,
                                            std::string_view body);
// The webhook-signature header value: the signatures with every key, space-separated.
[[nodiscard]] std::string webhook_signature_header(const std::vector<std::string>& keys, std::string_view id,
                                                   std::int64_t timestamp_s, std::string_view body);

// Retry-After: "120" (seconds) or "Wed, 21 Oct 2015 07:28:00 GMT" (relative to now_ms).
// A date in the past gives 0; malformed text gives nullopt.
[[nodiscard]] std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value, std::int64_t now_ms);

struct webhook_url {
  bool tls = false;
  std::string host;    // without brackets for IPv6
  std::string port;    // "80"/"443" when the URL names none
  std::string target;  // path and query, "/" at least
};
// http:// or https:// with a host; no user info, no fragment. Errors say what is wrong (quoting
// the URL redacted).
[[nodiscard]] result<webhook_url> parse_webhook_url(std::string_view url);
// `url` for a log line: user info and query (where tokens hide) replaced by "REDACTED"
// ("https://REDACTED@h/p?REDACTED"). Text that is no URL keeps only what precedes any '@' or '?'.
[[nodiscard]] std::string redact_webhook_url(std::string_view url);

}  // namespace txmq::broker
