#pragma once

// A connection to a txmq broker (docs/protocol.md): framing, the Hello handshake, pipelined
// requests matched by correlation id, automatic reconnect, and requests the broker sends to
// the client (CheckTx).
//
// Thread-safety: every member function may be called from any thread. The connection owns an
// io thread on which all socket work runs; completion callbacks of async_request run on that
// thread and must not block (in particular must not call request(), which refuses with
// errc::would_deadlock there).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "txmq/client/error.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::client {

// "HOST:PORT", "[v6addr]:PORT". Errors: errc::bad_address.
struct broker_address {
  std::string host;
  std::uint16_t port = 0;

  [[nodiscard]] static result<broker_address> parse(std::string_view text);
  [[nodiscard]] std::string to_string() const;
};

inline constexpr std::string_view default_broker_address = "127.0.0.1:7878";

// TLS to the broker (docs/security.md "TLS"): TLS 1.2 or later, the broker's certificate chain
// verified against `ca_file` (or the system's CAs) and its host name against the certificate.
struct tls_options {
  bool enabled = false;      // --tls, or implied by --tls-ca
  std::string ca_file;       // PEM CAs to trust; empty = the system's
  std::string cert_file;     // client certificate (mTLS); empty = none
  std::string key_file;      // its private key
  std::string server_name;   // name to verify and send as SNI; empty = the host of `address`
};

struct connection_options {
  // HOST:PORT, or a bootstrap list HOST:PORT,HOST:PORT,... (cluster mode): each failed connect
  // attempt moves on to the next address.
  std::string address{default_broker_address};
  std::string client_id = "txmq-cpp";           // for the broker's logs and metrics
  std::string producer_group;                   // set by transactional producers (CheckTx)
  std::string auth_token;                       // empty when the broker has no auth
  tls_options tls;                              // off: plaintext
  // Resolve + TCP connect + Hello/HelloOk, per attempt.
  std::chrono::milliseconds connect_timeout{5000};
  // Default for request() and async_request() when they are given none. Counts from the call,
  // including time spent waiting for a connection.
  std::chrono::milliseconds request_timeout{30000};
  // A link that passes nothing (no reset) fails the connection within about this, which then
  // reconnects: TCP keepalive and TCP_USER_TIMEOUT. Also when TCP stays up but nothing comes
  // back (a stalled or half-open path through a proxy): a request that times out after this
  // long without any answer from the broker ends the session. 0 = the kernel's defaults
  // (~15 minutes) and no such check.
  std::chrono::milliseconds dead_link_timeout{30000};
  // Reconnect back-off: doubles from initial to max after each failed attempt, with +-20%
  // jitter; reset by a successful handshake.
  std::chrono::milliseconds reconnect_backoff_initial{50};
  std::chrono::milliseconds reconnect_backoff_max{5000};
  // Encoded request bytes waiting to be written (including while disconnected). A request that
  // would pass it fails with errc::write_queue_full; a lone request is always accepted.
  std::size_t max_write_queue_bytes = 64u << 20;
  // Cluster mode's connections to one node (leader_router): while the connection is down after a
  // failed connect attempt, a request fails at once with errc::not_connected (retriable), and
  // the requests waiting for a reconnect fail when an attempt fails, so that the caller reads
  // Metadata again and sends them to the partition's new leader instead of waiting its request
  // timeout for a dead node. Off (the default): a request waits for the broker to come back
  // within its timeout.
  bool fail_while_unreachable = false;
  // Our own cap on frames we receive, on top of HelloOk.max_frame_bytes (0 = just the broker's).
  std::uint32_t max_frame_bytes = 0;
  // Threads that run the request handler (set_request_handler), so that one slow answer (a
  // checker waiting on a database lock) does not hold up the others.
  std::size_t request_handler_threads = 1;
  // Diagnostics (connects, losses, protocol violations). Default: none. Called on the io thread.
  std::function<void(std::string_view)> log;
};

// What the broker said in HelloOk.
struct server_info {
  std::uint32_t protocol_version = 0;
  std::string broker_id;
  std::uint32_t max_frame_bytes = 0;
  std::uint32_t max_message_bytes = 0;
};

class connection {
 public:
  using response_callback = std::function<void(result<v1::Frame>)>;
  // Answers a request the broker sent (a frame whose body is not a response type). Runs on a
  // thread of its own, never on the io thread, so it may block. The returned frame is sent
  // back with the broker's correlation_id; std::nullopt sends nothing. Without a handler the
  // connection answers UNKNOWN_REQUEST.
  using request_handler = std::function<std::optional<v1::Frame>(const v1::Frame&)>;

  // Starts the io thread and the first connection attempt; does not wait for it. Requests made
  // before the handshake completes wait for it (within their timeout).
  explicit connection(connection_options options);
  // Closes (see close()) and joins the io thread.
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // Constructs a connection and waits up to options.connect_timeout for the first handshake.
  // Errors: errc::bad_address; errc::tls_failed (the files do not load, the certificate is not
  // trusted or names another host, the port is not a TLS port, ...); the broker's handshake Error (NOT_AUTHENTICATED,
  // UNSUPPORTED_VERSION, ...); errc::not_connected with the last connect failure's text.
  [[nodiscard]] static result<std::shared_ptr<connection>> connect(connection_options options);

  // Waits until a handshake has completed (now or within timeout). Errors as connect().
  [[nodiscard]] result<void> wait_connected(std::chrono::milliseconds timeout);

  // Sends a request and calls cb exactly once, on the io thread, with the response frame or an
  // error: the broker's Error frame (code as protocol::errc, its text kept), errc::timeout,
  // errc::connection_lost (the request was written and the connection broke before its answer;
  // it may have been applied), errc::write_queue_full, errc::closed, or protocol::errc::
  // frame_too_large when the encoded request exceeds the broker's max_frame_bytes.
  // The frame's correlation_id is set by the connection.
  void async_request(v1::Frame request, response_callback cb,
                     std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // The same, for a request the caller keeps: it is encoded before this returns (its
  // correlation_id set) and left to the caller. The producer lends a batch's messages to the
  // request this way (RepeatedPtrField::UnsafeArenaAddAllocated) instead of copying each one in,
  // and takes them back afterwards: it keeps them for a retry.
  void async_request_encoding_now(v1::Frame& request, response_callback cb,
                                  std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  // Blocking form of async_request. Errors as async_request, plus errc::would_deadlock when
  // called on the io thread (from a callback).
  [[nodiscard]] result<v1::Frame> request(v1::Frame request,
                                          std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  void set_request_handler(request_handler handler);

  [[nodiscard]] bool is_connected() const noexcept;
  // The HelloOk of the current (or last) connection; std::nullopt before the first handshake.
  [[nodiscard]] std::optional<server_info> server() const;
  // Successful handshakes so far (1 after the first connect, +1 per reconnect).
  [[nodiscard]] std::uint64_t connects() const noexcept;
  [[nodiscard]] const connection_options& options() const noexcept;

  // Stops reconnecting, closes the socket and fails every outstanding request with
  // errc::closed. Idempotent; also done by the destructor. Must not be called on the io thread.
  void close();

 private:
  class impl;
  std::unique_ptr<impl> impl_;
};

// True for body types that answer a request (Error, HelloOk, *Response, TopicInfo, GroupInfo,
// DeliveryResults); the broker's own requests are everything else.
[[nodiscard]] bool is_response(const v1::Frame& frame) noexcept;

}  // namespace txmq::client
