#pragma once

// A scriptable stand-in for the broker, for the client libraries' unit tests: an Asio acceptor
// on 127.0.0.1 (port 0) that speaks the framing, answers Hello, records every frame and hands
// each one to a handler the test sets. The handler runs on the fake's io thread; it may answer
// at once, keep the session and answer later (out of order), send raw bytes, or close.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "txmq/protocol/frame_codec.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::testing {

class fake_broker {
 public:
  class session : public std::enable_shared_from_this<session> {
   public:
    session(fake_broker& owner, boost::asio::ip::tcp::socket socket, int number)
        : owner_(owner), socket_(std::move(socket)), number_(number) {}

    // Thread-safe: encodes and queues the frame for writing.
    void send(const v1::Frame& frame) {
      std::string bytes;
      if (!protocol::encode_frame(frame, bytes, UINT32_MAX)) throw std::runtime_error("fake_broker: cannot encode frame");
      send_raw(std::move(bytes));
    }
    void send_raw(std::string bytes) {
      boost::asio::post(socket_.get_executor(), [self = shared_from_this(), bytes = std::move(bytes)]() mutable {
        self->queue_.push_back(std::move(bytes));
        if (self->queue_.size() == 1) self->write_next();
      });
    }
    // Thread-safe: closes the socket once what was queued before is written (the client sees
    // the connection drop).
    void close() {
      boost::asio::post(socket_.get_executor(), [self = shared_from_this()] { self->close_after_writes(); });
    }
    [[nodiscard]] int number() const noexcept { return number_; }
    // The fake's io executor, for timers that answer later.
    [[nodiscard]] auto executor() { return socket_.get_executor(); }

   private:
    friend class fake_broker;

    void write_next() {
      boost::asio::async_write(socket_, boost::asio::buffer(queue_.front()),
                               [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                                 if (ec) return;
                                 self->queue_.pop_front();
                                 if (!self->queue_.empty()) {
                                   self->write_next();
                                 } else if (self->closing_) {
                                   self->close_now();
                                 }
                               });
    }

    void close_after_writes() {
      closing_ = true;
      if (queue_.empty()) close_now();
    }

    void close_now() {
      boost::system::error_code ignored;
      socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
      socket_.close(ignored);
    }

    // `self` keeps the session alive while it reads.
    static boost::asio::awaitable<void> read_loop(std::shared_ptr<session> self) { co_await self->read_frames(); }

    boost::asio::awaitable<void> read_frames() {
      constexpr auto nothrow = boost::asio::as_tuple(boost::asio::use_awaitable);
      bool hello_done = false;
      for (;;) {
        std::array<std::byte, 4> header{};
        auto [ec, n] = co_await boost::asio::async_read(socket_, boost::asio::buffer(header), nothrow);
        if (ec) break;
        auto length = protocol::decode_frame_length(header, hello_done ? owner_.max_frame_bytes_ : protocol::pre_hello_max_frame_bytes);
        if (!length) break;
        std::string body(length.value(), '\0');
        auto [bec, bn] = co_await boost::asio::async_read(socket_, boost::asio::buffer(body), nothrow);
        if (bec) break;
        auto frame = protocol::decode_frame_body(std::as_bytes(std::span(body)));
        if (!frame) break;
        if (!hello_done) {
          hello_done = owner_.on_hello(shared_from_this(), frame.value());
          if (!hello_done) break;
          continue;
        }
        owner_.on_frame(shared_from_this(), frame.value());
      }
      close();  // posted: runs after the answers posted before it are queued
      owner_.on_session_end();
    }

    fake_broker& owner_;
    boost::asio::ip::tcp::socket socket_;
    int number_;
    std::deque<std::string> queue_;
    bool closing_ = false;
  };

  using handler = std::function<void(const std::shared_ptr<session>&, const v1::Frame&)>;

  // On `port` (0: any free one); a broker back on the port of one that went away.
  explicit fake_broker(std::uint16_t port = 0) : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), port}) {
    hello_ok_.set_protocol_version(1);
    hello_ok_.set_broker_id("fake");
    hello_ok_.set_max_frame_bytes(protocol::default_max_frame_bytes);
    hello_ok_.set_max_message_bytes(4 << 20);
    boost::asio::co_spawn(io_, accept_loop(), [](std::exception_ptr ep) {
      if (!ep) return;
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        std::cerr << "fake_broker: accept loop failed: " << e.what() << "\n";
      }
    });
    thread_ = std::thread([this] { io_.run(); });
  }

  ~fake_broker() {
    std::promise<void> closed;
    boost::asio::post(io_, [this, &closed] {
      boost::system::error_code ignored;
      acceptor_.close(ignored);
      for (auto& w : sessions_) {
        if (auto s = w.lock()) s->close_now();
      }
      closed.set_value();
    });
    closed.get_future().wait();
    io_.stop();
    thread_.join();
  }

  [[nodiscard]] std::string address() const { return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()); }
  [[nodiscard]] std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

  // Called for every frame after Hello, on the fake's io thread.
  void set_handler(handler h) {
    std::lock_guard lock(mutex_);
    handler_ = std::make_shared<handler>(std::move(h));
  }
  // What HelloOk says (max_frame_bytes is also what the fake accepts afterwards).
  void set_hello_ok(const v1::HelloOk& ok) {
    std::lock_guard lock(mutex_);
    hello_ok_ = ok;
    max_frame_bytes_ = ok.max_frame_bytes();
  }
  // Answer Hello with this Error and close, instead of HelloOk.
  void set_hello_error(std::optional<v1::Error> e) {
    std::lock_guard lock(mutex_);
    hello_error_ = std::move(e);
  }

  [[nodiscard]] std::vector<v1::Frame> received() const {
    std::lock_guard lock(mutex_);
    return received_;
  }
  [[nodiscard]] std::vector<v1::Frame> received(v1::Frame::BodyCase body) const {
    std::lock_guard lock(mutex_);
    std::vector<v1::Frame> out;
    for (const auto& f : received_) {
      if (f.body_case() == body) out.push_back(f);
    }
    return out;
  }
  [[nodiscard]] std::size_t count(v1::Frame::BodyCase body) const { return received(body).size(); }
  [[nodiscard]] std::vector<v1::Hello> hellos() const {
    std::lock_guard lock(mutex_);
    return hellos_;
  }
  [[nodiscard]] int sessions_started() const {
    std::lock_guard lock(mutex_);
    return sessions_started_;
  }
  [[nodiscard]] int sessions_ended() const {
    std::lock_guard lock(mutex_);
    return sessions_ended_;
  }

  // Closes every open session.
  void drop_connections() {
    boost::asio::post(io_, [this] {
      for (auto& w : sessions_) {
        if (auto s = w.lock()) s->close_now();
      }
    });
  }

  // Waits until pred() holds, re-checking after every event (frame, connect, disconnect) and
  // at least every 50 ms (for conditions that depend on the client's state). False on timeout.
  template <class Pred>
  bool wait_until(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      std::uint64_t seen;
      {
        std::lock_guard lock(mutex_);
        seen = events_;
      }
      if (pred()) return true;
      std::unique_lock lock(mutex_);
      const auto step = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(50));
      cv_.wait_until(lock, step, [&] { return events_ != seen; });
      if (std::chrono::steady_clock::now() >= deadline) {
        lock.unlock();
        return pred();
      }
    }
  }

 private:
  boost::asio::awaitable<void> accept_loop() {
    constexpr auto nothrow = boost::asio::as_tuple(boost::asio::use_awaitable);
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(nothrow);
      if (ec) co_return;
      int number;
      {
        std::lock_guard lock(mutex_);
        number = ++sessions_started_;
        ++events_;
      }
      cv_.notify_all();
      auto s = std::make_shared<session>(*this, std::move(socket), number);
      std::erase_if(sessions_, [](const std::weak_ptr<session>& w) { return w.expired(); });
      sessions_.push_back(s);
      boost::asio::co_spawn(io_, session::read_loop(s), [](std::exception_ptr ep) {
        if (!ep) return;
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          std::cerr << "fake_broker: session failed: " << e.what() << "\n";
        }
      });
    }
  }

  bool on_hello(const std::shared_ptr<session>& s, const v1::Frame& frame) {
    std::optional<v1::Error> refuse;
    v1::HelloOk ok;
    {
      std::lock_guard lock(mutex_);
      if (frame.has_hello()) hellos_.push_back(frame.hello());
      refuse = hello_error_;
      ok = hello_ok_;
      ++events_;
    }
    cv_.notify_all();
    v1::Frame answer;
    answer.set_correlation_id(frame.correlation_id());
    if (!frame.has_hello()) {
      answer.mutable_error()->set_code(v1::HELLO_REQUIRED);
      answer.mutable_error()->set_message("the first frame must be Hello");
      s->send(answer);
      return false;
    }
    if (refuse) {
      *answer.mutable_error() = *refuse;
      s->send(answer);
      return false;
    }
    *answer.mutable_hello_ok() = ok;
    s->send(answer);
    return true;
  }

  void on_frame(const std::shared_ptr<session>& s, const v1::Frame& frame) {
    std::shared_ptr<handler> h;
    {
      std::lock_guard lock(mutex_);
      received_.push_back(frame);
      h = handler_;
    }
    if (h && *h) (*h)(s, frame);
    {
      std::lock_guard lock(mutex_);
      ++events_;
    }
    cv_.notify_all();
  }

  void on_session_end() {
    {
      std::lock_guard lock(mutex_);
      ++sessions_ended_;
      ++events_;
    }
    cv_.notify_all();
  }

  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::thread thread_;
  std::vector<std::weak_ptr<session>> sessions_;  // io thread only

  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  std::uint64_t events_ = 0;
  std::shared_ptr<handler> handler_;
  v1::HelloOk hello_ok_;
  std::uint32_t max_frame_bytes_ = protocol::default_max_frame_bytes;
  std::optional<v1::Error> hello_error_;
  std::vector<v1::Frame> received_;
  std::vector<v1::Hello> hellos_;
  int sessions_started_ = 0;
  int sessions_ended_ = 0;
};

// A partitioned log for produce tests: assigns offsets per partition (partition = FNV of the
// key, or round robin), and answers a repeated id with the original position, duplicate = true.
class fake_log {
 public:
  explicit fake_log(std::uint32_t partitions = 4) : partitions_(partitions) {}

  v1::ProduceResponse append(const v1::ProduceRequest& request) {
    std::lock_guard lock(mutex_);
    v1::ProduceResponse response;
    for (const auto& m : request.messages()) {
      auto* p = response.add_positions();
      if (auto it = by_id_.find(m.id()); it != by_id_.end()) {
        *p = it->second;
        p->set_duplicate(true);
        continue;
      }
      const std::uint32_t partition = m.has_key() ? static_cast<std::uint32_t>(fnv(m.key()) % partitions_) : next_++ % partitions_;
      p->set_partition(partition);
      p->set_offset(end_[partition]++);
      by_id_[m.id()] = *p;
      stored_.push_back(m);
    }
    return response;
  }
  [[nodiscard]] std::vector<v1::Message> stored() const {
    std::lock_guard lock(mutex_);
    return stored_;
  }

 private:
  static std::uint64_t fnv(const std::string& s) {
    std::uint64_t h = 14695981039346656037ULL;
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ULL;
    }
    return h;
  }
  mutable std::mutex mutex_;
  std::uint32_t partitions_;
  std::uint32_t next_ = 0;
  std::map<std::uint32_t, std::uint64_t> end_;
  std::map<std::string, v1::Position> by_id_;
  std::vector<v1::Message> stored_;
};

inline v1::Frame answer_to(const v1::Frame& request) {
  v1::Frame f;
  f.set_correlation_id(request.correlation_id());
  return f;
}

inline v1::Frame error_answer(const v1::Frame& request, v1::ErrorCode code, const std::string& text) {
  v1::Frame f = answer_to(request);
  f.mutable_error()->set_code(code);
  f.mutable_error()->set_message(text);
  return f;
}

}  // namespace txmq::testing
