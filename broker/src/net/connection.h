#pragma once

// One client connection: a reader coroutine that checks each frame's length before allocating,
// parses it and hands requests to the service, and a writer coroutine that drains a bounded
// queue of encoded frames. The handlers answer through its responder interface. Runs on the
// broker's io thread; not thread-safe.

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include <boost/asio.hpp>

#include "net/responder.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::broker {

class service;

struct connection_limits {
  std::uint32_t max_frame_bytes = 8u << 20;
  std::uint32_t max_in_flight = 1024;
  std::size_t max_queued_bytes = 64u << 20;
};

class connection final : public responder, public std::enable_shared_from_this<connection> {
 public:
  connection(boost::asio::ip::tcp::socket socket, service& svc, connection_limits limits, std::uint64_t id);

  void start();
  // The responder interface (net/responder.h). Answers and requests are queued for the writer.
  void respond(v1::Frame frame) override;
  void send_request(const v1::Frame& frame) override;
  // Closes after the queued frames are written.
  void close() override;
  [[nodiscard]] std::uint64_t id() const noexcept override { return id_; }
  [[nodiscard]] bool is_open() const noexcept override { return !closed_; }
  [[nodiscard]] const std::string& client_id() const noexcept override { return client_id_; }
  [[nodiscard]] const std::string& producer_group() const noexcept override { return producer_group_; }
  [[nodiscard]] const std::string& peer() const noexcept override { return peer_; }

 private:
  boost::asio::awaitable<void> reader();
  boost::asio::awaitable<void> writer();
  void enqueue(const v1::Frame& frame);
  // A protocol violation: tell the peer why (answering `correlation_id` when the frame that
  // broke the rules had one), then close.
  void fail(v1::ErrorCode code, std::string text, std::uint64_t correlation_id = 0);
  void shutdown();

  boost::asio::ip::tcp::socket socket_;
  service& service_;
  connection_limits limits_;
  std::uint64_t id_;
  std::string peer_;
  std::string client_id_;
  std::string producer_group_;
  bool hello_done_ = false;
  bool closing_ = false;  // no more reads; close once the queue is written
  bool closed_ = false;
  std::uint32_t in_flight_ = 0;
  std::deque<std::string> queue_;
  std::size_t queued_bytes_ = 0;
  boost::asio::steady_timer wake_writer_;
};

}  // namespace txmq::broker
