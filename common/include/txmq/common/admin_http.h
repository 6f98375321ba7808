#pragma once

// A small admin HTTP/1.1 server, the broker's and the relay's: GET /healthz, GET /metrics and
// routes that its owner registers (the broker's webhook reconciliation API, docs/protocol.md
// §11).
//
// Runs on a caller-owned io_context: one acceptor coroutine and one coroutine per connection,
// all on one strand of that io_context, so handlers never run concurrently with each other.
// Connections are kept alive between requests. A request must arrive completely within
// `read_timeout` (which also closes idle keep-alive connections), or the connection is closed;
// a request over the size limits or malformed is answered 413/431/400 and the connection
// closed.
//
// Thread-safety: add_route(), add_async_route() and set_health_check() may be called from any
// thread at any time. start() and stop() must not run concurrently with each other.
// Handlers run on an io_context thread: a synchronous handler must not block (no RocksDB
// reads, no fsync); work that blocks belongs in an async handler that awaits another executor.
//
// Lifetime: the metrics_registry must outlive the server. The server may be destroyed while
// the io_context still runs; its connections then close shortly after.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/verb.hpp>

#include "txmq/common/metrics.h"
#include "txmq/protocol/result.h"

namespace txmq::common {

// What a route handler sees of a request; valid for the duration of the handler call (for an
// async handler, until its awaitable completes).
struct http_request {
  boost::beast::http::verb method;
  std::string_view target;  // as sent: "/v1/topics/t/messages?after=x&limit=10"
  std::string_view path;    // target up to '?': "/v1/topics/t/messages"
  std::string_view query;   // after '?', without it: "after=x&limit=10" (may be empty)
  const boost::beast::http::fields& headers;
  std::string_view body;
};

struct http_response {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // Extra response headers (e.g. {"Retry-After", "5"}); Content-Type/Length are set for you.
  std::vector<std::pair<std::string, std::string>> headers;
};

// What /healthz reports: 200 "ok", or 503 with `reason` as the body.
struct health_status {
  bool healthy = true;
  std::string reason;
};

struct admin_http_options {
  std::size_t max_header_bytes = 16 * 1024;    // larger request head: 431, close
  std::size_t max_body_bytes = 1024 * 1024;    // larger body: 413, close
  std::chrono::milliseconds read_timeout{10'000};   // whole request, and keep-alive idle time
  std::chrono::milliseconds write_timeout{10'000};  // whole response
  // At this many, a new connection closes the one that has waited longest for a request (idle
  // or slowly sent), so silent sockets cannot lock out a health probe; if every connection is
  // being answered, the new one is closed.
  std::size_t max_connections = 64;
  // Where errors go (failed accepts, handler exceptions, connection coroutines that threw).
  // Called on an io_context thread. Empty: a warning through txmq/common/log.h.
  std::function<void(std::string_view)> log_error;
};

namespace detail {
struct admin_http_state;
}  // namespace detail

class admin_http_server {
 public:
  using handler = std::function<http_response(const http_request&)>;
  using async_handler =
      std::function<boost::asio::awaitable<http_response>(const http_request&)>;

  // Registers GET /healthz (healthy until set_health_check() says otherwise) and GET /metrics.
  admin_http_server(boost::asio::io_context& io, const metrics_registry& metrics,
                    admin_http_options options = {});
  // Closes the acceptor and the connections without waiting (see stop()).
  ~admin_http_server();
  admin_http_server(const admin_http_server&) = delete;
  admin_http_server& operator=(const admin_http_server&) = delete;

  // Replaces the /healthz check. It runs on an io_context thread for every request; an
  // exception from it answers 500.
  void set_health_check(std::function<health_status()> check);

  // Routes a request whose path equals `path_prefix` or continues it after a '/' (the prefix
  // "/v1/messages" matches "/v1/messages" and "/v1/messages/abc", not "/v1/messagesx"; a
  // prefix ending in '/' matches everything below it). The longest matching prefix with the
  // request's method wins. A path that matches only routes of other methods is answered 405
  // with an Allow header; a path that matches nothing, 404. A handler that throws answers 500.
  // Registering the same method and prefix again replaces the handler.
  void add_route(boost::beast::http::verb method, std::string path_prefix, handler h);
  // The same for a coroutine handler, for work that must wait (storage reads on another
  // executor). The returned awaitable is awaited on the server's strand.
  void add_async_route(boost::beast::http::verb method, std::string path_prefix,
                       async_handler h);

  // Binds and listens on `where` (port 0 picks a free port) and starts accepting on the
  // io_context. Returns the bound endpoint. Errors (address in use, permission denied,
  // address not available, started twice) are returned as values, their text saying what
  // failed on which address and what to do.
  [[nodiscard]] result<boost::asio::ip::tcp::endpoint> start(const boost::asio::ip::tcp::endpoint& where);

  // Stops accepting and closes every open connection (requests in progress are dropped).
  // Idempotent. Before start(), on the server's strand, or after the io_context has stopped,
  // it acts at once. From a thread that does not run the io_context, while it runs, it blocks
  // until the acceptor is closed (new connections are then refused). From an io_context
  // thread outside the server's strand it only schedules the closing (done as soon as the
  // strand runs), since blocking there could deadlock.
  void stop();

  // The endpoint start() bound, if it succeeded.
  [[nodiscard]] std::optional<boost::asio::ip::tcp::endpoint> local_endpoint() const;

 private:
  void add_any_route(boost::beast::http::verb method, std::string path_prefix, handler sync_h,
                     async_handler async_h);

  std::shared_ptr<detail::admin_http_state> state_;
};

}  // namespace txmq::common
