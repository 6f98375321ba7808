#pragma once

// The webhook tests' HTTP receiver: a small HTTP/1.1 (or HTTPS) server in the test process on a
// free loopback port, recording every request and answering as the test decides.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace txmq::test {

// Each test executable includes this once; the unnamed namespace keeps it private to it.
namespace {

// One request the receiver got.
struct seen {
  std::chrono::steady_clock::time_point at;
  std::string id, timestamp, signature, attempt, body;
};

struct reply {
  unsigned status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  bool hang = false;  // never answer (the connection stays open until the receiver stops)
};

// A small HTTP/1.1 server (Beast, one io thread, a coroutine per connection) whose answers
// `decide` picks per request; records every request.
class receiver {
 public:
  using decide_fn = std::function<reply(const seen&, std::size_t index)>;

  // With `tls`, the receiver speaks HTTPS with that context's certificate. It listens on a free
  // port of `host` (127.0.0.1, or ::1 for IPv6 tests).
  explicit receiver(decide_fn decide, boost::asio::ssl::context* tls = nullptr, const std::string& host = "127.0.0.1")
      : decide_(std::move(decide)), tls_(tls), acceptor_(io_, {boost::asio::ip::make_address(host), 0}) {
    boost::asio::co_spawn(io_, accept(), boost::asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~receiver() {
    io_.stop();
    thread_.join();
  }

  [[nodiscard]] std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  [[nodiscard]] std::string url() const {
    const auto a = acceptor_.local_endpoint().address();
    const std::string host = a.is_v6() ? "[" + a.to_string() + "]" : a.to_string();
    return std::string(tls_ ? "https" : "http") + "://" + host + ":" + std::to_string(port()) + "/hook";
  }

  // Waits until `n` requests arrived; false at the deadline.
  bool wait_for(std::size_t n, std::chrono::milliseconds deadline) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, deadline, [&] { return requests_.size() >= n; });
  }
  [[nodiscard]] std::vector<seen> requests() const {
    std::lock_guard lk(mu_);
    return requests_;
  }

 private:
  boost::asio::awaitable<void> accept() {
    for (;;) {
      auto socket = co_await acceptor_.async_accept(boost::asio::use_awaitable);
      boost::asio::co_spawn(io_, session(std::move(socket)), boost::asio::detached);
    }
  }

  boost::asio::awaitable<void> session(boost::asio::ip::tcp::socket socket) {
    if (!tls_) {
      boost::beast::tcp_stream stream(std::move(socket));
      co_await serve(stream);
      co_return;
    }
    boost::beast::ssl_stream<boost::beast::tcp_stream> stream(std::move(socket), *tls_);
    auto [ec] = co_await stream.async_handshake(boost::asio::ssl::stream_base::server, boost::asio::as_tuple(boost::asio::use_awaitable));
    if (ec) {
      std::lock_guard lk(mu_);
      ++failed_handshakes_;
      cv_.notify_all();
      co_return;
    }
    co_await serve(stream);
  }

 public:
  bool wait_for_failed_handshake(std::chrono::milliseconds deadline) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, deadline, [&] { return failed_handshakes_ > 0; });
  }

 private:
  template <class Stream>
  boost::asio::awaitable<void> serve(Stream& stream) {
    boost::beast::flat_buffer buffer;
    for (;;) {
      boost::beast::http::request<boost::beast::http::string_body> req;
      auto [ec, n] = co_await boost::beast::http::async_read(stream, buffer, req, boost::asio::as_tuple(boost::asio::use_awaitable));
      if (ec) co_return;
      seen s{std::chrono::steady_clock::now(), std::string(req["webhook-id"]), std::string(req["webhook-timestamp"]),
             std::string(req["webhook-signature"]), std::string(req["txmq-attempt"]), req.body()};
      std::size_t index = 0;
      {
        std::lock_guard lk(mu_);
        index = requests_.size();
        requests_.push_back(s);
      }
      cv_.notify_all();
      const reply r = decide_(s, index);
      if (r.hang) {
        boost::asio::steady_timer forever(io_, std::chrono::hours(1));
        co_await forever.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
        co_return;
      }
      boost::beast::http::response<boost::beast::http::string_body> res{static_cast<boost::beast::http::status>(r.status), 11};
      for (auto& [k, v] : r.headers) res.set(k, v);
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      auto [wec, wn] = co_await boost::beast::http::async_write(stream, res, boost::asio::as_tuple(boost::asio::use_awaitable));
      if (wec || !req.keep_alive()) co_return;
    }
  }

  decide_fn decide_;
  boost::asio::ssl::context* tls_;
  int failed_handshakes_ = 0;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<seen> requests_;
};

}  // namespace
}  // namespace txmq::test
