#include "txmq/client/error.h"

namespace txmq::client {
namespace {

class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "txmq.client"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::connection_lost: return "connection lost";
      case errc::not_connected: return "not connected";
      case errc::timeout: return "timeout";
      case errc::write_queue_full: return "write queue full";
      case errc::closed: return "closed";
      case errc::unexpected_response: return "unexpected response";
      case errc::bad_address: return "bad address";
      case errc::delivery_timeout: return "delivery timeout";
      case errc::would_deadlock: return "would deadlock";
      case errc::invalid_argument: return "invalid argument";
      case errc::handler_failed: return "handler failed";
      case errc::tls_failed: return "TLS failed";
    }
    return "unknown client error " + std::to_string(ev);
  }
  // Connection trouble and timeouts are worth a retry with the same request.
  bool equivalent(int ev, const std::error_condition& c) const noexcept override {
    if (c != txmq::condition::retriable) return false;
    switch (static_cast<errc>(ev)) {
      case errc::connection_lost:
      case errc::not_connected:
      case errc::timeout:
      case errc::write_queue_full:
        return true;
      default:
        return false;
    }
  }
};

}  // namespace

const std::error_category& client_category() noexcept {
  static const category c;
  return c;
}

error from_wire(int code, std::string message) {
  switch (static_cast<protocol::errc>(code)) {
    case protocol::errc::frame_too_large:
    case protocol::errc::frame_malformed:
    case protocol::errc::hello_required:
    case protocol::errc::unsupported_version:
    case protocol::errc::unknown_request:
    case protocol::errc::not_authenticated:
    case protocol::errc::invalid_argument:
    case protocol::errc::unknown_topic:
    case protocol::errc::topic_exists:
    case protocol::errc::message_too_large:
    case protocol::errc::unknown_group:
    case protocol::errc::unknown_delivery:
    case protocol::errc::unknown_tx:
    case protocol::errc::tx_already_resolved:
    case protocol::errc::not_authorized:
    case protocol::errc::limit_exceeded:
    case protocol::errc::storage_error:
    case protocol::errc::shutting_down:
    case protocol::errc::internal:
    case protocol::errc::store_unavailable:
    case protocol::errc::store_full:
    case protocol::errc::not_leader:
    case protocol::errc::fenced:
    case protocol::errc::not_enough_replicas:
      return error(static_cast<protocol::errc>(code), std::move(message));
    default:
      break;
  }
  return error(protocol::errc::internal, "(broker error code " + std::to_string(code) + ") " + message);
}

}  // namespace txmq::client
