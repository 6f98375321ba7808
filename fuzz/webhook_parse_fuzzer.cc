// Fuzz target: what a webhook subscription parses from outside text, the endpoint URL
// (parse_webhook_url) and an endpoint's Retry-After answer (parse_retry_after). The first byte
// picks which; the rest is the text. Never a crash or an exception; a URL that parses has a
// host and a numeric port (what the client connects to); a delay is never negative.

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "webhooks/webhook_signer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace txmq::broker;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto url = parse_webhook_url(text);
    if (!url) return 0;
    const auto& u = url.value();
    unsigned port = 0;
    const auto [end, ec] = std::from_chars(u.port.data(), u.port.data() + u.port.size(), port);
    if (u.host.empty() || ec != std::errc() || end != u.port.data() + u.port.size() || port > 65535 ||
        u.target.empty() || u.target.front() != '/') {
      std::abort();
    }
  } else {
    // A fixed "now" (2026-11-26T00:00:00Z) keeps an input's outcome reproducible.
    auto delay = parse_retry_after(text, 1795651200000);
    if (delay && delay->count() < 0) std::abort();
  }
  return 0;
}
