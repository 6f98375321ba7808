#include "txmq/common/admin_http.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <gmock/gmock.h>
#include <tuple>

#include <gtest/gtest.h>

namespace txmq::common {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using testing::HasSubstr;
using testing::StartsWith;

struct reply {
  unsigned status = 0;
  std::string content_type;
  std::string allow;
  std::string body;
  bool keep_alive = false;
};

// A blocking HTTP/1.1 client on its own io_context (the server's runs on another thread).
class client {
 public:
  explicit client(tcp::endpoint server) { socket_.connect(server); }

  reply request(http::verb method, std::string target, std::string body = {},
                bool keep_alive = true) {
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.keep_alive(keep_alive);
    if (!body.empty() || method == http::verb::post) {
      req.body() = std::move(body);
      req.prepare_payload();
    }
    http::write(socket_, req);
    http::response<http::string_body> res;
    http::read(socket_, buffer_, res);
    return {res.result_int(), std::string(res[http::field::content_type]),
            std::string(res[http::field::allow]), res.body(), res.keep_alive()};
  }

  // Waits for the server to close the connection; true if it did (EOF or reset).
  bool closed_by_server() {
    char byte = 0;
    boost::system::error_code ec;
    socket_.read_some(asio::buffer(&byte, 1), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }

  tcp::socket& socket() { return socket_; }

 private:
  asio::io_context io_;
  tcp::socket socket_{io_};
  boost::beast::flat_buffer buffer_;
};

reply get(tcp::endpoint server, std::string target) {
  return client(server).request(http::verb::get, std::move(target), {}, false);
}

class admin_http_test : public testing::Test {
 protected:
  void SetUp() override { start({}); }

  void start(admin_http_options options) {
    options.log_error = [this](std::string_view text) {
      std::lock_guard lock(log_mutex_);
      log_ += std::string(text) + "\n";
    };
    server_ = std::make_unique<admin_http_server>(io_, metrics_, std::move(options));
    auto bound = server_->start(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    ASSERT_TRUE(bound) << bound.error();
    endpoint_ = bound.value();
    ASSERT_NE(endpoint_.port(), 0);
    EXPECT_EQ(server_->local_endpoint(), endpoint_);
    if (!runner_.joinable()) runner_ = std::thread([this] { io_.run(); });
  }

  void TearDown() override {
    if (server_) server_->stop();
    work_.reset();
    io_.stop();
    if (runner_.joinable()) runner_.join();
    server_.reset();
  }

  std::string log() {
    std::lock_guard lock(log_mutex_);
    return log_;
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  metrics_registry metrics_;
  std::unique_ptr<admin_http_server> server_;
  tcp::endpoint endpoint_;
  std::thread runner_;
  std::mutex log_mutex_;
  std::string log_;
};

TEST_F(admin_http_test, healthz_answers_ok_until_the_check_says_otherwise) {
  const reply ok = get(endpoint_, "/healthz");
  EXPECT_EQ(ok.status, 200u);
  EXPECT_EQ(ok.body, "ok");
  EXPECT_THAT(ok.content_type, StartsWith("text/plain"));

  server_->set_health_check([] { return health_status{false, "storage is not writable"}; });
  const reply bad = get(endpoint_, "/healthz");
  EXPECT_EQ(bad.status, 503u);
  EXPECT_EQ(bad.body, "storage is not writable");

  server_->set_health_check([] { return health_status{true, {}}; });
  EXPECT_EQ(get(endpoint_, "/healthz").status, 200u);
}

TEST_F(admin_http_test, metrics_serves_the_registry_in_text_format) {
  metrics_.add_counter("txmq_requests_total", "Requests.", {{"kind", "produce"}}).inc(3);
  const reply r = get(endpoint_, "/metrics");
  EXPECT_EQ(r.status, 200u);
  EXPECT_THAT(r.content_type, StartsWith("text/plain; version=0.0.4"));
  EXPECT_EQ(r.body, metrics_.render());
  EXPECT_THAT(r.body, HasSubstr("txmq_requests_total{kind=\"produce\"} 3\n"));
}

TEST_F(admin_http_test, unknown_path_is_404_and_wrong_method_is_405) {
  const reply missing = get(endpoint_, "/nothing/here");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_THAT(missing.body, HasSubstr("/nothing/here"));
  EXPECT_EQ(get(endpoint_, "/healthzx").status, 404u);

  const reply wrong = client(endpoint_).request(http::verb::post, "/metrics", "x", false);
  EXPECT_EQ(wrong.status, 405u);
  EXPECT_EQ(wrong.allow, "GET");
}

TEST_F(admin_http_test, registered_routes_match_by_longest_prefix) {
  server_->add_route(http::verb::get, "/v1/messages", [](const http_request& req) {
    return http_response{200, "application/json",
                         "{\"path\":\"" + std::string(req.path) + "\",\"query\":\"" +
                             std::string(req.query) + "\"}",
                         {{"X-Txmq-Test", "1"}}};
  });
  server_->add_route(http::verb::get, "/v1/", [](const http_request& req) {
    return http_response{200, "text/plain", "v1 " + std::string(req.target), {}};
  });

  const reply msg = get(endpoint_, "/v1/messages/0190b2c4?x=1&y=2");
  EXPECT_EQ(msg.status, 200u);
  EXPECT_EQ(msg.content_type, "application/json");
  EXPECT_EQ(msg.body, R"({"path":"/v1/messages/0190b2c4","query":"x=1&y=2"})");
  EXPECT_EQ(get(endpoint_, "/v1/messages").body, R"({"path":"/v1/messages","query":""})");
  // Not a '/' boundary: falls back to the shorter prefix.
  EXPECT_EQ(get(endpoint_, "/v1/messagesx").body, "v1 /v1/messagesx");
  EXPECT_EQ(get(endpoint_, "/v2/messages").status, 404u);

  // Re-registering replaces.
  server_->add_route(http::verb::get, "/v1/", [](const http_request&) {
    return http_response{204, "text/plain", "", {}};
  });
  EXPECT_EQ(get(endpoint_, "/v1/topics").status, 204u);
}

TEST_F(admin_http_test, async_routes_and_request_bodies) {
  server_->add_async_route(
      http::verb::post, "/v1/echo", [](const http_request& req) -> asio::awaitable<http_response> {
        // Hop through the executor as a storage read on another executor would.
        co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
        co_return http_response{201, "text/plain", "echo:" + std::string(req.body) + ":" +
                                                        std::string(req.headers["X-Token"]),
                                {}};
      });
  client c(endpoint_);
  http::request<http::string_body> req{http::verb::post, "/v1/echo", 11};
  req.set("X-Token", "secret");
  req.body() = "hello";
  req.prepare_payload();
  http::write(c.socket(), req);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(c.socket(), buffer, res);
  EXPECT_EQ(res.result_int(), 201u);
  EXPECT_EQ(res.body(), "echo:hello:secret");
}

TEST_F(admin_http_test, a_throwing_handler_answers_500_and_is_logged) {
  server_->add_route(http::verb::get, "/boom", [](const http_request&) -> http_response {
    throw std::runtime_error("kaboom");
  });
  const reply r = get(endpoint_, "/boom");
  EXPECT_EQ(r.status, 500u);
  EXPECT_THAT(log(), HasSubstr("kaboom"));
  // The server still serves.
  EXPECT_EQ(get(endpoint_, "/healthz").status, 200u);
}

TEST_F(admin_http_test, keep_alive_serves_several_requests_on_one_connection) {
  client c(endpoint_);
  for (int i = 0; i < 3; ++i) {
    const reply r = c.request(http::verb::get, "/healthz");
    EXPECT_EQ(r.status, 200u);
    EXPECT_TRUE(r.keep_alive);
  }
  const reply last = c.request(http::verb::get, "/healthz", {}, false);
  EXPECT_FALSE(last.keep_alive);
  EXPECT_TRUE(c.closed_by_server());
}

TEST_F(admin_http_test, stop_closes_the_acceptor_and_open_connections) {
  client open(endpoint_);
  EXPECT_EQ(open.request(http::verb::get, "/healthz").status, 200u);

  server_->stop();
  EXPECT_TRUE(open.closed_by_server());

  asio::io_context io;
  tcp::socket s(io);
  boost::system::error_code ec;
  s.connect(endpoint_, ec);
  EXPECT_EQ(ec, asio::error::connection_refused);
  server_->stop();  // idempotent
}

TEST_F(admin_http_test, bind_conflict_is_an_error_value) {
  admin_http_server second(io_, metrics_);
  auto r = second.start(endpoint_);
  ASSERT_FALSE(r);
  const std::string& error = r.error().message;
  EXPECT_TRUE(r.error() == std::errc::address_in_use) << r.error().message;
  EXPECT_THAT(error, HasSubstr(std::to_string(endpoint_.port())));
  EXPECT_THAT(error, HasSubstr("in use"));
  EXPECT_THAT(error, HasSubstr("--http"));
  EXPECT_FALSE(second.local_endpoint());

  auto again = server_->start(endpoint_);
  ASSERT_FALSE(again);
  EXPECT_THAT(again.error().message, HasSubstr("twice"));
}

class admin_http_limits_test : public admin_http_test {
 protected:
  void SetUp() override {
    admin_http_options options;
    options.max_body_bytes = 1024;
    options.max_header_bytes = 2048;
    options.read_timeout = std::chrono::milliseconds(200);
    start(std::move(options));
  }
};

TEST_F(admin_http_limits_test, oversized_requests_are_refused_and_closed) {
  server_->add_route(http::verb::post, "/v1/echo", [](const http_request& req) {
    return http_response{200, "text/plain", std::string(req.body), {}};
  });
  EXPECT_EQ(client(endpoint_).request(http::verb::post, "/v1/echo", std::string(1024, 'a')).status,
            200u);
  {
    client c(endpoint_);
    const reply r = c.request(http::verb::post, "/v1/echo", std::string(4096, 'a'));
    EXPECT_EQ(r.status, 413u);
    EXPECT_FALSE(r.keep_alive);
  }
  {
    client c(endpoint_);
    http::request<http::string_body> req{http::verb::get, "/healthz", 11};
    req.set("X-Padding", std::string(4096, 'p'));
    http::write(c.socket(), req);
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(c.socket(), buffer, res);
    EXPECT_EQ(res.result_int(), 431u);
  }
  {
    client c(endpoint_);
    const std::string garbage = "NOT HTTP AT ALL\r\n\r\n";
    asio::write(c.socket(), asio::buffer(garbage));
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(c.socket(), buffer, res);
    EXPECT_EQ(res.result_int(), 400u);
  }
}

TEST_F(admin_http_limits_test, an_idle_connection_is_closed_after_the_read_timeout) {
  client c(endpoint_);
  EXPECT_EQ(c.request(http::verb::get, "/healthz").status, 200u);
  // Blocks until the server gives up on the next request (read_timeout = 200ms).
  EXPECT_TRUE(c.closed_by_server());
}


// GET with an Authorization header (empty: none); answers status, body and WWW-Authenticate.
std::tuple<unsigned, std::string, std::string> get_as(tcp::endpoint server, const std::string& target,
                                                      const std::string& authorization) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(server);
  http::request<http::string_body> req{http::verb::get, target, 11};
  req.set(http::field::host, "127.0.0.1");
  if (!authorization.empty()) req.set(http::field::authorization, authorization);
  req.keep_alive(false);
  http::write(socket, req);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(socket, buffer, res);
  return {res.result_int(), res.body(), std::string(res[http::field::www_authenticate])};
}

TEST_F(admin_http_test, the_access_hook_guards_every_route_but_the_open_ones) {
  server_->add_route(http::verb::get, "/v1/topics/", [](const http_request& req) {
    return http_response{200, "text/plain", "hello " + std::string(req.principal), {}};
  }, route_access::computed([](const http_request& req) {
    return std::vector<http_access>{{"produce", "topic:" + std::string(req.path.substr(11))}};
  }));
  server_->add_route(http::verb::get, "/own", [](const http_request&) {
    return http_response{200, "text/plain", "own", {}};
  }, route_access::by_handler());
  std::vector<std::string> asked;
  http_access_hook hook;
  hook.authenticate = [](const http_request& req) -> std::variant<std::string, http_response> {
    auto it = req.headers.find(http::field::authorization);
    if (it != req.headers.end() && it->value() == "Bearer good") return std::string("svc");
    if (it != req.headers.end() && it->value() == "Bearer boss") return std::string("boss");
    http_response r{401, "text/plain", "who are you", {}};
    r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"t\"");
    return r;
  };
  hook.authorize = [&asked](const std::string& principal,
                            const std::vector<http_access>& needs) -> std::optional<http_response> {
    for (auto& n : needs) asked.push_back(principal + " " + n.permission + " " + n.resource);
    if (principal == "boss") return std::nullopt;
    if (needs.size() == 1 && needs[0].permission == "produce" && needs[0].resource == "topic:mine") return std::nullopt;
    return http_response{403, "text/plain", "no", {}};
  };
  server_->set_access_hook(hook);

  EXPECT_EQ(std::get<0>(get_as(endpoint_, "/healthz", "")), 200u);
  EXPECT_EQ(std::get<0>(get_as(endpoint_, "/own", "")), 200u);
  auto [status, body, challenge] = get_as(endpoint_, "/metrics", "");
  EXPECT_EQ(status, 401u);
  EXPECT_EQ(challenge, "Bearer realm=\"t\"");
  EXPECT_EQ(std::get<0>(get_as(endpoint_, "/metrics", "Bearer wrong")), 401u);
  // /metrics declares nothing: admin on cluster.
  EXPECT_EQ(std::get<0>(get_as(endpoint_, "/metrics", "Bearer good")), 403u);
  EXPECT_EQ(std::get<0>(get_as(endpoint_, "/metrics", "Bearer boss")), 200u);
  EXPECT_EQ(std::get<0>(get_as(endpoint_, "/v1/topics/other", "Bearer good")), 403u);
  auto ok = get_as(endpoint_, "/v1/topics/mine", "Bearer good");
  EXPECT_EQ(std::get<0>(ok), 200u);
  EXPECT_EQ(std::get<1>(ok), "hello svc");
  EXPECT_EQ(asked, (std::vector<std::string>{"svc admin cluster", "boss admin cluster", "svc produce topic:other",
                                             "svc produce topic:mine"}));
}

}  // namespace
}  // namespace txmq::common

namespace txmq::common {
namespace {

class admin_http_full_test : public admin_http_test {
 protected:
  void SetUp() override {
    admin_http_options options;
    options.max_connections = 4;
    start(std::move(options));
  }
};

TEST_F(admin_http_full_test, silent_connections_make_room_for_a_request_oldest_first) {
  // Four sockets that never send a request fill the server.
  std::vector<std::unique_ptr<client>> silent;
  for (int i = 0; i < 4; ++i) silent.push_back(std::make_unique<client>(endpoint_));
  // A probe is still answered (the oldest silent one was closed to make room) ...
  EXPECT_EQ(get(endpoint_, "/healthz").status, 200u);
  EXPECT_TRUE(silent.front()->closed_by_server());
  // ... and so is the next one once the server is full again, which closes the next oldest.
  silent.push_back(std::make_unique<client>(endpoint_));
  EXPECT_EQ(get(endpoint_, "/healthz").status, 200u);
  EXPECT_TRUE(silent[1]->closed_by_server());
}

}  // namespace
}  // namespace txmq::common

namespace txmq::common {
namespace {

// Long requests (async routes: HTTP long-poll fetches) may hold at most max_connections -
// reserved_connections connections; one beyond is answered 503 at once, so a health probe
// always finds a connection to take. Before, four long polls held all four slots and the
// probe's connection was closed unanswered.
class admin_http_long_poll_test : public admin_http_test {
 protected:
  void SetUp() override {
    admin_http_options options;
    options.max_connections = 4;
    options.reserved_connections = 1;
    start(std::move(options));
    server_->add_async_route(http::verb::get, "/wait", [this](const http_request&) -> asio::awaitable<http_response> {
      ++started_;
      asio::steady_timer never(co_await asio::this_coro::executor, std::chrono::minutes(10));
      (void)co_await never.async_wait(asio::as_tuple(asio::use_awaitable));
      co_return http_response{200, "text/plain", "waited", {}};
    });
  }

  std::atomic<int> started_{0};
};

TEST_F(admin_http_long_poll_test, long_requests_leave_room_for_a_health_probe) {
  std::vector<std::unique_ptr<client>> polls;
  for (int i = 0; i < 3; ++i) {
    polls.push_back(std::make_unique<client>(endpoint_));
    http::request<http::string_body> req{http::verb::get, "/wait", 11};
    req.set(http::field::host, "127.0.0.1");
    http::write(polls.back()->socket(), req);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (started_.load() < 3 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polled with a deadline
  }
  ASSERT_EQ(started_.load(), 3);
  // A fourth long request is refused at once, and its connection stays open for another.
  client fourth(endpoint_);
  const auto refused = fourth.request(http::verb::get, "/wait");
  EXPECT_EQ(refused.status, 503u);
  EXPECT_THAT(refused.body, HasSubstr("too many requests in progress"));
  EXPECT_EQ(started_.load(), 3);
  // The server is full (three long polls, one waiting connection); a probe still gets through.
  EXPECT_EQ(get(endpoint_, "/healthz").status, 200u);
  EXPECT_EQ(get(endpoint_, "/metrics").status, 200u);
}

}  // namespace
}  // namespace txmq::common
