#pragma once

// The one table of what each frame of the wire protocol needs (DESIGN §7 Authorization): for
// every field of txmq.v1.Frame's `body` oneof, its role (a request the broker serves, the
// Hello, an answer to the broker's own CheckTx, or a frame only the broker sends) and, for
// requests, the (permission, resource) pairs it needs, computed from the frame. The service
// checks every request against it before dispatch; the tests enumerate the oneof through the
// protobuf descriptor and fail for a field that has no entry here.

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "auth/acl.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::broker::auth {

enum class frame_role {
  request,   // a client request: checked against `needs`
  hello,     // the handshake: authenticates; a producer_group needs transact on it
  answer,    // CheckTxResult / Error from a client: checked against the open check's group
  response,  // only the broker sends it; a client sending it gets UNKNOWN_REQUEST
};

// What the rules read of the broker's state.
struct request_lookups {
  // The producer group of a stored transaction (by its 16 txid bytes), nullopt when unknown.
  std::function<std::optional<std::string>(const std::string& txid)> tx_producer_group;
  // The topics of a consumer group (empty when it does not exist yet).
  std::function<std::vector<std::string>(const std::string& group)> group_topics;
};

struct request_rule {
  int field;  // field number in Frame's body oneof
  std::string_view name;  // field name, as in frame.proto
  frame_role role;
  // Requests only: what this frame needs (empty only for an EndTx of an unknown txid, which
  // changes nothing).
  std::vector<need> (*needs)(const v1::Frame&, const request_lookups&) = nullptr;
};

// Every field of the oneof, by field number.
[[nodiscard]] std::span<const request_rule> request_rules() noexcept;
// The rule of a body case, nullptr when the table has none (then the request is refused).
[[nodiscard]] const request_rule* rule_for(int field) noexcept;

}  // namespace txmq::broker::auth
