// Fuzz target: the grammars every binary parses from settings and flags (common/address.h,
// common/units.h): HOST:PORT, durations, duration lists and sizes. The first byte picks the
// grammar; the rest is the text. Never a crash; what parses formats back to text that parses to
// the same value (the settings dump relies on it).

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "txmq/common/address.h"
#include "txmq/common/units.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace txmq::common;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto a = parse_host_port(text);
      if (!a) return 0;
      auto again = parse_host_port(a.value().to_string());
      if (!again || !(again.value() == a.value())) std::abort();
      (void)to_endpoint(a.value());
      (void)is_loopback_host(a.value().host);
      break;
    }
    case 1: {
      auto d = parse_duration(text);
      if (!d) return 0;
      if (d.value().count() < 0) std::abort();
      auto again = parse_duration(format_duration(d.value()));
      if (!again || again.value() != d.value()) std::abort();
      break;
    }
    case 2: {
      auto list = parse_duration_list(text);
      if (list && list.value().empty()) std::abort();
      break;
    }
    default: {
      auto s = parse_size(text);
      if (!s) return 0;
      auto again = parse_size(format_size(s.value()));
      if (!again || again.value() != s.value()) std::abort();
      break;
    }
  }
  return 0;
}
