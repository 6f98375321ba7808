#pragma once

// What the cluster tests that start their own brokers (cluster_broker_test, cluster_clients_test)
// read through the wire: a connection that must succeed, a broker's Metadata, one topic in it.

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "txmq/client/connection.h"
#include "txmq/protocol/result.h"

namespace txmq::test {

// A connection with 5 s deadlines; throws when the broker does not answer (the test then fails
// with the address and the reason), where cluster_brokers.h's connect_to returns nullptr.
inline std::shared_ptr<client::connection> connect_or_throw(const std::string& address) {
  client::connection_options o;
  o.address = address;
  o.connect_timeout = std::chrono::milliseconds(5000);
  o.request_timeout = std::chrono::milliseconds(5000);
  auto c = client::connection::connect(o);
  if (!c) throw std::runtime_error("cannot connect to " + address + ": " + c.error().to_string());
  return c.value();
}

inline result<v1::MetadataResponse> metadata(client::connection& c) {
  v1::Frame f;
  f.mutable_metadata();
  auto r = c.request(std::move(f));
  if (!r) return r.error();
  return r.value().metadata_response();
}

// The topic named `name` in a Metadata answer, or nullptr.
inline const v1::TopicMetadata* find_topic(const v1::MetadataResponse& m, const std::string& name) {
  for (const auto& t : m.topics()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

}  // namespace txmq::test
