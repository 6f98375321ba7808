#include "txmq/protocol/errc.h"

#include <string>

namespace txmq::protocol {
namespace {

class protocol_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "txmq.protocol"; }

  std::string message(int code) const override {
    switch (static_cast<errc>(code)) {
      case errc::frame_too_large:
        return "frame length above the connection's limit (max_frame_bytes, or 64 KiB before Hello)";
      case errc::frame_malformed:
        return "frame body is not a valid txmq.v1.Frame";
      case errc::hello_required:
        return "the first frame on a connection must be Hello";
      case errc::unsupported_version:
        return "protocol version not supported by the peer";
      case errc::unknown_request:
        return "request type not known to the peer";
      case errc::not_authenticated:
        return "missing or invalid auth token";
      case errc::invalid_argument:
        return "invalid argument in request";
      case errc::unknown_topic:
        return "topic does not exist";
      case errc::topic_exists:
        return "topic already exists";
      case errc::message_too_large:
        return "message body above max_message_bytes";
      case errc::unknown_group:
        return "consumer group does not exist";
      case errc::unknown_delivery:
        return "delivery unknown or its ack deadline passed";
      case errc::unknown_tx:
        return "transaction id not known to the broker";
      case errc::tx_already_resolved:
        return "transaction already committed or rolled back";
      case errc::not_authorized:
        return "principal lacks the permission for this operation";
      case errc::limit_exceeded:
        return "a configured limit was exceeded";
      case errc::storage_error:
        return "broker storage failed";
      case errc::shutting_down:
        return "broker is shutting down";
      case errc::internal:
        return "internal broker error";
      case errc::store_unavailable:
        return "broker store is not taking writes after a failure; retry later";
      case errc::store_full:
        return "broker disk is nearly full (below min_free_disk_bytes); retry after space is freed";
      case errc::not_leader:
        return "this broker does not lead the partition; refresh metadata and retry at its leader";
      case errc::fenced:
        return "request carries a stale leader epoch";
      case errc::not_enough_replicas:
        return "the write was not fsynced by enough in-sync replicas in time; retry with the same ids";
      case errc::frame_empty:
        return "frame length prefix is zero";
      case errc::frame_truncated:
        return "stream ended inside a frame";
      case errc::bad_message_id:
        return "not a message id: need 16 bytes or canonical UUID text (8-4-4-4-12 hex)";
    }
    return "unknown txmq.protocol error " + std::to_string(code);
  }
};

}  // namespace

const std::error_category& protocol_category() noexcept {
  static const protocol_category_impl category;
  return category;
}

std::string_view errc_name(errc e) noexcept {
  switch (e) {
    case errc::frame_too_large: return "FRAME_TOO_LARGE";
    case errc::frame_malformed: return "FRAME_MALFORMED";
    case errc::hello_required: return "HELLO_REQUIRED";
    case errc::unsupported_version: return "UNSUPPORTED_VERSION";
    case errc::unknown_request: return "UNKNOWN_REQUEST";
    case errc::not_authenticated: return "NOT_AUTHENTICATED";
    case errc::invalid_argument: return "INVALID_ARGUMENT";
    case errc::unknown_topic: return "UNKNOWN_TOPIC";
    case errc::topic_exists: return "TOPIC_EXISTS";
    case errc::message_too_large: return "MESSAGE_TOO_LARGE";
    case errc::unknown_group: return "UNKNOWN_GROUP";
    case errc::unknown_delivery: return "UNKNOWN_DELIVERY";
    case errc::unknown_tx: return "UNKNOWN_TX";
    case errc::tx_already_resolved: return "TX_ALREADY_RESOLVED";
    case errc::not_authorized: return "NOT_AUTHORIZED";
    case errc::limit_exceeded: return "LIMIT_EXCEEDED";
    case errc::storage_error: return "STORAGE_ERROR";
    case errc::shutting_down: return "SHUTTING_DOWN";
    case errc::internal: return "INTERNAL";
    case errc::store_unavailable: return "STORE_UNAVAILABLE";
    case errc::store_full: return "STORE_FULL";
    case errc::not_leader: return "NOT_LEADER";
    case errc::fenced: return "FENCED";
    case errc::not_enough_replicas: return "NOT_ENOUGH_REPLICAS";
    case errc::frame_empty: return "FRAME_EMPTY";
    case errc::frame_truncated: return "FRAME_TRUNCATED";
    case errc::bad_message_id: return "BAD_MESSAGE_ID";
  }
  return "UNKNOWN";
}

}  // namespace txmq::protocol
