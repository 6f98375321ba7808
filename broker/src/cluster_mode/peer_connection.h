#pragma once

// A broker's connection to another broker of its cluster (docs/cluster.md "Between brokers:
// TLS and the cluster identity"): the one place that dials a peer, so that every inter-broker
// request (a follower's ReplicaFetch today; forwarded requests may reuse it) speaks TLS when
// this broker's listener does and authenticates as the cluster's inter-broker identity.
//
//   - TLS: when `peer_identity::tls` is set (this broker serves TLS), the connection is TLS,
//     the peer's certificate verified against the configured CAs and its host name (the host
//     of its advertised address), and, when the cluster requires client certificates (mTLS),
//     this broker's own certificate presented;
//   - identity: the Hello carries the cluster token (cluster_token_file), which the peer maps
//     to the reserved principal `txmq-cluster`, the only one allowed ReplicaFetch.
//
// Runs on the broker's io thread; a peer_link is used by one coroutine at a time.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>

#include "txmq/common/tls.h"
#include "txmq/protocol/frame_codec.h"
#include "txmq/protocol/result.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::broker::cluster_mode {

// How this broker presents itself to its peers.
struct peer_identity {
  std::shared_ptr<boost::asio::ssl::context> tls;  // null: plaintext (this broker serves no TLS)
  std::string token;                               // the cluster token; empty with auth off
  std::string client_id;                           // the Hello's client_id ("txmq-replica-N")
};

// Builds the TLS part of `peer_identity` from the broker's settings: trust `ca_file` (empty: the
// system's CAs) and present `cert_file`/`key_file` when `present_certificate` (the peers require
// client certificates). Errors name the file.
[[nodiscard]] result<std::shared_ptr<boost::asio::ssl::context>> make_peer_tls_context(
    const std::string& ca_file, const std::string& cert_file, const std::string& key_file, bool present_certificate);

class peer_link {
 public:
  peer_link(common::wire_stream stream, std::string address) : stream_(std::move(stream)), address_(std::move(address)) {}

  // One request and its answer, bounded by `deadline` (the link is closed when it passes: a
  // paused or dead peer cannot hold the caller). The request's correlation id is set here.
  // Errors: internal naming the address and the socket's error, or the codec's.
  boost::asio::awaitable<result<v1::Frame>> exchange(v1::Frame request, std::chrono::milliseconds deadline);
  // For a link that carries many requests at once (peer_pool): one frame written (its bytes,
  // already encoded, correlation id set), or the next frame read, with no deadline of their
  // own (the pool bounds each request). At most one write and one read at a time.
  boost::asio::awaitable<boost::system::error_code> write_frame(const std::string& encoded);
  boost::asio::awaitable<result<v1::Frame>> read_frame();
  void close() noexcept;
  [[nodiscard]] bool is_open() noexcept { return stream_.socket().is_open(); }
  [[nodiscard]] const std::string& address() const noexcept { return address_; }

 private:
  common::wire_stream stream_;
  std::string address_;
  protocol::frame_reader reader_;
  std::uint64_t corr_ = 0;
};

// Connects to the peer at `address` (HOST:PORT), does the TLS handshake when `id.tls` is set
// and the Hello with the cluster token, all within `deadline`. Errors (each a sentence for the
// log): unreachable, a TLS failure (common::describe_tls_failure), the Hello refused (the
// peer's error code and text: NOT_AUTHENTICATED for a wrong or missing cluster token).
boost::asio::awaitable<result<std::shared_ptr<peer_link>>> connect_peer(boost::asio::io_context& io,
                                                                         const peer_identity& id,
                                                                         const std::string& address,
                                                                         std::chrono::milliseconds deadline);

// One request over a fresh connection (connect with `id` as above, the request, its answer,
// close), all within `deadline`; `done` runs on the io thread. The forwarded requests of
// transactions go through peer_pool (peer_pool.h) instead, which keeps one connection per peer.
void peer_request(boost::asio::io_context& io, const peer_identity& id, std::string address, v1::Frame request,
                  std::chrono::milliseconds deadline, std::function<void(result<v1::Frame>)> done);

}  // namespace txmq::broker::cluster_mode
