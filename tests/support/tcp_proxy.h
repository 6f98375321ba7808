#pragma once

// A TCP proxy inside a test, between clients and the broker on loopback, that makes the network
// misbehave where a network namespace cannot (issue 13 item 6): it adds delay, stalls (stops
// forwarding: nothing is read, so TCP flow control holds the senders back, and the held bytes
// flow again on resume()) and makes connections half-open (one direction's bytes are dropped
// while both sockets stay open, no FIN, no reset: what a peer behind a dead NAT entry sees).
//
// It adds no delay of its own: both its sockets set TCP_NODELAY, as the broker and the clients
// do (tcp_proxy_test). Each accepted connection (a link) gets its own connection to the target;
// the two directions are pumped by coroutines on the proxy's own thread. Control calls are
// thread-safe and take effect for the next chunk of bytes. Stopped and joined by the destructor.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace txmq::test {

class tcp_proxy {
 public:
  enum class direction : std::uint8_t { to_target, to_client };

  // Listens on 127.0.0.1 (a free port) and forwards to target_host:target_port.
  tcp_proxy(const std::string& target_host, std::uint16_t target_port);
  ~tcp_proxy();
  tcp_proxy(const tcp_proxy&) = delete;
  tcp_proxy& operator=(const tcp_proxy&) = delete;

  // "127.0.0.1:PORT": where clients connect.
  [[nodiscard]] std::string address() const;

  // Every chunk waits this long before it is forwarded (0: none).
  void set_delay(std::chrono::milliseconds d) { delay_ms_.store(d.count()); }
  // Stops forwarding on every link, those made meanwhile too, until resume().
  void stall() { stalled_.store(true); }
  void resume() { stalled_.store(false); }
  // From now on drops what the links open now carry in `d` (they stay open; links made later are
  // not affected). Answers how many links it made half-open.
  std::size_t half_open(direction d);

  // Links accepted so far, and those whose both sockets are still open.
  [[nodiscard]] std::size_t links_accepted() const { return accepted_.load(); }
  [[nodiscard]] std::size_t links_open() const;
  // Bytes dropped by half-open links.
  [[nodiscard]] std::uint64_t bytes_dropped() const { return dropped_.load(); }

 private:
  struct link;
  void accept_loop();
  void start_link(boost::asio::ip::tcp::socket client);
  boost::asio::awaitable<void> connect_link(std::shared_ptr<link> l);
  boost::asio::awaitable<void> pump(std::shared_ptr<link> l, bool to_target);

  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::ip::tcp::endpoint target_;
  std::atomic<long long> delay_ms_{0};
  std::atomic<bool> stalled_{false};
  std::atomic<std::size_t> accepted_{0};
  std::atomic<std::uint64_t> dropped_{0};
  mutable std::mutex mutex_;
  std::vector<std::weak_ptr<link>> links_;
  std::thread thread_;
};

}  // namespace txmq::test
