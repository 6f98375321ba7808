#pragma once

// The HTTP/JSON API on the admin port (docs/http-api.md, DESIGN §6): every /v1 route is turned
// into the wire protocol's request Frame and handed to the same service::handle a TCP
// connection uses, through a responder of its own (net/responder.h) whose answer the HTTP
// coroutine awaits. So limits, checks and (once merged) ACLs are the wire protocol's, and a
// long poll parks in the consumer group like a wire fetch: the io thread never blocks.
//
// The route table (routes()) names, per route, the permission and the resource an
// authorisation hook must check (DESIGN §7: produce on topic:{topic}, consume on
// group:{group}, admin on cluster, ...); required_access() resolves it for one request.
// GET /v1/openapi.json answers openapi_document(), which lists every route of the table
// (checked by http_api_test).
//
// Runs on the broker's io thread (the admin HTTP server's strand is on the same io_context,
// which one thread runs): not thread-safe otherwise.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/http/verb.hpp>

#include "txmq/common/admin_http.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::broker {
class service;
}  // namespace txmq::broker

namespace txmq::broker::http_api {

class caller_peers;

// What a route requires of the caller's principal (DESIGN §7). `resource` may name path
// parameters in braces ("topic:{topic}"); required_access() fills them in.
struct route_info {
  boost::beast::http::verb method;
  std::string_view pattern;     // "/v1/topics/{topic}/messages"
  std::string_view permission;  // "produce", "consume", "admin"; "" = none (openapi.json);
                                // "webhook-token" = the subscription's bearer token
  std::string_view resource;    // "topic:{topic}", "group:{group}", "cluster", ""
  std::string_view summary;     // one line, as in openapi.json
};

// Every /v1 route the broker serves, in the order of docs/http-api.md.
[[nodiscard]] const std::vector<route_info>& routes();

struct access {
  std::string permission;
  std::string resource;  // "topic:orders"
};
// The permission and resource the request `method path` needs, or nullopt when no route
// matches. Path parameters are percent-decoded.
[[nodiscard]] std::optional<access> required_access(boost::beast::http::verb method, std::string_view path);

// The OpenAPI 3.0 description of the API (JSON text).
[[nodiscard]] std::string_view openapi_document() noexcept;

// The HTTP status of a wire error code (400, 404, 409, 413, 429, 503, ...).
[[nodiscard]] unsigned http_status(v1::ErrorCode code) noexcept;

// Longest long poll of an HTTP fetch (wait_ms is clamped to it): proxies and HTTP clients
// time out idle requests, and a parked request holds one of the admin server's connections.
inline constexpr std::uint32_t k_max_wait_ms = 30'000;

class gateway {
 public:
  gateway(service& svc, std::uint32_t max_frame_bytes);
  ~gateway();
  gateway(const gateway&) = delete;
  gateway& operator=(const gateway&) = delete;

  // Registers the /v1 routes on `server` (replacing the reconciliation API's GET prefix
  // /v1/topics/, which it serves itself through the webhook notifier).
  void register_routes(common::admin_http_server& server);

  // Hands `request` to the service as a wire request would be and returns its answer (a
  // response body or an Error). Must run on the io thread.
  // `principal`: who the admin HTTP server's access hook authenticated the request as (empty
  // with auth off); the service checks its ACLs as for a wire connection's principal.
  [[nodiscard]] boost::asio::awaitable<v1::Frame> call(v1::Frame request, std::string_view principal = {});

  [[nodiscard]] service& svc() noexcept { return svc_; }
  [[nodiscard]] std::uint32_t max_frame_bytes() const noexcept { return max_frame_bytes_; }
  // Cluster mode: the kept connections of the cluster views, per HTTP caller (caller_peers.h).
  [[nodiscard]] caller_peers& peers() noexcept { return *peers_; }

 private:
  boost::asio::awaitable<common::http_response> dispatch(const common::http_request& req);

  service& svc_;
  std::uint32_t max_frame_bytes_;
  // Ids of the HTTP callers' responders: high bit set, so they never equal a connection's.
  std::uint64_t next_id_ = std::uint64_t{1} << 63;
  std::unique_ptr<caller_peers> peers_;
};

}  // namespace txmq::broker::http_api
