#pragma once

// Checks and error mapping shared by the request handlers (service, tx_coordinator).

#include <cstddef>
#include <optional>
#include <string>
#include <system_error>

#include "txmq/protocol/result.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::broker {

// Longest topic or group name a client may use.
inline constexpr std::size_t k_max_name = 200;

// The wire code for an error from the store or the protocol layer (INTERNAL for others).
[[nodiscard]] v1::ErrorCode wire_code(const std::error_code& ec);
[[nodiscard]] inline v1::ErrorCode wire_code(const error& e) { return wire_code(e.code); }

// Why `name` is not acceptable as a topic or group name (`what` names the kind), or nullopt.
[[nodiscard]] std::optional<std::string> bad_name(const std::string& what, const std::string& name);

}  // namespace txmq::broker
