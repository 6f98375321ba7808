#pragma once

// outgoing_message → the wire's v1::Message: one conversion for produce and Prepare.

#include "txmq/producer/producer.h"
#include "txmq/v1/message.pb.h"

namespace txmq::producer::detail {

inline v1::Message to_wire(outgoing_message&& message, const protocol::message_id& id) {
  v1::Message m;
  m.set_id(std::string(id.raw()));
  m.set_topic(std::move(message.topic));
  if (message.key) m.set_key(std::move(*message.key));
  for (auto& [k, v] : message.headers) (*m.mutable_headers())[k] = std::move(v);
  m.set_body(std::move(message.body));
  if (message.deliver_at) {
    m.set_deliver_at_ms(
        std::chrono::duration_cast<std::chrono::milliseconds>(message.deliver_at->time_since_epoch()).count());
  }
  return m;
}

}  // namespace txmq::producer::detail
