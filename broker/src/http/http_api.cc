// The gateway from HTTP/JSON to the broker's request handling: a responder per call, the
// route matching and the error answers. The routes themselves are in http_routes.cc.

#include "http/http_api.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/parse_query.hpp>

#include "http/caller_peers.h"
#include "http/route_table.h"
#include "net/responder.h"
#include "service/service.h"

namespace txmq::broker::http_api {

namespace asio = boost::asio;
namespace json = boost::json;
namespace http = boost::beast::http;

extern const char* const k_openapi_json;

namespace {

// One HTTP call as the request handlers see it: it answers once, sends no requests of its own
// (an HTTP caller is never a transactional producer) and closes when the call is over.
class http_responder final : public responder {
 public:
  http_responder(asio::any_io_executor ex, std::uint64_t id, std::string principal)
      : timer_(std::move(ex)), id_(id), principal_(std::move(principal)) {}

  void respond(v1::Frame frame) override {
    if (answer_ || !open_) return;
    answer_ = std::move(frame);
    timer_.cancel();
  }
  void send_request(const v1::Frame&) override {}
  void close() override {
    open_ = false;
    timer_.cancel();
  }
  [[nodiscard]] std::uint64_t id() const noexcept override { return id_; }
  [[nodiscard]] bool is_open() const noexcept override { return open_; }
  [[nodiscard]] const std::string& client_id() const noexcept override { return client_id_; }
  [[nodiscard]] const std::string& producer_group() const noexcept override { return none_; }
  [[nodiscard]] const std::string& peer() const noexcept override { return client_id_; }
  // Who the access hook authenticated the HTTP request as (empty with auth off), so the
  // service checks the same ACLs as for a wire request.
  [[nodiscard]] const std::string& principal() const noexcept override { return principal_; }

  asio::steady_timer timer_;
  std::optional<v1::Frame> answer_;

 private:
  std::uint64_t id_;
  bool open_ = true;
  const std::string client_id_ = "http";
  const std::string none_;
  const std::string principal_;
};

std::vector<std::string> split_segments(std::string_view path) {
  std::vector<std::string> out;
  auto parsed = boost::urls::parse_origin_form(path);
  if (!parsed) return out;
  for (auto s : parsed->segments()) out.push_back(std::string(s));
  return out;
}

}  // namespace

bool match_pattern(std::string_view pattern, const std::vector<std::string>& segments,
                   std::map<std::string, std::string, std::less<>>& params) {
  std::size_t i = 0;
  std::size_t start = 1;  // past the leading '/'
  while (start <= pattern.size()) {
    const std::size_t end = std::min(pattern.find('/', start), pattern.size());
    const std::string_view seg = pattern.substr(start, end - start);
    if (i >= segments.size()) return false;
    if (seg.size() > 2 && seg.front() == '{' && seg.back() == '}') {
      if (segments[i].empty()) return false;
      params[std::string(seg.substr(1, seg.size() - 2))] = segments[i];
    } else if (seg != segments[i]) {
      return false;
    }
    ++i;
    start = end + 1;
  }
  return i == segments.size();
}

common::http_response json_answer(unsigned status, const json::value& v) {
  return common::http_response{status, "application/json", json::serialize(v) + "\n", {}};
}

common::http_response error_answer(v1::ErrorCode code, std::string message) {
  auto r = json_answer(http_status(code), json::object{{"error", v1::ErrorCode_Name(code)}, {"message", std::move(message)}});
  // Retriable refusals: tell the caller when to come back.
  if (r.status == 429 || r.status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

common::http_response error_answer(const v1::Error& e) { return error_answer(e.code(), e.message()); }

unsigned http_status(v1::ErrorCode code) noexcept {
  switch (code) {
    case v1::INVALID_ARGUMENT:
    case v1::FRAME_MALFORMED:
    case v1::HELLO_REQUIRED:
    case v1::UNSUPPORTED_VERSION: return 400;
    case v1::NOT_AUTHENTICATED: return 401;
    case v1::NOT_AUTHORIZED: return 403;
    case v1::UNKNOWN_TOPIC:
    case v1::UNKNOWN_GROUP:
    case v1::UNKNOWN_DELIVERY:
    case v1::UNKNOWN_TX:
    case v1::UNKNOWN_REQUEST: return 404;
    case v1::TOPIC_EXISTS:
    case v1::TX_ALREADY_RESOLVED: return 409;
    case v1::MESSAGE_TOO_LARGE:
    case v1::FRAME_TOO_LARGE: return 413;
    case v1::LIMIT_EXCEEDED: return 429;
    // Cluster mode: another node leads the partition (the message names it): 421 Misdirected Request.
    case v1::NOT_LEADER: return 421;
    case v1::STORAGE_ERROR:
    case v1::SHUTTING_DOWN:
    case v1::STORE_UNAVAILABLE:
    case v1::STORE_FULL:
    case v1::NOT_ENOUGH_REPLICAS: return 503;  // retriable, as the others here
    default: return 500;
  }
}

const std::vector<route_info>& routes() {
  static const std::vector<route_info> infos = [] {
    std::vector<route_info> out;
    for (auto& r : route_table()) out.push_back(r.info);
    return out;
  }();
  return infos;
}

std::optional<access> required_access(http::verb method, std::string_view path) {
  const auto segments = split_segments(path);
  for (auto& r : route_table()) {
    std::map<std::string, std::string, std::less<>> params;
    if (r.info.method != method || !match_pattern(r.info.pattern, segments, params)) continue;
    access a{std::string(r.info.permission), std::string(r.info.resource)};
    for (auto& [name, value] : params) {
      const std::string token = "{" + name + "}";
      if (auto at = a.resource.find(token); at != std::string::npos) a.resource.replace(at, token.size(), value);
    }
    return a;
  }
  return std::nullopt;
}

std::string_view openapi_document() noexcept { return k_openapi_json; }

gateway::gateway(service& svc, std::uint32_t max_frame_bytes)
    : svc_(svc), max_frame_bytes_(max_frame_bytes), peers_(std::make_unique<caller_peers>(svc.io())) {}

gateway::~gateway() = default;

void gateway::register_routes(common::admin_http_server& server) {
  auto handler = [this](const common::http_request& req) { return dispatch(req); };
  // With auth on, the server's access hook checks each request against its route's entry in
  // the route table before the handler runs: the permission and resource it names, none for
  // openapi.json, the handler's own check for the webhook-token routes (reconciliation).
  auto access = common::route_access::by_request([](const common::http_request& req) {
    auto a = required_access(req.method, req.path);
    if (!a) return common::route_access{};  // no such route: admin, then the handler's 404
    if (a->permission.empty()) return common::route_access::open_to_all();
    if (a->permission == "webhook-token") return common::route_access::by_handler();
    return common::route_access::fixed(a->permission, a->resource);
  });
  // PUT and PATCH too, so that they get the API's JSON 405 rather than the server's text one.
  for (auto method : {http::verb::get, http::verb::post, http::verb::delete_, http::verb::put, http::verb::patch}) {
    server.add_async_route(method, "/v1/", handler, access);
  }
  // The reconciliation API registered GET /v1/topics/ (a longer prefix than /v1/); the route
  // table serves it (and the topic routes beside it) from here.
  server.add_async_route(http::verb::get, "/v1/topics/", handler, access);
}

asio::awaitable<v1::Frame> gateway::call(v1::Frame request, std::string_view principal) {
  auto ex = co_await asio::this_coro::executor;
  auto r = std::make_shared<http_responder>(ex, next_id_++, std::string(principal));
  request.set_correlation_id(1);
  svc_.handle(r, std::move(request));
  if (!r->answer_) {
    r->timer_.expires_at(asio::steady_timer::time_point::max());
    (void)co_await r->timer_.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  r->close();
  if (!r->answer_) {
    v1::Frame f;
    f.mutable_error()->set_code(v1::SHUTTING_DOWN);
    f.mutable_error()->set_message("the request was dropped: the broker is shutting down");
    co_return f;
  }
  co_return std::move(*r->answer_);
}

asio::awaitable<common::http_response> gateway::dispatch(const common::http_request& req) {
  const auto segments = split_segments(req.path);
  std::string allow;
  for (auto& r : route_table()) {
    std::map<std::string, std::string, std::less<>> params;
    if (!match_pattern(r.info.pattern, segments, params)) continue;
    if (r.info.method != req.method) {
      const std::string_view name = http::to_string(r.info.method);
      if (allow.find(name) == std::string::npos) allow += (allow.empty() ? "" : ", ") + std::string(name);
      continue;
    }
    route_context ctx{*this, req, std::move(params), {}};
    // A copy: Boost.URL's views must not outlive what they view.
    const std::string query(req.query);
    if (auto q = boost::urls::parse_query(query)) {
      for (auto p : *q) ctx.query[std::string(p.key)] = std::string(p.value);
    } else {
      co_return error_answer(v1::INVALID_ARGUMENT, "malformed query string");
    }
    co_return co_await r.handler(ctx);
  }
  if (!allow.empty()) {
    auto res = error_answer(v1::INVALID_ARGUMENT, std::string(http::to_string(req.method)) + " is not allowed on " +
                                                      std::string(req.path) + "; allowed: " + allow);
    res.status = 405;
    res.headers.emplace_back("Allow", allow);
    co_return res;
  }
  co_return error_answer(v1::UNKNOWN_REQUEST, "no API route " + std::string(req.path) + " (see GET /v1/openapi.json)");
}

}  // namespace txmq::broker::http_api
