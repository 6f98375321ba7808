#pragma once

// One txmq_outbox row as the relay reads it, and its translation into a message. Pure: no
// database, no broker (unit-tested on its own).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "txmq/client/error.h"
#include "txmq/producer/producer.h"

namespace txmq::relay {

// The columns of `SELECT id, topic, key, headers::text, payload, created_at epoch ms, seq`, as text
// (the payload also as raw bytes).
struct outbox_row_text {
  std::string_view id;
  std::string_view topic;
  std::optional<std::string_view> key;
  std::string_view headers_json;
  std::string_view payload_hex;  // bytea in hex text form, or its raw bytes when payload_raw
  std::string_view created_at_ms;
  std::string_view seq;
  // The payload column was read in binary result format (pg::exec_binary): payload_hex holds
  // the bytes themselves, nothing to decode.
  bool payload_raw = false;
};

struct decoded_row {
  producer::outgoing_message message;  // id = the row id
  std::chrono::system_clock::time_point created_at;
  std::int64_t seq = 0;
};

// The columns of `SELECT id, topic, key, headers::text, payload, created_at, seq` in binary
// result format, as txmq-relay reads a round: the id, the timestamp and seq in PostgreSQL's
// binary forms (nothing for the server to print as text, nor for the relay to parse).
struct outbox_row_binary {
  std::string_view id;  // the uuid's 16 bytes
  std::string_view topic;
  std::optional<std::string_view> key;
  std::string_view headers_json;
  std::string_view payload;     // the bytes themselves
  std::string_view created_at;  // timestamptz: 8 bytes, big-endian microseconds since 2000-01-01 UTC
  std::string_view seq;         // bigint: 8 bytes, big-endian
};

// Errors (client::errc::invalid_argument): an id that is not a UUID, headers that are not a
// JSON object, a payload not in hex. Header values that are not JSON strings are carried as
// their JSON text, so a plain INSERT with '{"n": 1}' still arrives (as "1").
[[nodiscard]] client::result<decoded_row> decode_row(const outbox_row_text& row);
// The same from the binary columns; errors also for an id, created_at or seq of the wrong size.
[[nodiscard]] client::result<decoded_row> decode_row(const outbox_row_binary& row);

}  // namespace txmq::relay
