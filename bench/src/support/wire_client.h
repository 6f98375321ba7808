#pragma once

// A lean pipelined wire-protocol client for the load generator: one Asio thread, one or more
// connections, requests answered through callbacks on that thread. Not a user library (that is
// txmq::producer / txmq::consumer): it exists so the benchmark controls exactly what is in flight.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include <boost/asio.hpp>

#include "txmq/common/tls.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::bench {

class wire_connection : public std::enable_shared_from_this<wire_connection> {
 public:
  // The answer may be moved from (a consumer keeps a Fetch answer of 1,000 messages without copying it).
  using callback = std::function<void(v1::Frame&)>;

  // With `tls`, the connection speaks TLS and verifies the broker's certificate for `server_name`.
  wire_connection(boost::asio::io_context& io, std::string host, std::uint16_t port,
                  std::shared_ptr<boost::asio::ssl::context> tls = nullptr, std::string server_name = {});
  // Connects and says Hello (with `auth_token` for a broker with auth); throws on failure,
  // with the broker's refusal. Call before io.run() or from the io thread.
  void connect_blocking(const std::string& client_id, const std::string& auth_token = {});
  // Sends a request; cb runs on the io thread with the answer (or an Error frame). Throws
  // std::runtime_error once the broker has closed the connection.
  void request(v1::Frame frame, callback cb) { send_encoded_now(frame, std::move(cb)); }
  // The same for a frame the caller keeps: it is encoded before this returns (its correlation id
  // set), so the caller may clear and refill it for the next request, reusing its messages and
  // strings instead of allocating and freeing them for every request.
  void send_encoded_now(v1::Frame& frame, callback cb);
  [[nodiscard]] std::size_t pending() const noexcept { return pending_.size(); }

 private:
  boost::asio::awaitable<void> read_loop();
  void flush();

  boost::asio::io_context& io_;
  common::wire_stream stream_;
  std::string server_name_;
  std::string host_;
  std::uint16_t port_;
  std::uint64_t next_id_ = 1;
  std::unordered_map<std::uint64_t, callback> pending_;
  std::string out_;       // frames waiting to be written
  std::string writing_;   // frames being written
  bool write_active_ = false;
  bool dispatching_ = false;  // the read loop is handing out answers: requests wait for its flush
  std::string lost_;          // why the connection ended, once it has
};

}  // namespace txmq::bench
