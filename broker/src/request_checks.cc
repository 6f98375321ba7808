#include "request_checks.h"

#include "txmq/protocol/errc.h"
#include "txmq/storage/errc.h"

namespace txmq::broker {

v1::ErrorCode wire_code(const std::error_code& ec) {
  using storage::errc;
  if (ec.category() == storage::storage_category()) {
    switch (static_cast<errc>(ec.value())) {
      case errc::unknown_topic: return v1::UNKNOWN_TOPIC;
      case errc::topic_exists: return v1::TOPIC_EXISTS;
      case errc::invalid_argument: return v1::INVALID_ARGUMENT;
      case errc::unknown_tx: return v1::UNKNOWN_TX;
      case errc::tx_not_prepared: return v1::TX_ALREADY_RESOLVED;
      case errc::unknown_group: return v1::UNKNOWN_GROUP;
      case errc::unknown_partition: return v1::INVALID_ARGUMENT;
      case errc::closed: return v1::SHUTTING_DOWN;
      default: return v1::STORAGE_ERROR;
    }
  }
  if (ec.category() == protocol::protocol_category()) {
    const int v = ec.value();
    if (v1::ErrorCode_IsValid(v)) return static_cast<v1::ErrorCode>(v);
  }
  return v1::INTERNAL;
}

std::optional<std::string> bad_name(const std::string& what, const std::string& name) {
  if (name.empty()) return what + " name is empty";
  if (name.size() > k_max_name) {
    return what + " name is " + std::to_string(name.size()) + " bytes; at most " + std::to_string(k_max_name) +
           " are allowed";
  }
  for (unsigned char ch : name) {
    if (ch <= 0x20 || ch == 0x7f) return what + " name '" + name + "' contains a space or control character";
  }
  return std::nullopt;
}

}  // namespace txmq::broker
