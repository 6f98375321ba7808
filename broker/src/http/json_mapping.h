#pragma once

// The JSON form of the wire protocol's messages for the HTTP/JSON API (docs/http-api.md): one
// mapping for every request and answer, by protobuf reflection, so a field added to the
// .proto appears in the API without code here.
//
// Rules (both directions):
// - Field names are the .proto names (snake_case). Integers are JSON numbers (64-bit ones
//   too); enums are their names ("COMMIT"), a number is accepted on input.
// - Ids (bytes fields named id, txid, message_id, after_txid, next_after_txid) are canonical
//   UUID text.
// - Other bytes fields (body, key, filter_key, keys): `name` holds UTF-8 text, `name_base64`
//   the bytes in base64 (standard alphabet, padded); the answer uses `name` when the bytes are
//   text (is_text), `name_base64` otherwise.
// - map<string,string> is an object; repeated fields are arrays; message fields are objects.
// - Answers carry every field of a message: scalars with their value (defaults included),
//   repeated fields as arrays (possibly empty), a field with presence (`key`) or a message
//   field only when it is set.
// - Input: unknown names are refused (a misspelt field must not be ignored silently), as are
//   wrong JSON types; the error text names the field by its path ("messages[2].key").
//
// Pure functions; thread-safe.

#include <string>

#include <boost/json/value.hpp>
#include <google/protobuf/message.h>

#include "txmq/protocol/result.h"

namespace txmq::broker::http_api {

[[nodiscard]] boost::json::value to_json(const google::protobuf::Message& m);

// Fills `m` (cleared first) from `v`, which must be an object. Error: invalid_argument with a
// text naming the field.
[[nodiscard]] result<void> from_json(const boost::json::value& v, google::protobuf::Message& m);

// Whether `s` is valid UTF-8 (no overlong forms, surrogates or values past U+10FFFF).
[[nodiscard]] bool is_utf8(std::string_view s) noexcept;
// Whether `s` is text: valid UTF-8 without control characters but tab, CR and LF (so a
// binary body that happens to be valid UTF-8, such as bytes 00 01 02, goes out as base64).
[[nodiscard]] bool is_text(std::string_view s) noexcept;

}  // namespace txmq::broker::http_api
