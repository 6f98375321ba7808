// Fuzz target: the broker's TOML configuration (apply_toml_config, then validate). Any text is
// either applied or refused with a message, never a crash. A document that applies and
// validates must survive the round trip its contract promises: describe() read back by
// apply_toml_config() gives the same settings.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "txmq/broker/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace txmq::broker;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  broker_config config;
  auto applied = apply_toml_config(text, "fuzz.toml", config);
  if (!applied) {
    if (applied.error().message.empty()) std::abort();  // a refusal says why
    return 0;
  }
  if (!validate(config)) return 0;
  const std::string described = describe(config);
  broker_config again;
  auto reread = apply_toml_config(described, "describe()", again);
  if (!reread || describe(again) != described) {
    std::fprintf(stderr, "describe() does not read back:\n%s\n%s\n", described.c_str(),
                 reread ? describe(again).c_str() : reread.error().message.c_str());
    std::abort();
  }
  return 0;
}
