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
// closed. With options.tls the server speaks HTTPS only (TLS 1.2+, the context's settings).
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
#include <variant>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
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
  // Set by the access hook (set_access_hook) for routes that need a principal: who sent the
  // request. Empty without a hook and on public routes.
  std::string_view principal;
  // The CN of the client's verified certificate (mTLS), set by the TLS layer; names the
  // principal when no bearer token is sent. Unset for plain TCP.
  std::optional<std::string_view> cert_principal;
};

struct http_response {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // Extra response headers (e.g. {"Retry-After", "5"}); Content-Type/Length are set for you.
  std::vector<std::pair<std::string, std::string>> headers;
};

// One (permission, resource) a route needs ("admin", "cluster"; "produce", "topic:orders").
// The server does not interpret them: the access hook does.
struct http_access {
  std::string permission;
  std::string resource;
};

// Who may call a route, when the server has an access hook (without one every route is open).
struct route_access {
  enum class kind {
    needs,     // authenticated, and `needs` (or admin on cluster when `needs` is empty) granted
    open,      // anyone (GET /healthz)
    by_route,  // the handler authenticates on its own (the webhook reconciliation API's tokens)
    per_request,  // `resolve` says which of the others applies to this request (one prefix, many routes)
  };
  kind what = kind::needs;
  // The pairs a request needs; may read the path (a topic named in it). Empty: admin on cluster.
  std::function<std::vector<http_access>(const http_request&)> needs;
  // per_request: the access of this request (its kind must not be per_request again).
  std::function<route_access(const http_request&)> resolve;

  [[nodiscard]] static route_access open_to_all() { return {kind::open, {}, {}}; }
  [[nodiscard]] static route_access by_handler() { return {kind::by_route, {}, {}}; }
  [[nodiscard]] static route_access fixed(std::string permission, std::string resource) {
    return {kind::needs,
            [p = std::move(permission), r = std::move(resource)](const http_request&) {
              return std::vector<http_access>{{p, r}};
            },
            {}};
  }
  [[nodiscard]] static route_access computed(std::function<std::vector<http_access>(const http_request&)> f) {
    return {kind::needs, std::move(f), {}};
  }
  [[nodiscard]] static route_access by_request(std::function<route_access(const http_request&)> f) {
    route_access a{kind::per_request, {}, {}};
    a.resolve = std::move(f);
    return a;
  }
};

// The generic authentication and authorization of the admin HTTP server, supplied by its owner
// (the broker's principals and ACLs). Both run on the server's strand before the handler.
struct http_access_hook {
  // The principal the request authenticates as (from `Authorization: Bearer TOKEN` or
  // cert_principal), or the answer refusing it (401 with a WWW-Authenticate header).
  std::function<std::variant<std::string, http_response>(const http_request&)> authenticate;
  // nullopt when `principal` holds every pair; otherwise the answer (403).
  std::function<std::optional<http_response>(const std::string& principal, const std::vector<http_access>& needs)>
      authorize;
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
  // Of max_connections, never held by async requests (long-poll fetches, reads on another
  // executor): at most max_connections - reserved_connections of those run at once, and one
  // beyond that is answered 503 with Retry-After: 1 at once. So the connections that are all
  // being answered are never all of them, and a new /healthz or /metrics always finds a slot
  // (a waiting connection is closed for it).
  std::size_t reserved_connections = 8;
  // Serve HTTPS: called at each accept for the TLS context to use (so a reloaded certificate
  // serves new connections). Empty: plain HTTP. The handshake counts against read_timeout.
  std::function<std::shared_ptr<boost::asio::ssl::context>()> tls;
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
  // `access` says who may call it when an access hook is set (default: admin on cluster).
  void add_route(boost::beast::http::verb method, std::string path_prefix, handler h, route_access access = {});
  // The same for a coroutine handler, for work that must wait (storage reads on another
  // executor). The returned awaitable is awaited on the server's strand.
  void add_async_route(boost::beast::http::verb method, std::string path_prefix,
                       async_handler h, route_access access = {});

  // Checks every request against its route's access (see route_access) before the handler
  // runs: hook.authenticate, then hook.authorize with what the route needs. /healthz is open;
  // every other route without a declared access needs admin on cluster (GET /metrics too).
  // Without a hook (the default) nothing is checked. May be called from any thread.
  void set_access_hook(http_access_hook hook);

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
                     async_handler async_h, route_access access);

  std::shared_ptr<detail::admin_http_state> state_;
};

}  // namespace txmq::common
