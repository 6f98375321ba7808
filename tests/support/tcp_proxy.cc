#include "tcp_proxy.h"

#include <array>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace txmq::test {

namespace asio = boost::asio;
using asio::ip::tcp;

struct tcp_proxy::link {
  explicit link(tcp::socket c) : client(std::move(c)), target(client.get_executor()) {}
  tcp::socket client;
  tcp::socket target;
  std::atomic<bool> drop_to_target{false};
  std::atomic<bool> drop_to_client{false};
  std::atomic<int> pumps_running{2};

  void close() {
    boost::system::error_code ec;
    client.close(ec);
    target.close(ec);
  }
};

tcp_proxy::tcp_proxy(const std::string& target_host, std::uint16_t target_port)
    : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
      target_(asio::ip::make_address(target_host), target_port) {
  accept_loop();
  thread_ = std::thread([this] { io_.run(); });
}

tcp_proxy::~tcp_proxy() {
  asio::post(io_, [this] {
    boost::system::error_code ec;
    acceptor_.close(ec);
    std::lock_guard lock(mutex_);
    for (auto& w : links_) {
      if (auto l = w.lock()) l->close();
    }
  });
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

std::string tcp_proxy::address() const { return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()); }

std::size_t tcp_proxy::half_open(direction d) {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (auto& w : links_) {
    if (auto l = w.lock()) {
      (d == direction::to_target ? l->drop_to_target : l->drop_to_client).store(true);
      ++n;
    }
  }
  return n;
}

std::size_t tcp_proxy::links_open() const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (auto& w : links_) {
    if (auto l = w.lock(); l && l->pumps_running.load() == 2) ++n;
  }
  return n;
}

void tcp_proxy::accept_loop() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket s) {
    if (ec) return;  // closed
    start_link(std::move(s));
    accept_loop();
  });
}

void tcp_proxy::start_link(tcp::socket client) {
  ++accepted_;
  auto l = std::make_shared<link>(std::move(client));
  {
    std::lock_guard lock(mutex_);
    std::erase_if(links_, [](const std::weak_ptr<link>& w) { return w.expired(); });
    links_.push_back(l);
  }
  asio::co_spawn(io_, connect_link(l), asio::detached);
}

asio::awaitable<void> tcp_proxy::connect_link(std::shared_ptr<link> l) {
  auto [ec] = co_await l->target.async_connect(target_, asio::as_tuple(asio::use_awaitable));
  if (ec) {
    l->close();
    co_return;
  }
  // As both txmq ends do. With Nagle on, a small segment forwarded while the previous one is
  // unacknowledged waits for the peer's delayed ACK (~40 ms): a broker's Fetch answer behind its
  // Ack answer reached the consumer that late, every round (tcp_proxy_test).
  boost::system::error_code ignored;
  l->client.set_option(tcp::no_delay(true), ignored);
  l->target.set_option(tcp::no_delay(true), ignored);
  asio::co_spawn(io_, pump(l, true), asio::detached);
  asio::co_spawn(io_, pump(l, false), asio::detached);
}

// One direction: read a chunk (not while stalled, so the sender is held back by TCP), wait the
// delay, then forward it or, half-open, drop it. Either side ending ends the link.
asio::awaitable<void> tcp_proxy::pump(std::shared_ptr<link> l, bool to_target) {
  auto& from = to_target ? l->client : l->target;
  auto& to = to_target ? l->target : l->client;
  auto& drop = to_target ? l->drop_to_target : l->drop_to_client;
  asio::steady_timer timer(from.get_executor());
  std::array<char, 16 * 1024> buf{};
  const auto wait_while_stalled = [&]() -> asio::awaitable<void> {
    while (stalled_.load() && from.is_open() && to.is_open()) {
      timer.expires_after(std::chrono::milliseconds(5));
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  };
  for (;;) {
    co_await wait_while_stalled();
    auto [ec, n] = co_await from.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    if (ec) break;
    if (const auto d = delay_ms_.load(); d > 0) {
      timer.expires_after(std::chrono::milliseconds(d));
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    co_await wait_while_stalled();
    if (drop.load()) {
      dropped_ += n;
      continue;
    }
    auto [wec, written] = co_await asio::async_write(to, asio::buffer(buf.data(), n), asio::as_tuple(asio::use_awaitable));
    (void)written;
    if (wec) break;
  }
  --l->pumps_running;
  l->close();
}

}  // namespace txmq::test
