#include "webhooks/webhook_client.h"

#include <optional>

#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/ssl.h>

namespace txmq::broker {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
constexpr auto k_as_tuple = asio::as_tuple(asio::use_awaitable);

// Bodies of answers are read only to keep the connection usable; nobody looks at them.
constexpr std::uint64_t k_max_answer_body = 1u << 20;

struct webhook_endpoint::conn {
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;

  beast::tcp_stream& tcp() { return plain ? *plain : tls->next_layer(); }
};

webhook_endpoint::webhook_endpoint(asio::any_io_executor ex, ssl::context& tls_context, const egress_guard& guard,
                                   webhook_url url, std::size_t max_idle)
    : ex_(std::move(ex)), tls_(tls_context), guard_(guard), url_(std::move(url)), max_idle_(max_idle) {}

webhook_endpoint::~webhook_endpoint() = default;

void webhook_endpoint::close_idle() { idle_.clear(); }

asio::awaitable<std::unique_ptr<webhook_endpoint::conn>> webhook_endpoint::open(
    std::chrono::steady_clock::time_point deadline, webhook_response& out) {
  auto c = std::make_unique<conn>();
  if (url_.tls) {
    c->tls.emplace(ex_, tls_);
  } else {
    c->plain.emplace(ex_);
  }
  std::vector<tcp::endpoint> endpoints;
  boost::system::error_code ec;
  const auto port = static_cast<std::uint16_t>(std::stoul(url_.port));
  const auto literal = asio::ip::make_address(url_.host, ec);
  if (!ec) {
    endpoints.emplace_back(literal, port);
  } else {
    tcp::resolver resolver(ex_);
    auto [rec, results] = co_await resolver.async_resolve(url_.host, url_.port, k_as_tuple);
    if (rec) {
      out.error = "cannot resolve " + url_.host + ": " + rec.message();
      co_return nullptr;
    }
    for (auto& r : results) endpoints.push_back(r.endpoint());
  }
  // The guard sees the very endpoints the connect below is given: no second resolution.
  std::string refusal;
  std::erase_if(endpoints, [&](const tcp::endpoint& e) {
    auto why = guard_.refuses(url_.host, e.address());
    if (why && refusal.empty()) refusal = std::move(*why);
    return why.has_value();
  });
  if (endpoints.empty()) {
    out.blocked = true;
    out.error = "blocked: " + refusal;
    co_return nullptr;
  }
  c->tcp().expires_at(deadline);
  auto [cec, ep] = co_await c->tcp().async_connect(endpoints, k_as_tuple);
  if (cec) {
    out.timed_out = cec == beast::error::timeout;
    out.error = "cannot connect to " + url_.host + ":" + url_.port + ": " + cec.message();
    co_return nullptr;
  }
  if (c->tls) {
    // SNI, and the certificate must name the host we asked for.
    if (!SSL_set_tlsext_host_name(c->tls->native_handle(), url_.host.c_str())) {
      out.error = "cannot set TLS server name " + url_.host;
      co_return nullptr;
    }
    c->tls->set_verify_mode(ssl::verify_peer);
    c->tls->set_verify_callback(ssl::host_name_verification(url_.host));
    auto [hec] = co_await c->tls->async_handshake(ssl::stream_base::client, k_as_tuple);
    if (hec) {
      out.timed_out = hec == beast::error::timeout;
      out.error = "TLS handshake with " + url_.host + " failed: " + hec.message();
      co_return nullptr;
    }
  }
  co_return c;
}

asio::awaitable<bool> webhook_endpoint::exchange(conn& c, http::request<http::string_body>& req,
                                                 std::chrono::steady_clock::time_point deadline,
                                                 webhook_response& out) {
  c.tcp().expires_at(deadline);
  http::response_parser<http::string_body> parser;
  parser.body_limit(k_max_answer_body);
  boost::system::error_code ec;
  if (c.tls) {
    std::tie(ec, std::ignore) = co_await http::async_write(*c.tls, req, k_as_tuple);
    if (!ec) std::tie(ec, std::ignore) = co_await http::async_read(*c.tls, c.buffer, parser, k_as_tuple);
  } else {
    std::tie(ec, std::ignore) = co_await http::async_write(*c.plain, req, k_as_tuple);
    if (!ec) std::tie(ec, std::ignore) = co_await http::async_read(*c.plain, c.buffer, parser, k_as_tuple);
  }
  if (ec) {
    out.timed_out = ec == beast::error::timeout;
    out.error = out.timed_out ? "no answer within the timeout" : "request failed: " + ec.message();
    co_return false;
  }
  auto& res = parser.get();
  out.status = res.result_int();
  if (auto it = res.find(http::field::retry_after); it != res.end()) out.retry_after = std::string(it->value());
  out.error.clear();
  out.timed_out = false;
  co_return res.keep_alive();
}

asio::awaitable<webhook_response> webhook_endpoint::post(http::request<http::string_body> req,
                                                         std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  req.method(http::verb::post);
  req.target(url_.target);
  req.version(11);
  const bool default_port = url_.port == (url_.tls ? "443" : "80");
  const bool v6 = url_.host.find(':') != std::string::npos;
  req.set(http::field::host, (v6 ? "[" + url_.host + "]" : url_.host) + (default_port ? "" : ":" + url_.port));
  req.keep_alive(true);
  req.prepare_payload();

  webhook_response out;
  for (int round = 0; round < 2; ++round) {
    std::unique_ptr<conn> c;
    bool reused = false;
    if (!idle_.empty()) {
      c = std::move(idle_.back());
      idle_.pop_back();
      reused = true;
    } else {
      c = co_await open(deadline, out);
      if (!c) co_return out;
    }
    const bool keep = co_await exchange(*c, req, deadline, out);
    if (out.status != 0) {
      if (keep && idle_.size() < max_idle_) {
        c->tcp().expires_never();
        idle_.push_back(std::move(c));
      }
      co_return out;
    }
    // A pooled connection the server closed meanwhile fails at once: try a fresh one. Not
    // after a timeout, which used up the attempt's time.
    if (!reused || out.timed_out) co_return out;
  }
  co_return out;
}

}  // namespace txmq::broker
