#pragma once

// A broker address as users write it: one HOST:PORT, or a cluster's bootstrap list
// "HOST:PORT,HOST:PORT,..." (docs/cluster.md). connection_options.address takes either.

#include <string_view>
#include <vector>

#include "txmq/client/connection.h"

namespace txmq::client {

// Every address of the list, in order. Errors: errc::bad_address naming the bad entry.
[[nodiscard]] result<std::vector<broker_address>> parse_bootstrap_list(std::string_view text);

}  // namespace txmq::client
