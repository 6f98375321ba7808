#include "peers/system_under_test.h"

#include <stdexcept>

namespace txmq::bench {

const std::vector<std::string>& known_systems() {
  static const std::vector<std::string> names{"txmq", "rabbitmq-quorum", "rabbitmq-classic", "nats", "pgqueue"};
  return names;
}

std::unique_ptr<system_under_test> open_system(const system_options& o) {
  if (o.system == "txmq") return detail::open_txmq(o);
  if (o.system == "rabbitmq-quorum") return detail::open_rabbitmq(o, true);
  if (o.system == "rabbitmq-classic") return detail::open_rabbitmq(o, false);
  if (o.system == "nats") return detail::open_nats(o);
  if (o.system == "pgqueue") return detail::open_pgqueue(o);
  std::string names;
  for (const auto& n : known_systems()) names += (names.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown system '" + o.system + "' (" + names + ")");
}

}  // namespace txmq::bench
