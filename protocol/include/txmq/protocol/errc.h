#pragma once

// Error codes shared by every component; the values are those of txmq.v1.ErrorCode on the wire,
// plus framing codes that never leave the process (they close the connection instead).

#include <cstdint>
#include <string_view>
#include <system_error>

namespace txmq::protocol {

enum class errc : int {
  // Frame decoding (local; the peer sees the connection close with FRAME_* in an Error).
  frame_too_large = 1,
  frame_malformed = 2,
  hello_required = 3,
  unsupported_version = 4,
  unknown_request = 5,
  not_authenticated = 6,
  invalid_argument = 20,
  unknown_topic = 21,
  topic_exists = 22,
  message_too_large = 23,
  unknown_group = 24,
  unknown_delivery = 25,
  unknown_tx = 26,
  tx_already_resolved = 27,
  not_authorized = 28,
  limit_exceeded = 29,
  storage_error = 40,
  shutting_down = 41,
  internal = 42,
  store_unavailable = 43,
  store_full = 44,
  not_leader = 50,
  fenced = 51,
  not_enough_replicas = 52,
  // Local-only framing conditions (not on the wire).
  frame_empty = 100,      // a length prefix of zero
  frame_truncated = 101,  // the stream ended inside a frame
  bad_message_id = 102,   // not 16 bytes / not canonical UUID text
};

const std::error_category& protocol_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), protocol_category()};
}

// The wire name of a code ("TX_ALREADY_RESOLVED"), for logs and the CLI.
std::string_view errc_name(errc e) noexcept;

}  // namespace txmq::protocol

template <>
struct std::is_error_code_enum<txmq::protocol::errc> : std::true_type {};
