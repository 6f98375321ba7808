#pragma once

// Checks, limits and error mapping shared by the request handlers (service, consumer groups,
// tx_coordinator, webhook_notifier): names, the messages of Produce and Prepare with their
// headers, the limit of admin listings and the budget that keeps an answer within
// max_frame_bytes.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <system_error>

#include "txmq/protocol/result.h"
#include "txmq/storage/store.h"
#include "txmq/v1/frame.pb.h"
#include "net/responder.h"

namespace txmq::broker {

// Longest topic or group name a client may use.
inline constexpr std::size_t k_max_name = 200;

// The wire code for an error from the store or the protocol layer (INTERNAL for others).
[[nodiscard]] v1::ErrorCode wire_code(const std::error_code& ec);
[[nodiscard]] inline v1::ErrorCode wire_code(const error& e) { return wire_code(e.code); }

// The io-thread half of an admin read (admin_reads::run): answers the frame the worker built,
// or its error (after `what`, when given), to a caller that may have gone meanwhile.
[[nodiscard]] inline auto answer_admin_read(std::weak_ptr<responder> weak, std::uint64_t corr, std::string what = {}) {
  return [weak = std::move(weak), corr, what = std::move(what)](result<v1::Frame> out) {
    auto c = weak.lock();
    if (!c) return;
    if (!out) return c->respond_error(corr, wire_code(out.error()), what + out.error().message);
    out.value().set_correlation_id(corr);
    c->respond(std::move(out.value()));
  };
}

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
  // Prepare: its transaction, from which both texts above are made when an error names them
  // (not on every Prepare: issue #15, tenth round); they are left empty then.
  const storage::txid* tx = nullptr;

  [[nodiscard]] std::string request_text() const { return tx ? "transaction " + tx->to_string() : request; }
  [[nodiscard]] std::string prefix_text() const { return tx ? "transaction " + tx->to_string() + ", " : message_prefix; }
};

// The one check of the messages a Produce or a Prepare would store, so both accept the same:
// a topic name (the request's, or each message's; with the request's, a message's own topic must be
// empty or equal to it), at least one message, a 16-byte id on each (any 16 bytes),
// headers as bad_headers accepts them, key + header names and values + body within
// max_message_bytes, and for topics that do not exist yet
// auto_create_topics on and room under max_topics. Returns the topics the write will create,
// or the first failure (protocol::errc invalid_argument, message_too_large, unknown_topic,
// limit_exceeded) with a text naming the request and the message.
[[nodiscard]] result<std::set<std::string>> check_messages(const message_batch& batch, const message_limits& limits,
                                                           const storage::store& store);

// The most items an admin listing answers (DlqList, TxList, WebhookAttempts, the
// reconciliation API); a larger `limit` is clamped to it (docs/protocol.md).
inline constexpr std::uint32_t k_max_list_limit = 1000;

// A listing's limit: `requested`, 0 = `default_limit`, at most k_max_list_limit.
[[nodiscard]] constexpr std::uint32_t list_limit(std::uint32_t requested, std::uint32_t default_limit) noexcept {
  const std::uint32_t limit = requested ? requested : default_limit;
  return limit < k_max_list_limit ? limit : k_max_list_limit;
}

// Keeps an answer that lists items (a fetch's deliveries, a listing's entries) within
// max_frame_bytes: each item is counted as it is encoded in its repeated field (protobuf
// ByteSizeLong, its tag and length), with room left for the envelope (correlation id, the
// answer's own tag and length, a paging cursor). The first item is always taken: the broker's
// limits make any one item fit a frame (max_frame_bytes >= max_message_bytes + 64 KiB).
class answer_budget {
 public:
  explicit answer_budget(std::size_t max_frame_bytes) noexcept
      : left_(max_frame_bytes > 2 * k_envelope_bytes ? max_frame_bytes - k_envelope_bytes : max_frame_bytes / 2) {}

  // Whether an item of `item_bytes` (its ByteSizeLong) still fits; if so it is counted.
  [[nodiscard]] bool take(std::size_t item_bytes) noexcept {
    const std::size_t size = item_bytes + 1 + 5;  // tag, length varint
    if (taken_ > 0 && size > left_) return false;
    left_ = size > left_ ? 0 : left_ - size;
    ++taken_;
    return true;
  }
  [[nodiscard]] std::size_t taken() const noexcept { return taken_; }

  // Correlation id, the answer's tag and length, a 16-byte cursor: well within this.
  static constexpr std::size_t k_envelope_bytes = 128;

 private:
  std::size_t left_;
  std::size_t taken_ = 0;
};

}  // namespace txmq::broker
