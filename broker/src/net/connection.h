#pragma once

// One client connection: a reader coroutine that checks each frame's length before allocating,
// reads large bodies in chunks as their bytes arrive, parses each frame and hands requests to the
// service; a writer coroutine that drains a bounded queue of encoded frames; and a watchdog that
// closes the connection when a deadline passes (Hello, a started frame, idleness;
// docs/semantics.md §6). The handlers answer through its responder interface. Runs on the
// broker's io thread; not thread-safe.
//
// On the TLS port the stream is TLS over the socket (common::wire_stream): the handshake runs
// first, bounded by hello_timeout; a peer whose first byte is no TLS record is answered, in
// plaintext, an Error saying the port requires TLS, and closed.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include <optional>

#include <boost/asio.hpp>

#include "net/io_pacer.h"
#include "net/request_memory.h"
#include "txmq/common/tls.h"
#include "net/responder.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::broker {

class service;

struct connection_limits {
  std::uint32_t max_frame_bytes = 8u << 20;
  std::uint32_t max_in_flight = 1024;
  std::size_t max_queued_bytes = 64u << 20;
  // From accept to the end of the Hello frame.
  std::chrono::milliseconds hello_timeout{10'000};
  // From a frame's first byte to its last.
  std::chrono::milliseconds frame_read_timeout{30'000};
  // Nothing received and no request in flight for this long closes the connection; 0 = off.
  std::chrono::milliseconds idle_timeout{0};
  // The broker-wide budget of requests being handled (max_request_memory); nullptr = none.
  // Outlives the connection's use of it (the broker owns it).
  request_memory* memory = nullptr;
  // Paces deadline closes (hello, frame, idle, closing) broker-wide, so that thousands reaching
  // their deadline together do not hold up the other connections (net/io_pacer.h); nullptr =
  // unpaced. Owned by the broker like `memory`.
  io_pacer* pacer = nullptr;
};

class connection final : public responder, public std::enable_shared_from_this<connection> {
 public:
  // `on_closed` runs once, when the socket is closed (the broker counts open sockets with it).
  connection(common::wire_stream stream, service& svc, connection_limits limits, std::uint64_t id,
             std::function<void()> on_closed = {});

  void start();
  // The responder interface (net/responder.h). Answers and requests are queued for the writer.
  void respond(v1::Frame frame) override;
  void respond_with(const v1::Frame& frame) override;
  void respond_encoded(std::uint64_t correlation_id, std::string_view frame) override;
  void send_request(const v1::Frame& frame) override;
  // Closes after the queued frames are written.
  void close() override;
  [[nodiscard]] std::uint64_t id() const noexcept override { return id_; }
  [[nodiscard]] bool is_open() const noexcept override { return !closed_; }
  [[nodiscard]] const std::string& client_id() const noexcept override { return client_id_; }
  [[nodiscard]] const std::string& producer_group() const noexcept override { return producer_group_; }
  [[nodiscard]] const std::string& peer() const noexcept override { return peer_; }
  [[nodiscard]] const std::string& principal() const noexcept override { return principal_; }
  // The CN of the client certificate verified during the TLS handshake (mTLS); std::nullopt on
  // the plain port or without a client certificate. Set before the Hello is read, so Hello's
  // authentication takes it as the principal when no token is sent.
  [[nodiscard]] const std::optional<std::string>& cert_principal() const noexcept { return cert_principal_; }

 private:
  // What the watchdog enforces now; each kind closes the connection with its own reason.
  enum class deadline_kind { none, hello, frame, idle, closing };

  // TLS port: refuses a plaintext peer, runs the handshake, then starts reader and writer.
  boost::asio::awaitable<void> tls_handshake();
  void start_io();
  // The completion of a coroutine of this connection: logs an exception and closes.
  std::function<void(std::exception_ptr)> log_end(const char* what);
  boost::asio::awaitable<void> reader();
  // One complete frame read by the reader: Hello, an answer to a CheckTx, or a request for the
  // service. False: the connection failed (fail() said why) and reads no more.
  bool handle_frame(const std::shared_ptr<responder>& self, v1::Frame& f, std::size_t frame_bytes);
  boost::asio::awaitable<void> writer();
  boost::asio::awaitable<void> watchdog();
  // `after` 0 = no deadline.
  void set_deadline(deadline_kind kind, std::chrono::milliseconds after);
  void deadline_passed();
  void enqueue(const v1::Frame& frame);
  // An Error frame that is no answer to an admitted request, so it frees no in-flight slot.
  void send_error(std::uint64_t correlation_id, v1::ErrorCode code, std::string text);
  // A protocol violation: tell the peer why (answering `correlation_id` when the frame that
  // broke the rules had one), then close.
  void fail(v1::ErrorCode code, std::string text, std::uint64_t correlation_id = 0);
  void shutdown();
  // Gives back what the request answered by `correlation_id` held of limits_.memory.
  void release_request(std::uint64_t correlation_id);

  common::wire_stream stream_;
  service& service_;
  connection_limits limits_;
  std::uint64_t id_;
  std::function<void()> on_closed_;
  std::string peer_;
  std::string client_id_;
  std::string producer_group_;
  std::string principal_;
  std::optional<std::string> cert_principal_;
  bool handshaking_ = false;  // TLS handshake running: nothing can be sent yet
  bool hello_done_ = false;
  bool closing_ = false;  // no more reads; close once the queue is written
  bool closed_ = false;
  std::uint32_t in_flight_ = 0;
  // What each request in flight holds of limits_.memory, by correlation id (a client may reuse
  // one: each answer releases one charge).
  std::unordered_multimap<std::uint64_t, std::size_t> charged_;
  // Encoded frames not yet handed to the writer's write (bounded by max_queued_bytes).
  std::string out_;
  boost::asio::steady_timer wake_writer_;
  boost::asio::steady_timer deadline_timer_;
  boost::asio::steady_timer::time_point deadline_ = boost::asio::steady_timer::time_point::max();
  deadline_kind deadline_kind_ = deadline_kind::none;
};

// Answers a socket accepted beyond max_connections with `error` (correlation id 0) and closes
// it. The close lingers up to a second, reading and dropping what the peer sends, so that an
// unread Hello does not turn the close into a reset that discards the answer.
boost::asio::awaitable<void> refuse_connection(boost::asio::ip::tcp::socket socket, v1::Frame error);

}  // namespace txmq::broker
