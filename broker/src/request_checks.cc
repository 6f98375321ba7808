#include "request_checks.h"

#include "txmq/protocol/errc.h"
#include "txmq/protocol/message_id.h"
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
      // A write failed, or was refused after one: the message names the first failure.
      case errc::io_error:
      case errc::store_failed: return v1::STORE_UNAVAILABLE;
      case errc::store_full: return v1::STORE_FULL;
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

result<std::set<std::string>> check_messages(const message_batch& batch, const message_limits& limits,
                                             const storage::store& store) {
  using protocol::errc;
  if (batch.topic) {
    if (auto bad = bad_name("topic", *batch.topic)) return error(errc::invalid_argument, *bad);
  }
  if (batch.messages.empty()) return error(errc::invalid_argument, batch.request + " has no messages");
  const auto which = [&](int i) { return batch.message_prefix + "message " + std::to_string(i); };
  for (int i = 0; i < batch.messages.size(); ++i) {
    const auto& m = batch.messages.Get(i);
    if (m.id().size() != protocol::uuid::size) {
      return error(errc::invalid_argument, which(i) + " has a " + std::to_string(m.id().size()) +
                                               "-byte id; ids are 16 bytes (UUIDv7 made by the client)");
    }
    if (!batch.topic) {
      if (auto bad = bad_name("topic", m.topic())) return error(errc::invalid_argument, which(i) + ": " + *bad);
    }
    const std::size_t size = m.body().size() + m.key().size();
    if (size > limits.max_message_bytes) {
      return error(errc::message_too_large, which(i) + " is " + std::to_string(size) + " bytes; max_message_bytes is " +
                                                std::to_string(limits.max_message_bytes));
    }
  }
  std::set<std::string> new_topics;
  const auto needs = [&](const std::string& topic) -> result<void> {
    if (new_topics.contains(topic) || store.topic(topic)) return outcome::success();
    if (!limits.auto_create_topics) {
      return error(errc::unknown_topic, "no topic '" + topic + "' and auto_create_topics is off; create it first");
    }
    new_topics.insert(topic);
    return outcome::success();
  };
  if (batch.topic) {
    TXMQ_TRY(needs(*batch.topic));
  } else {
    for (const auto& m : batch.messages) {
      TXMQ_TRY(needs(m.topic()));
    }
  }
  if (!new_topics.empty() && store.topics().size() + new_topics.size() > limits.max_topics) {
    return error(errc::limit_exceeded,
                 "the broker already has max_topics (" + std::to_string(limits.max_topics) + ") topics");
  }
  return new_topics;
}

}  // namespace txmq::broker
