#include "txmq/common/admin_http.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <future>
#include <map>
#include <mutex>
#include <sstream>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "txmq/common/log.h"
#include "txmq/common/tls.h"

namespace txmq::common {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using asio::use_awaitable;
constexpr auto k_as_tuple = asio::as_tuple(asio::use_awaitable);

namespace detail {

struct route {
  http::verb method;
  std::string prefix;
  admin_http_server::handler sync_handler;    // exactly one of the two is set
  admin_http_server::async_handler async_handler;
  route_access access;
};

struct admin_http_state : std::enable_shared_from_this<admin_http_state> {
  admin_http_state(asio::io_context& io, const metrics_registry& metrics,
                   admin_http_options options)
      : io_(io),
        strand_(asio::make_strand(io)),
        acceptor_(strand_),
        metrics_(metrics),
        options_(std::move(options)) {}

  void log(std::string_view text) const {
    if (options_.log_error) {
      options_.log_error(text);
    } else {
      log::warn("admin HTTP: ", text);
    }
  }

  // Completion handler for co_spawn: a coroutine that ends by an exception is a bug; say so.
  auto log_exceptions(std::string what) {
    return [self = shared_from_this(), what = std::move(what)](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        self->log(what + " failed: " + ex.what());
      } catch (...) {
        self->log(what + " failed with an unknown exception");
      }
    };
  }

  // Runs on strand_ only (or when nothing else can run, see stop()).
  void close_all() {
    stopped_ = true;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    for (auto& [stream, since] : connections_) stream->close();
  }

  [[nodiscard]] std::size_t max_async_requests() const {
    const std::size_t reserved = std::min(options_.reserved_connections, options_.max_connections);
    return std::max<std::size_t>(1, options_.max_connections - reserved);
  }

  asio::awaitable<void> accept_loop();
  asio::awaitable<void> session(tcp::socket socket);
  // The request loop over a plain or a TLS stream whose TCP layer is `tcp`.
  template <class Stream>
  asio::awaitable<void> serve(Stream& stream, beast::tcp_stream& tcp);
  // `cert_principal`: the CN of the client certificate verified by the TLS handshake (mTLS),
  // which names the principal when the request carries no token.
  asio::awaitable<http::response<http::string_body>> respond(
      const http::request<http::string_body>& req, const std::optional<std::string>& cert_principal);

  asio::io_context& io_;
  asio::strand<asio::io_context::executor_type> strand_;
  tcp::acceptor acceptor_;
  const metrics_registry& metrics_;
  const admin_http_options options_;

  // Touched on strand_ only.
  bool stopped_ = false;
  // Async requests being answered (bounded by max_connections - reserved_connections).
  std::size_t async_running_ = 0;
  // Each connection and since when it has been waiting for a request (time_point::max() while
  // a request is being answered).
  std::map<beast::tcp_stream*, std::chrono::steady_clock::time_point> connections_;

  // Set by start() before anything runs, read-only afterwards.
  bool started_ = false;
  std::optional<tcp::endpoint> local_;

  mutable std::mutex mutex_;  // guards routes_, health_ and hook_
  std::vector<route> routes_;
  std::optional<http_access_hook> hook_;
  std::function<health_status()> health_;
};

namespace {

bool prefix_matches(std::string_view prefix, std::string_view path) {
  if (!path.starts_with(prefix)) return false;
  return path.size() == prefix.size() || prefix.ends_with('/') || path[prefix.size()] == '/';
}

http::response<http::string_body> make_response(const http::request<http::string_body>& req,
                                                http_response r) {
  http::response<http::string_body> res;
  res.version(req.version());
  // Beast refuses codes outside 100..999; a handler returning one is a bug, not a crash.
  res.result(r.status >= 100 && r.status <= 999 ? r.status : 500);
  res.set(http::field::server, "txmq");
  res.set(http::field::content_type, r.content_type);
  for (auto& [name, value] : r.headers) res.set(name, value);
  res.body() = std::move(r.body);
  res.keep_alive(req.keep_alive());
  res.prepare_payload();
  return res;
}

// An answer to a request that could not be read; the connection closes after it.
http::response<http::string_body> make_error_response(http::status status, std::string body) {
  http::response<http::string_body> res{status, 11};
  res.set(http::field::server, "txmq");
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  res.body() = std::move(body);
  res.keep_alive(false);
  res.prepare_payload();
  return res;
}

}  // namespace

asio::awaitable<void> admin_http_state::accept_loop() {
  auto self = shared_from_this();
  while (!stopped_) {
    auto [ec, socket] = co_await acceptor_.async_accept(k_as_tuple);
    if (stopped_ || ec == asio::error::operation_aborted) break;
    if (ec) {
      // Out of file descriptors and the like: say so, then back off instead of spinning.
      log("accept failed: " + ec.message());
      asio::steady_timer pause(strand_, std::chrono::milliseconds(100));
      (void)co_await pause.async_wait(k_as_tuple);
      continue;
    }
    if (connections_.size() >= options_.max_connections) {
      // Full: the connection that has waited longest for a request (idle, or a slow sender) is
      // closed to make room, so sockets that never send a request cannot lock out a health
      // probe. If every connection is being answered, the new one is closed instead.
      auto oldest = std::min_element(connections_.begin(), connections_.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
      if (oldest->second == std::chrono::steady_clock::time_point::max()) {
        boost::system::error_code ignored;
        socket.close(ignored);
        continue;
      }
      oldest->first->close();
      oldest->second = std::chrono::steady_clock::time_point::max();  // closing; not chosen again
    }
    asio::co_spawn(strand_, session(std::move(socket)), log_exceptions("admin HTTP connection"));
  }
}

asio::awaitable<void> admin_http_state::session(tcp::socket socket) {
  auto self = shared_from_this();
  if (!options_.tls) {
    beast::tcp_stream stream(std::move(socket));
    co_await serve(stream, stream);
    co_return;
  }
  auto ctx = options_.tls();
  beast::ssl_stream<beast::tcp_stream> stream(std::move(socket), *ctx);
  co_await serve(stream, stream.next_layer());
}

template <class Stream>
asio::awaitable<void> admin_http_state::serve(Stream& stream, beast::tcp_stream& tcp) {
  connections_[&tcp] = std::chrono::steady_clock::now();
  struct unregister {
    admin_http_state& state;
    beast::tcp_stream* stream;
    ~unregister() { state.connections_.erase(stream); }
  } guard{*this, &tcp};

  if constexpr (!std::is_same_v<Stream, beast::tcp_stream>) {
    tcp.expires_after(options_.read_timeout);
    auto [hec] = co_await stream.async_handshake(asio::ssl::stream_base::server, k_as_tuple);
    if (hec) {
      // A plaintext client or an untrusted one: nothing can be answered in HTTP; debug only,
      // as scanners do this all day.
      txmq::common::log::debug("admin HTTP: TLS handshake failed: ", hec.message());
      tcp.close();
      co_return;
    }
  }
  std::optional<std::string> cert_principal;
  if constexpr (!std::is_same_v<Stream, beast::tcp_stream>) {
    cert_principal = verified_peer_common_name(stream.native_handle());
  }
  beast::flat_buffer buffer;
  while (!stopped_) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
    parser.body_limit(options_.max_body_bytes);
    tcp.expires_after(options_.read_timeout);
    connections_[&tcp] = std::chrono::steady_clock::now();
    auto [read_ec, read_n] = co_await http::async_read(stream, buffer, parser, k_as_tuple);
    if (stopped_) break;
    connections_[&tcp] = std::chrono::steady_clock::time_point::max();
    if (read_ec) {
      std::optional<http::response<http::string_body>> answer;
      if (read_ec == http::error::header_limit) {
        answer = make_error_response(http::status::request_header_fields_too_large,
                                     "request header too large\n");
      } else if (read_ec == http::error::body_limit) {
        answer = make_error_response(http::status::payload_too_large, "request body too large\n");
      } else if (read_ec.category() == http::make_error_code(http::error::bad_target).category() &&
                 read_ec != http::error::end_of_stream &&
                 read_ec != http::error::partial_message) {
        answer = make_error_response(http::status::bad_request,
                                     "malformed request: " + read_ec.message() + "\n");
      }
      // Anything else is the peer leaving, the timeout or stop(): nothing to answer.
      if (answer) {
        tcp.expires_after(options_.write_timeout);
        (void)co_await http::async_write(stream, *answer, k_as_tuple);
      }
      break;
    }
    const auto& req = parser.get();
    auto res = co_await respond(req, cert_principal);
    if (stopped_) break;
    tcp.expires_after(options_.write_timeout);
    auto [write_ec, write_n] = co_await http::async_write(stream, res, k_as_tuple);
    if (write_ec || !res.keep_alive()) break;
  }
  boost::system::error_code ignored;
  tcp.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  tcp.close();
}

asio::awaitable<http::response<http::string_body>> admin_http_state::respond(
    const http::request<http::string_body>& req, const std::optional<std::string>& cert_principal) {
  const std::string_view target = req.target();
  const std::size_t question = target.find('?');
  const std::string_view path = target.substr(0, question);
  const std::string_view query =
      question == std::string_view::npos ? std::string_view() : target.substr(question + 1);

  admin_http_server::handler sync_h;
  admin_http_server::async_handler async_h;
  route_access access;
  std::optional<http_access_hook> hook;
  std::string allow;
  {
    std::lock_guard lock(mutex_);
    const route* best = nullptr;
    for (const auto& r : routes_) {
      if (!prefix_matches(r.prefix, path)) continue;
      if (r.method != req.method()) {
        const std::string_view name = http::to_string(r.method);
        if (allow.find(name) == std::string::npos) {
          if (!allow.empty()) allow += ", ";
          allow += name;
        }
        continue;
      }
      if (best == nullptr || r.prefix.size() > best->prefix.size()) best = &r;
    }
    if (best != nullptr) {
      sync_h = best->sync_handler;
      async_h = best->async_handler;
      access = best->access;
    }
    hook = hook_;
  }
  if (!sync_h && !async_h) {
    if (!allow.empty()) {
      http_response r{405, "text/plain; charset=utf-8",
                      "method " + std::string(req.method_string()) + " not allowed on " +
                          std::string(path) + "; allowed: " + allow + "\n",
                      {{"Allow", allow}}};
      co_return make_response(req, std::move(r));
    }
    co_return make_response(
        req, http_response{404, "text/plain; charset=utf-8",
                           "not found: " + std::string(path) + "\n", {}});
  }

  http_request view{req.method(), target, path, query, req.base(), req.body()};
  if (cert_principal) view.cert_principal = *cert_principal;
  http_response r;
  try {
    std::string principal;
    if (hook && access.what == route_access::kind::per_request) {
      access = access.resolve ? access.resolve(view) : route_access{};
      if (access.what == route_access::kind::per_request) access = route_access{};  // no loops: admin
    }
    if (hook && access.what == route_access::kind::needs) {
      auto who = hook->authenticate(view);
      if (auto* refused = std::get_if<http_response>(&who)) co_return make_response(req, std::move(*refused));
      principal = std::move(std::get<std::string>(who));
      view.principal = principal;
      std::vector<http_access> needs;
      if (access.needs) needs = access.needs(view);
      if (needs.empty()) needs.push_back({"admin", "cluster"});
      if (auto denied = hook->authorize(principal, needs)) co_return make_response(req, std::move(*denied));
    }
    if (sync_h) {
      r = sync_h(view);
    } else if (async_running_ >= max_async_requests()) {
      // Answered at once rather than held: a connection answering a long poll is not one that a
      // new connection can take, and these must leave room for health probes.
      r = http_response{503, "text/plain; charset=utf-8",
                        "too many requests in progress on the admin HTTP server (" +
                            std::to_string(async_running_) + "); retry shortly\n",
                        {{"Retry-After", "1"}}};
    } else {
      struct running {
        std::size_t& n;
        explicit running(std::size_t& count) : n(count) { ++n; }
        ~running() { --n; }
        running(const running&) = delete;
        running& operator=(const running&) = delete;
      } hold{async_running_};
      r = co_await async_h(view);
    }
  } catch (const std::exception& e) {
    log("handler for " + std::string(req.method_string()) + " " + std::string(path) +
        " threw: " + e.what());
    r = http_response{500, "text/plain; charset=utf-8", "internal error\n", {}};
  }
  co_return make_response(req, std::move(r));
}

}  // namespace detail

admin_http_server::admin_http_server(asio::io_context& io, const metrics_registry& metrics,
                                     admin_http_options options)
    : state_(std::make_shared<detail::admin_http_state>(io, metrics, std::move(options))) {
  add_route(http::verb::get, "/healthz", [state = state_.get()](const http_request&) {
    std::function<health_status()> check;
    {
      std::lock_guard lock(state->mutex_);
      check = state->health_;
    }
    if (!check) return http_response{200, "text/plain; charset=utf-8", "ok", {}};
    health_status h = check();
    if (h.healthy) return http_response{200, "text/plain; charset=utf-8", "ok", {}};
    return http_response{503, "text/plain; charset=utf-8",
                         h.reason.empty() ? std::string("unhealthy") : std::move(h.reason),
                         {}};
  }, route_access::open_to_all());
  add_route(http::verb::get, "/metrics", [state = state_.get()](const http_request&) {
    return http_response{200, std::string(k_metrics_content_type), state->metrics_.render(), {}};
  });
}

admin_http_server::~admin_http_server() {
  auto state = state_;
  if (!state->started_ || state->strand_.running_in_this_thread() || state->io_.stopped()) {
    state->close_all();
  } else {
    asio::post(state->strand_, [state] { state->close_all(); });
  }
}

void admin_http_server::set_health_check(std::function<health_status()> check) {
  std::lock_guard lock(state_->mutex_);
  state_->health_ = std::move(check);
}

void admin_http_server::add_route(http::verb method, std::string path_prefix, handler h, route_access access) {
  add_any_route(method, std::move(path_prefix), std::move(h), nullptr, std::move(access));
}

void admin_http_server::add_async_route(http::verb method, std::string path_prefix,
                                        async_handler h, route_access access) {
  add_any_route(method, std::move(path_prefix), nullptr, std::move(h), std::move(access));
}

void admin_http_server::set_access_hook(http_access_hook hook) {
  std::lock_guard lock(state_->mutex_);
  state_->hook_ = std::move(hook);
}

void admin_http_server::add_any_route(http::verb method, std::string path_prefix,
                                      handler sync_h, async_handler async_h, route_access access) {
  std::lock_guard lock(state_->mutex_);
  for (auto& r : state_->routes_) {
    if (r.method == method && r.prefix == path_prefix) {
      r.sync_handler = std::move(sync_h);
      r.async_handler = std::move(async_h);
      r.access = std::move(access);
      return;
    }
  }
  state_->routes_.push_back(detail::route{method, std::move(path_prefix), std::move(sync_h), std::move(async_h),
                                          std::move(access)});
}

result<tcp::endpoint> admin_http_server::start(const tcp::endpoint& where) {
  auto& s = *state_;
  const auto address_text = [&] {
    std::ostringstream os;
    os << where;
    return os.str();
  };
  if (s.started_) {
    return error(std::make_error_code(std::errc::operation_not_permitted), "admin HTTP server: start() called twice");
  }
  boost::system::error_code ec;
  const auto fail = [&](std::string_view step) -> result<tcp::endpoint> {
    std::string advice;
    if (ec == asio::error::address_in_use) {
      advice = "; another process (perhaps another txmq-broker or txmq-relay) uses this port: stop it or "
               "choose another address with --http HOST:PORT";
    } else if (ec == asio::error::access_denied) {
      advice = "; ports below 1024 need privileges: choose a port above 1024 with --http";
    } else if (ec == boost::system::errc::address_not_available) {
      advice = "; the address is not one of this host's: use 127.0.0.1 or a local address";
    }
    std::string text = "admin HTTP server cannot " + std::string(step) + " " + address_text() + ": " + ec.message() + advice;
    boost::system::error_code ignored;
    s.acceptor_.close(ignored);
    return error(std::error_code(ec), std::move(text));
  };
  // Nothing runs on the acceptor yet, so setting it up from this thread is safe.
  s.acceptor_.open(where.protocol(), ec);
  if (ec) return fail("open a socket for");
  s.acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (ec) return fail("configure a socket for");
  s.acceptor_.bind(where, ec);
  if (ec) return fail("listen on");
  s.acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen on");
  const auto bound = s.acceptor_.local_endpoint(ec);
  if (ec) return fail("read the address of");
  s.started_ = true;
  s.local_ = bound;
  asio::co_spawn(s.strand_, s.accept_loop(), s.log_exceptions("admin HTTP acceptor"));
  return bound;
}

void admin_http_server::stop() {
  auto state = state_;
  // Not started: nothing runs on the io_context for this server, so there is nothing to wait
  // for (and the io_context may not be running at all yet).
  if (!state->started_ || state->strand_.running_in_this_thread() || state->io_.stopped()) {
    state->close_all();
    return;
  }
  auto done = std::make_shared<std::promise<void>>();
  auto closed = done->get_future();
  asio::post(state->strand_, [state, done] {
    state->close_all();
    done->set_value();
  });
  if (state->io_.get_executor().running_in_this_thread()) return;
  while (closed.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    // Nobody will run the posted closing any more: do it here (close_all is idempotent).
    if (state->io_.stopped()) {
      state->close_all();
      return;
    }
  }
}

std::optional<tcp::endpoint> admin_http_server::local_endpoint() const { return state_->local_; }

}  // namespace txmq::common
