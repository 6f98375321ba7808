#include "txmq/protocol/result.h"

#include "txmq/protocol/errc.h"

namespace txmq {
namespace {

class condition_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "txmq.condition"; }
  std::string message(int c) const override {
    switch (static_cast<condition>(c)) {
      case condition::retriable: return "retriable";
    }
    return "unknown txmq condition " + std::to_string(c);
  }
  // The protocol's codes are answered here; other categories answer for their own codes.
  bool equivalent(const std::error_code& code, int c) const noexcept override {
    if (code.category() != protocol::protocol_category()) return false;
    if (static_cast<condition>(c) != condition::retriable) return false;
    switch (static_cast<protocol::errc>(code.value())) {
      case protocol::errc::storage_error:
      case protocol::errc::shutting_down:
      case protocol::errc::internal:
      case protocol::errc::limit_exceeded:
      case protocol::errc::store_unavailable:
      case protocol::errc::store_full:
      case protocol::errc::not_leader:  // after a metadata refresh, at the leader
      case protocol::errc::not_enough_replicas:  // the same ids again: a duplicate if it was kept
        return true;
      default:
        return false;
    }
  }
};

}  // namespace

const std::error_category& condition_category() noexcept {
  static const condition_category_impl c;
  return c;
}

error::error(std::error_code c) : code(c), message(c.message()) {}

std::string error::to_string() const {
  std::string name = code.category() == protocol::protocol_category()
                         ? std::string(protocol::errc_name(static_cast<protocol::errc>(code.value())))
                         : code.message();
  if (message.empty() || message == name) return name;
  return name + ": " + message;
}

std::ostream& operator<<(std::ostream& os, const error& e) { return os << e.to_string(); }

}  // namespace txmq
