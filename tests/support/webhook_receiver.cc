#include "webhook_receiver.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace txmq::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

struct receiver::impl {
  impl(decide_fn d, std::optional<receiver_tls> files, const std::string& host)
      : decide(std::move(d)), acceptor(io, {asio::ip::make_address(host), 0}) {
    if (files) {
      tls.emplace(asio::ssl::context::tls_server);
      tls->use_certificate_chain_file(files->certificate_chain.string());
      tls->use_private_key_file(files->private_key.string(), asio::ssl::context::pem);
    }
    asio::co_spawn(io, accept(), asio::detached);
    thread = std::thread([this] { io.run(); });
  }
  ~impl() {
    io.stop();
    thread.join();
  }

  asio::awaitable<void> accept() {
    for (;;) {
      auto socket = co_await acceptor.async_accept(asio::use_awaitable);
      asio::co_spawn(io, session(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> session(asio::ip::tcp::socket socket) {
    if (!tls) {
      beast::tcp_stream stream(std::move(socket));
      co_await serve(stream);
      co_return;
    }
    beast::ssl_stream<beast::tcp_stream> stream(std::move(socket), *tls);
    auto [ec] = co_await stream.async_handshake(asio::ssl::stream_base::server, asio::as_tuple(asio::use_awaitable));
    if (ec) {
      std::lock_guard lk(mu);
      ++failed_handshakes;
      cv.notify_all();
      co_return;
    }
    co_await serve(stream);
  }

  template <class Stream>
  asio::awaitable<void> serve(Stream& stream) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> req;
      auto [ec, n] = co_await http::async_read(stream, buffer, req, asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      seen s{std::chrono::steady_clock::now(), std::string(req["webhook-id"]), std::string(req["webhook-timestamp"]),
             std::string(req["webhook-signature"]), std::string(req["txmq-attempt"]), req.body()};
      std::size_t index = 0;
      {
        std::lock_guard lk(mu);
        index = requests.size();
        requests.push_back(s);
      }
      cv.notify_all();
      const reply r = decide(s, index);
      if (r.hang) {
        asio::steady_timer forever(io, std::chrono::hours(1));
        co_await forever.async_wait(asio::as_tuple(asio::use_awaitable));
        co_return;
      }
      http::response<http::string_body> res{static_cast<http::status>(r.status), 11};
      for (auto& [k, v] : r.headers) res.set(k, v);
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      auto [wec, wn] = co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
      if (wec || !req.keep_alive()) co_return;
    }
  }

  decide_fn decide;
  std::optional<asio::ssl::context> tls;
  int failed_handshakes = 0;
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor;
  std::thread thread;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::vector<seen> requests;
};

receiver::receiver(decide_fn decide, std::optional<receiver_tls> tls, const std::string& host)
    : impl_(std::make_unique<impl>(std::move(decide), std::move(tls), host)) {}

receiver::~receiver() = default;

std::uint16_t receiver::port() const { return impl_->acceptor.local_endpoint().port(); }

std::string receiver::url() const {
  const auto a = impl_->acceptor.local_endpoint().address();
  const std::string host = a.is_v6() ? "[" + a.to_string() + "]" : a.to_string();
  return std::string(impl_->tls ? "https" : "http") + "://" + host + ":" + std::to_string(port()) + "/hook";
}

bool receiver::wait_for(std::size_t n, std::chrono::milliseconds deadline) {
  std::unique_lock lk(impl_->mu);
  return impl_->cv.wait_for(lk, deadline, [&] { return impl_->requests.size() >= n; });
}

std::vector<seen> receiver::requests() const {
  std::lock_guard lk(impl_->mu);
  return impl_->requests;
}

bool receiver::wait_for_failed_handshake(std::chrono::milliseconds deadline) {
  std::unique_lock lk(impl_->mu);
  return impl_->cv.wait_for(lk, deadline, [&] { return impl_->failed_handshakes > 0; });
}

}  // namespace txmq::test
