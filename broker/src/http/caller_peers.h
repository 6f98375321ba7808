#pragma once

// Kept connections for the admin HTTP API's cluster views (cluster_views.h): the node asked
// forwards each view to the other nodes under the HTTP caller's own bearer token, never the
// brokers' principal. Before this, every view dialled a fresh connection (TCP, TLS handshake,
// Hello) per node per HTTP request. Now each caller's token has its own cluster_mode::peer_pool
// (one kept connection per peer, many requests at once on it, each with its own deadline), so a
// console refreshing every few seconds reuses its connections.
//
// Whose connections: a pool is keyed by the SHA-256 of the token its Hellos carry, so one
// caller's connection never carries another's request. The peers authenticate the token at
// Hello and check the caller's ACLs on every request (an ACL change applies from the next one;
// a deleted principal's connections are closed by every node, and the pool then dials again
// and is refused).
//
// Bounds: at most k_max_callers pools (the least recently used is closed to make room) and a
// pool unused for k_idle is closed (its connections too), so a token is not held in memory, nor
// a connection open on the peers, longer than the caller keeps using the API.
//
// Runs on the broker's io thread; not thread-safe. Destroy it only when the io thread no longer
// runs handlers that may call pool_for().

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cluster_mode/peer_pool.h"

namespace txmq::broker::http_api {

class caller_peers {
 public:
  static constexpr std::size_t k_max_callers = 16;
  static constexpr std::chrono::seconds k_idle{60};

  explicit caller_peers(boost::asio::io_context& io);
  ~caller_peers();
  caller_peers(const caller_peers&) = delete;
  caller_peers& operator=(const caller_peers&) = delete;

  // The pool whose connections say `token` in their Hello (empty with auth off), made with
  // `base`'s TLS settings when there is none yet. The reference is valid until the next call of
  // pool_for() or close(): use it at once (peer_pool::request copies what it needs).
  [[nodiscard]] cluster_mode::peer_pool& pool_for(const cluster_mode::peer_identity& base, const std::string& token);
  // Closes every pool; requests still open are answered with an error.
  void close();
  // Connections opened so far over all pools, closed ones included (tests, logs).
  [[nodiscard]] std::uint64_t connections_opened() const noexcept;

 private:
  struct entry {
    std::unique_ptr<cluster_mode::peer_pool> pool;
    std::chrono::steady_clock::time_point last_used;
  };
  void sweep();

  boost::asio::io_context& io_;
  std::map<std::string, entry> pools_;  // by the raw SHA-256 of the token
  std::uint64_t opened_by_closed_ = 0;  // connections opened by pools closed since
  boost::asio::steady_timer sweeper_;
  bool sweeping_ = false;
};

}  // namespace txmq::broker::http_api
