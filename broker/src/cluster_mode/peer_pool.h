#pragma once

// One kept connection per peer broker for the requests a broker forwards to another on a
// transaction's behalf (docs/cluster.md "Between brokers"): a COMMIT's copies (Produce), and
// read-process-write's holds, acks and releases (Extend/Ack/Nack carrying the txid). Before it,
// each of them dialled a fresh connection (TCP, TLS handshake, Hello with the cluster token)
// per (transaction, topic or group, leader).
//
//   - connections are made through connect_peer (peer_connection.h): TLS and the cluster token
//     exactly as replication's;
//   - many requests share a connection at once (each with its own correlation id, answered in
//     any order); each is bounded by its own deadline;
//   - a connection that fails (write or read error, the peer closed it) fails the requests sent
//     on it and is dropped; requests not yet written wait for the next connection, which the
//     next request (or those waiting) makes. A request that timed out with nothing read on its
//     connection since it was sent drops the connection too (a peer that stopped answering, or
//     a network path that silently died, must not keep every later request waiting);
//   - `done` always runs on the io thread, never inside request().
//
// Runs on the broker's io thread; not thread-safe. Destroy it (or close()) only after the io
// thread stopped running handlers that may call request().

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "cluster_mode/peer_connection.h"
#include "txmq/protocol/result.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::common {
class counter;
}

namespace txmq::broker::cluster_mode {

class peer_pool {
 public:
  // `opened` (may be null): counts the connections made (txmq_peer_connections_opened_total).
  peer_pool(boost::asio::io_context& io, peer_identity id, common::counter* opened = nullptr);
  ~peer_pool();
  peer_pool(const peer_pool&) = delete;
  peer_pool& operator=(const peer_pool&) = delete;

  // Sends `request` to the peer at `address` (HOST:PORT) over its kept connection (made first
  // when there is none) and hands its answer to `done`, or an error (internal, naming the
  // address: unreachable, TLS, Hello refused, connection lost, no answer within `deadline`).
  void request(const std::string& address, v1::Frame request, std::chrono::milliseconds deadline,
               std::function<void(result<v1::Frame>)> done);
  // Closes every connection; requests still open are answered with an error.
  void close();
  // Connections made so far (for tests and the log).
  [[nodiscard]] std::uint64_t connections_opened() const noexcept { return opened_count_; }

  struct channel;

 private:
  boost::asio::io_context& io_;
  peer_identity id_;
  common::counter* opened_;
  std::uint64_t opened_count_ = 0;
  std::map<std::string, std::shared_ptr<channel>> channels_;
};

}  // namespace txmq::broker::cluster_mode
