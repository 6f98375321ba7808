#include "txmq/client/bootstrap.h"

namespace txmq::client {

result<std::vector<broker_address>> parse_bootstrap_list(std::string_view text) {
  std::vector<broker_address> out;
  for (;;) {
    const auto comma = text.find(',');
    auto address = broker_address::parse(text.substr(0, comma));
    if (!address) return address.error();
    out.push_back(std::move(address).value());
    if (comma == std::string_view::npos) return out;
    text.remove_prefix(comma + 1);
  }
}

}  // namespace txmq::client
