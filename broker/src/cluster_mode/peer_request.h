#pragma once

// Broker-to-broker requests in cluster mode: the one place where a broker connects to another
// (the replication follower's connection to its leader, a transaction's home leader producing
// a committed message to the leader of its partition). Keep every such connect here, so that
// what a peer connection needs (a token, TLS) is added once.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "txmq/protocol/frame_codec.h"
#include "txmq/protocol/result.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::broker::cluster_mode {

// Connects to `address` (HOST:PORT) and says Hello as `client_id`, within `deadline` per step;
// the socket is ready for requests (`reader` reset for it).
boost::asio::awaitable<result<std::shared_ptr<boost::asio::ip::tcp::socket>>> connect_peer(
    boost::asio::io_context& io, const std::string& address, const std::string& client_id,
    protocol::frame_reader& reader, std::uint64_t& corr, std::chrono::milliseconds deadline);

// One request and its answer on a peer connection, bounded by `deadline` (the socket is closed
// when it passes: a paused or dead peer cannot hold the caller).
boost::asio::awaitable<result<v1::Frame>> exchange(boost::asio::io_context& io,
                                                   const std::shared_ptr<boost::asio::ip::tcp::socket>& s,
                                                   protocol::frame_reader& reader, const v1::Frame& request,
                                                   std::chrono::milliseconds deadline);

// One request over a fresh connection (connect, Hello, the request, its answer, close); `done`
// runs on the io thread.
void peer_request(boost::asio::io_context& io, std::string address, std::string client_id, v1::Frame request,
                  std::chrono::milliseconds deadline, std::function<void(result<v1::Frame>)> done);

}  // namespace txmq::broker::cluster_mode
