#pragma once

// The body and content type of a webhook request (docs/protocol.md §11), pure and unit-tested:
// - raw (the default): the message body as produced, with the content type of the message's
//   `content-type` header, else `application/json` when the body is JSON, else
//   `application/octet-stream` (so a Standard Webhooks receiver that parses JSON bodies is
//   never handed plain text labelled JSON);
// - envelope: the Standard Webhooks payload shape, `{"type": <topic>, "timestamp": <publish
//   time, RFC 3339 UTC>, "data": <the JSON body>}`, or `"data_base64": <base64 of the body>`
//   when the body is not JSON; always `application/json`.
// Thread-safe.

#include <cstdint>
#include <string>
#include <string_view>

#include "txmq/v1/frame.pb.h"

namespace txmq::broker {

struct webhook_body {
  std::string content_type;
  std::string body;
};

[[nodiscard]] webhook_body webhook_payload(const v1::Message& m, v1::WebhookPayload payload);

// Unix milliseconds as RFC 3339 UTC with milliseconds: "2026-01-01T00:00:06.000Z".
[[nodiscard]] std::string rfc3339_ms(std::int64_t unix_ms);

// Whether `body` is one JSON text (RFC 8259; surrounding whitespace allowed).
[[nodiscard]] bool is_json(std::string_view body);

}  // namespace txmq::broker
