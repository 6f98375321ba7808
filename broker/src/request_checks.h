#pragma once

// Checks and error mapping shared by the request handlers (service, tx_coordinator,
// webhook_notifier).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <system_error>

#include "txmq/protocol/result.h"
#include "txmq/storage/store.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::broker {

// Longest topic or group name a client may use.
inline constexpr std::size_t k_max_name = 200;

// The wire code for an error from the store or the protocol layer (INTERNAL for others).
[[nodiscard]] v1::ErrorCode wire_code(const std::error_code& ec);
[[nodiscard]] inline v1::ErrorCode wire_code(const error& e) { return wire_code(e.code); }

// Why `name` is not acceptable as a topic or group name (`what` names the kind), or nullopt.
[[nodiscard]] std::optional<std::string> bad_name(const std::string& what, const std::string& name);

// At most this many headers per message, and this many bytes of header names and values.
inline constexpr std::size_t k_max_headers = 64;
inline constexpr std::size_t k_max_header_bytes = 16 * 1024;

// Why the headers of a message are not acceptable, or nullopt: more than k_max_headers, more
// than k_max_header_bytes of names and values, an empty name, or a name or value with a control
// character (below 0x20 but tab, or 0x7f; so no CR, LF or NUL). The text names the header.
[[nodiscard]] std::optional<std::string> bad_headers(const google::protobuf::Map<std::string, std::string>& headers);

// What Produce and Prepare accept, from the broker's settings.
struct message_limits {
  std::uint32_t max_message_bytes = 4u << 20;
  bool auto_create_topics = true;
  std::size_t max_topics = 10'000;
};

// The messages of a Produce or a Prepare, and how errors name them.
struct message_batch {
  const google::protobuf::RepeatedPtrField<v1::Message>& messages;
  // Produce: the request's topic, where every message goes. Prepare: nullptr, each message
  // names its own.
  const std::string* topic = nullptr;
  // The request in errors: "produce request", "transaction <txid>".
  std::string request;
  // Put before "message <i>" in errors: "" for Produce, "transaction <txid>, " for Prepare.
  std::string message_prefix;
};

// The one check of the messages a Produce or a Prepare would store, so both accept the same:
// a topic name (the request's, or each message's), at least one message, a 16-byte id on each,
// headers as bad_headers accepts them, key + header names and values + body within
// max_message_bytes, and for topics that do not exist yet
// auto_create_topics on and room under max_topics. Returns the topics the write will create,
// or the first failure (protocol::errc invalid_argument, message_too_large, unknown_topic,
// limit_exceeded) with a text naming the request and the message.
[[nodiscard]] result<std::set<std::string>> check_messages(const message_batch& batch, const message_limits& limits,
                                                           const storage::store& store);

}  // namespace txmq::broker
