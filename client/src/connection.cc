#include "txmq/client/connection.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "txmq/common/address.h"
#include "txmq/common/backoff.h"
#include "txmq/protocol/frame_codec.h"

namespace txmq::client {
namespace asio = boost::asio;
using asio::awaitable;
using tcp = asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;  // NOLINT: operator|| for coroutines

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);
constexpr std::uint32_t k_protocol_version = 1;

std::uint32_t load_be32(const std::array<std::byte, 4>& h) noexcept {
  return (std::to_integer<std::uint32_t>(h[0]) << 24) | (std::to_integer<std::uint32_t>(h[1]) << 16) |
         (std::to_integer<std::uint32_t>(h[2]) << 8) | std::to_integer<std::uint32_t>(h[3]);
}

// Broker handshake refusals that another attempt will not cure: requests waiting for a
// connection fail with them at once instead of waiting for their timeout.
bool is_refusal(const error& e) {
  return e.is(protocol::errc::unauthenticated) || e.is(protocol::errc::unsupported_version) ||
         e.is(protocol::errc::hello_required) || e.is(protocol::errc::permission_denied);
}

}  // namespace

result<broker_address> broker_address::parse(std::string_view text) {
  auto parsed = common::parse_host_port(text);
  if (!parsed) return error(errc::bad_address, parsed.error().message);
  // Port 0 means "any free port" to a listener; a client cannot connect to it.
  if (parsed.value().port == 0) {
    return error(errc::bad_address, "'" + std::string(text) + "' is not HOST:PORT (the port must be a number from 1 to 65535)");
  }
  auto& address = parsed.value();
  return broker_address{std::move(address.host), address.port};
}

std::string broker_address::to_string() const { return common::host_port{host, port}.to_string(); }

bool is_response(const v1::Frame& frame) noexcept {
  switch (frame.body_case()) {
    case v1::Frame::kError:
    case v1::Frame::kHelloOk:
    case v1::Frame::kProduceResponse:
    case v1::Frame::kFetchResponse:
    case v1::Frame::kDeliveryResults:
    case v1::Frame::kTopicInfo:
    case v1::Frame::kListTopicsResponse:
    case v1::Frame::kGroupInfo:
    case v1::Frame::kListGroupsResponse:
    case v1::Frame::kDlqListResponse:
    case v1::Frame::kDlqRedriveResponse:
    case v1::Frame::kPrepareResponse:
    case v1::Frame::kEndTxResponse:
    case v1::Frame::kTxListResponse:
    case v1::Frame::kTxInfo:
    case v1::Frame::kWebhook:
    case v1::Frame::kWebhookListResponse:
    case v1::Frame::kWebhookDeleteResponse:
    case v1::Frame::kWebhookAttemptsResponse:
    case v1::Frame::kWebhookReplayResponse:
      return true;
    default:
      return false;
  }
}

class connection::impl {
 public:
  explicit impl(connection_options options) : options_(std::move(options)) {
    auto address = broker_address::parse(options_.address);
    if (address) {
      address_ = std::move(address).value();
    } else {
      address_error_ = address.error();
    }
    thread_ = std::thread([this] {
      io_thread_id_.store(std::this_thread::get_id());
      io_.run();
    });
    if (address_) {
      asio::co_spawn(io_, run(), [this](std::exception_ptr ep) {
        if (ep) {
          try {
            std::rethrow_exception(ep);
          } catch (const std::exception& e) {
            log(std::string("connection loop failed: ") + e.what());
          }
          fail_all(error(errc::closed, "the connection to " + options_.address + " stopped after an internal error"));
        }
        std::lock_guard lock(mutex_);
        run_finished_ = true;
        cv_.notify_all();
      });
    } else {
      std::lock_guard lock(mutex_);
      run_finished_ = true;
    }
  }

  ~impl() {
    close();
    handler_pool_.join();
    work_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  void close() {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    asio::post(io_, [this] { begin_close(); });
    if (on_io_thread()) return;
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return run_finished_; });
    lock.unlock();
    // Requests that could not be posted before run() ended (a bad address) fail here too.
    std::promise<void> drained;
    asio::post(io_, [&] {
      fail_all(error(errc::closed, "the connection to " + options_.address + " was closed"));
      drained.set_value();
    });
    drained.get_future().wait();
  }

  result<void> wait_connected(std::chrono::milliseconds timeout) {
    if (!address_) return address_error_;
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, timeout, [&] { return connected_ || refused_ || closed_; });
    if (connected_) return outcome::success();
    if (closed_) return error(errc::closed, "the connection to " + options_.address + " was closed");
    if (last_error_ && (refused_ || is_refusal(*last_error_))) return *last_error_;
    std::string text = "no connection to " + options_.address + " within " + std::to_string(timeout.count()) + " ms";
    if (last_error_) text += " (last attempt: " + last_error_->to_string() + ")";
    return error(errc::not_connected, std::move(text));
  }

  void async_request(v1::Frame request, response_callback cb, std::optional<std::chrono::milliseconds> timeout) {
    if (!address_) return cb(address_error_);
    const std::uint64_t id = next_id_.fetch_add(1);
    request.set_correlation_id(id);
    std::string bytes;
    if (auto r = protocol::encode_frame(request, bytes, send_limit_.load()); !r) {
      if (r.error() == protocol::errc::frame_too_large) {
        return cb(error(protocol::errc::frame_too_large,
                        "request of " + std::to_string(request.ByteSizeLong()) + " bytes is above the broker's frame limit of " +
                            std::to_string(send_limit_.load()) + " bytes; send smaller batches"));
      }
      return cb(error(errc::invalid_argument, "cannot encode an empty request frame"));
    }
    const auto wait = timeout.value_or(options_.request_timeout);
    std::lock_guard lock(mutex_);
    if (closed_) return cb(error(errc::closed, "the connection to " + options_.address + " was closed"));
    asio::post(io_, [this, id, bytes = std::move(bytes), cb = std::move(cb), wait]() mutable {
      enqueue_request(id, std::move(bytes), std::move(cb), wait);
    });
  }

  result<v1::Frame> request(v1::Frame request, std::optional<std::chrono::milliseconds> timeout) {
    if (on_io_thread()) {
      return error(errc::would_deadlock, "connection::request() called on the connection's io thread (from a callback); use async_request");
    }
    auto done = std::make_shared<std::promise<result<v1::Frame>>>();
    auto future = done->get_future();
    async_request(std::move(request), [done](result<v1::Frame> r) { done->set_value(std::move(r)); }, timeout);
    // Every request is answered: by the broker, by its timeout timer, or by close().
    return future.get();
  }

  void set_request_handler(request_handler handler) {
    std::lock_guard lock(mutex_);
    handler_ = std::make_shared<request_handler>(std::move(handler));
  }

  bool is_connected() const noexcept { return connected_flag_.load(); }
  std::optional<server_info> server() const {
    std::lock_guard lock(mutex_);
    return server_;
  }
  std::uint64_t connects() const noexcept { return connects_.load(); }
  const connection_options& options() const noexcept { return options_; }

 private:
  struct pending_request {
    response_callback cb;
    std::unique_ptr<asio::steady_timer> timer;
    bool sent = false;
  };
  struct queued_frame {
    std::uint64_t request_id = 0;  // 0: an answer to a broker request (not in pending_)
    std::uint64_t generation = 0;  // answers are only valid on the connection they answer
    std::string bytes;
  };

  bool on_io_thread() const noexcept { return std::this_thread::get_id() == io_thread_id_.load(); }

  void log(const std::string& text) const {
    if (options_.log) options_.log(text);
  }

  // ---- io thread --------------------------------------------------------------------------

  void enqueue_request(std::uint64_t id, std::string bytes, response_callback cb, std::chrono::milliseconds wait) {
    if (closing_) return invoke(cb, error(errc::closed, "the connection to " + options_.address + " was closed"));
    if (!write_queue_.empty() && write_queue_bytes_ + bytes.size() > options_.max_write_queue_bytes) {
      return invoke(cb, error(errc::write_queue_full, "the write queue to " + options_.address + " holds " +
                                                           std::to_string(write_queue_bytes_) + " bytes (limit " +
                                                           std::to_string(options_.max_write_queue_bytes) +
                                                           "); retry when the broker has caught up"));
    }
    if (!connected_now_ && refusal_) return invoke(cb, *refusal_);
    auto timer = std::make_unique<asio::steady_timer>(io_);
    timer->expires_after(wait);
    timer->async_wait([this, id, wait](boost::system::error_code ec) {
      if (ec) return;
      on_timeout(id, wait);
    });
    pending_.emplace(id, pending_request{std::move(cb), std::move(timer), false});
    write_queue_bytes_ += bytes.size();
    write_queue_.push_back(queued_frame{id, 0, std::move(bytes)});
    write_signal_.cancel();
  }

  void on_timeout(std::uint64_t id, std::chrono::milliseconds wait) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    if (!it->second.sent) {
      for (auto q = write_queue_.begin(); q != write_queue_.end(); ++q) {
        if (q->request_id == id) {
          write_queue_bytes_ -= q->bytes.size();
          write_queue_.erase(q);
          break;
        }
      }
    }
    std::string text = "no answer from " + options_.address + " within " + std::to_string(wait.count()) + " ms";
    if (!connected_now_) {
      text += "; not connected";
      if (last_error_io_) text += " (last attempt: " + last_error_io_->to_string() + ")";
    } else if (it->second.sent) {
      text += "; the request may have been applied";
    }
    complete(id, error(errc::timeout, std::move(text)));
  }

  void complete(std::uint64_t id, result<v1::Frame> r) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    auto cb = std::move(it->second.cb);
    pending_.erase(it);
    invoke(cb, std::move(r));
  }

  void invoke(response_callback& cb, result<v1::Frame> r) {
    try {
      cb(std::move(r));
    } catch (const std::exception& e) {
      log(std::string("a response callback threw: ") + e.what());
    }
  }

  void fail_all(const error& e) {
    auto pending = std::move(pending_);
    pending_.clear();
    write_queue_.clear();
    write_queue_bytes_ = 0;
    for (auto& [id, p] : pending) invoke(p.cb, e);
  }

  // Requests written on a connection that broke get `e`; those still queued wait for the next.
  void fail_sent(const error& e) {
    std::vector<std::uint64_t> ids;
    for (auto& [id, p] : pending_) {
      if (p.sent) ids.push_back(id);
    }
    for (auto id : ids) complete(id, e);
    std::erase_if(write_queue_, [](const queued_frame& q) { return q.request_id == 0; });
    write_queue_bytes_ = 0;
    for (auto& q : write_queue_) write_queue_bytes_ += q.bytes.size();
  }

  void fail_unsent(const error& e) {
    std::vector<std::uint64_t> ids;
    for (auto& q : write_queue_) {
      if (q.request_id != 0) ids.push_back(q.request_id);
    }
    write_queue_.clear();
    write_queue_bytes_ = 0;
    for (auto id : ids) complete(id, e);
  }

  void begin_close() {
    closing_ = true;
    backoff_timer_.cancel();
    connect_timer_.cancel();
    write_signal_.cancel();
    if (socket_) {
      boost::system::error_code ignored;
      socket_->shutdown(tcp::socket::shutdown_both, ignored);
      socket_->close(ignored);
    }
  }

  void set_last_error(const error& e) {
    last_error_io_ = e;
    std::lock_guard lock(mutex_);
    last_error_ = e;
  }

  awaitable<void> run() {
    while (!closing_) {
      auto attempt = co_await connect_once();
      if (closing_) break;
      if (attempt) {
        socket_.emplace(std::move(attempt).value());
        reconnect_delay_.reset();
        on_connected();
        co_await (read_loop() || write_loop());
        boost::system::error_code ignored;
        socket_->shutdown(tcp::socket::shutdown_both, ignored);
        socket_->close(ignored);
        socket_.reset();
        on_disconnected();
        if (closing_) break;
      } else {
        set_last_error(attempt.error());
        log("connect to " + options_.address + " failed: " + attempt.error().to_string());
        if (is_refusal(attempt.error())) {
          refusal_ = attempt.error();
          {
            std::lock_guard lock(mutex_);
            refused_ = true;
          }
          cv_.notify_all();
          fail_unsent(attempt.error());
        }
      }
      backoff_timer_.expires_after(reconnect_delay_.next());
      co_await backoff_timer_.async_wait(use_nothrow);
    }
    fail_all(error(errc::closed, "the connection to " + options_.address + " was closed"));
  }

  void on_connected() {
    connected_now_ = true;
    refusal_.reset();
    ++generation_;
    connects_.fetch_add(1);
    connected_flag_.store(true);
    {
      std::lock_guard lock(mutex_);
      connected_ = true;
      refused_ = false;
    }
    cv_.notify_all();
    log("connected to " + options_.address);
    write_signal_.cancel();
  }

  void on_disconnected() {
    connected_now_ = false;
    connected_flag_.store(false);
    {
      std::lock_guard lock(mutex_);
      connected_ = false;
    }
    std::string text = "connection to " + options_.address + " lost";
    if (disconnect_reason_) text += " (" + disconnect_reason_->to_string() + ")";
    if (broker_notice_) text += "; the broker said " + broker_notice_->to_string();
    text += " while the request was in flight; it may have been applied";
    error lost = closing_ ? error(errc::closed, "the connection to " + options_.address + " was closed")
                          : error(errc::connection_lost, std::move(text));
    set_last_error(lost);
    log(lost.message);
    disconnect_reason_.reset();
    broker_notice_.reset();
    fail_sent(lost);
  }

  awaitable<result<tcp::socket>> connect_once() {
    connect_timer_.expires_after(options_.connect_timeout);
    auto outcome = co_await (handshake() || connect_timer_.async_wait(use_nothrow));
    if (outcome.index() == 1) {
      if (closing_) co_return error(errc::closed, "closed while connecting");
      co_return error(errc::not_connected, "no handshake with " + options_.address + " within " +
                                               std::to_string(options_.connect_timeout.count()) + " ms");
    }
    co_return std::move(std::get<0>(outcome));
  }

  awaitable<result<tcp::socket>> handshake() {
    tcp::resolver resolver(io_);
    auto [rec, endpoints] = co_await resolver.async_resolve(address_->host, std::to_string(address_->port), use_nothrow);
    if (rec) co_return error(errc::not_connected, "cannot resolve " + address_->host + ": " + rec.message());
    tcp::socket socket(io_);
    auto [cec, endpoint] = co_await asio::async_connect(socket, endpoints, use_nothrow);
    if (cec) co_return error(errc::not_connected, "cannot connect to " + options_.address + ": " + cec.message());
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);

    v1::Frame hello;
    hello.set_correlation_id(next_id_.fetch_add(1));
    auto* h = hello.mutable_hello();
    h->set_protocol_version(k_protocol_version);
    h->set_client_id(options_.client_id);
    h->set_producer_group(options_.producer_group);
    h->set_auth_token(options_.auth_token);
    std::string bytes;
    if (!protocol::encode_frame(hello, bytes, protocol::pre_hello_max_frame_bytes)) {
      co_return error(errc::invalid_argument, "the Hello frame (client id, producer group, token) is above 64 KiB");
    }
    auto [wec, written] = co_await asio::async_write(socket, asio::buffer(bytes), use_nothrow);
    if (wec) co_return error(errc::not_connected, "cannot send Hello to " + options_.address + ": " + wec.message());

    auto answer = co_await read_frame(socket, protocol::pre_hello_max_frame_bytes);
    if (!answer) co_return error(errc::not_connected, "handshake with " + options_.address + ": " + answer.error().to_string());
    const v1::Frame& f = answer.value();
    if (f.has_error()) co_return from_wire(f.error().code(), f.error().message());
    if (!f.has_hello_ok()) {
      co_return error(errc::unexpected_response, "the broker at " + options_.address + " answered Hello with frame body " +
                                                     std::to_string(static_cast<int>(f.body_case())));
    }
    server_info info;
    info.protocol_version = f.hello_ok().protocol_version();
    info.broker_id = f.hello_ok().broker_id();
    info.max_frame_bytes = f.hello_ok().max_frame_bytes() != 0 ? f.hello_ok().max_frame_bytes()
                                                               : protocol::default_max_frame_bytes;
    info.max_message_bytes = f.hello_ok().max_message_bytes();
    send_limit_.store(info.max_frame_bytes);
    receive_limit_ = options_.max_frame_bytes != 0 ? std::min(options_.max_frame_bytes, info.max_frame_bytes)
                                                   : info.max_frame_bytes;
    {
      std::lock_guard lock(mutex_);
      server_ = info;
    }
    co_return std::move(socket);
  }

  // One frame: the length is checked against the limit before anything is allocated.
  awaitable<result<v1::Frame>> read_frame(tcp::socket& socket, std::uint32_t limit) {
    std::array<std::byte, protocol::frame_header_bytes> header{};
    auto [hec, hn] = co_await asio::async_read(socket, asio::buffer(header), use_nothrow);
    if (hec) {
      co_return error(errc::connection_lost, hec == asio::error::eof ? std::string("the broker closed the connection")
                                                                     : "read failed: " + hec.message());
    }
    auto length = protocol::decode_frame_length(header, limit);
    if (!length) {
      if (length.error() == protocol::errc::frame_too_large) {
        co_return error(protocol::errc::frame_too_large, "the broker sent a frame of " + std::to_string(load_be32(header)) +
                                                             " bytes, above the limit of " + std::to_string(limit));
      }
      co_return error(protocol::errc::frame_malformed, "the broker sent a zero-length frame");
    }
    std::string body(length.value(), '\0');
    auto [bec, bn] = co_await asio::async_read(socket, asio::buffer(body), use_nothrow);
    if (bec) co_return error(errc::connection_lost, "the stream ended inside a frame: " + bec.message());
    auto frame = protocol::decode_frame_body(std::as_bytes(std::span(body)));
    if (!frame) co_return error(protocol::errc::frame_malformed, "the broker sent a frame that is not a txmq.v1.Frame");
    co_return std::move(frame).value();
  }

  awaitable<void> read_loop() {
    for (;;) {
      auto frame = co_await read_frame(*socket_, receive_limit_);
      if (!frame) {
        disconnect_reason_ = frame.error();
        co_return;
      }
      dispatch(std::move(frame).value());
    }
  }

  void dispatch(v1::Frame frame) {
    if (is_response(frame)) {
      if (frame.has_error() && frame.correlation_id() == 0) {
        // Answers no request: the broker says why it is about to close the connection.
        broker_notice_ = from_wire(frame.error().code(), frame.error().message());
        log("broker notice: " + broker_notice_->to_string());
        return;
      }
      const auto id = frame.correlation_id();
      if (frame.has_error()) return complete(id, from_wire(frame.error().code(), frame.error().message()));
      return complete(id, std::move(frame));
    }
    std::shared_ptr<request_handler> handler;
    {
      std::lock_guard lock(mutex_);
      handler = handler_;
    }
    const std::uint64_t broker_id = frame.correlation_id();
    const std::uint64_t generation = generation_;
    if (!handler || !*handler) {
      v1::Frame answer;
      answer.mutable_error()->set_code(v1::UNKNOWN_REQUEST);
      answer.mutable_error()->set_message("this client does not handle requests of body type " +
                                          std::to_string(static_cast<int>(frame.body_case())));
      return enqueue_answer(broker_id, generation, answer);
    }
    // The handler may block (a database query for CheckTx): never on the io thread.
    asio::post(handler_pool_, [this, handler, frame = std::move(frame), broker_id, generation] {
      std::optional<v1::Frame> answer;
      try {
        answer = (*handler)(frame);
      } catch (const std::exception& e) {
        answer.emplace();
        answer->mutable_error()->set_code(v1::INTERNAL);
        answer->mutable_error()->set_message(std::string("the client's request handler failed: ") + e.what());
      }
      if (!answer) return;
      asio::post(io_, [this, broker_id, generation, answer = std::move(*answer)] {
        enqueue_answer(broker_id, generation, answer);
      });
    });
  }

  void enqueue_answer(std::uint64_t broker_id, std::uint64_t generation, v1::Frame answer) {
    if (closing_ || generation != generation_ || !connected_now_) return;
    answer.set_correlation_id(broker_id);
    std::string bytes;
    if (!protocol::encode_frame(answer, bytes, send_limit_.load())) {
      log("dropping an answer to broker request " + std::to_string(broker_id) + ": it cannot be framed");
      return;
    }
    write_queue_bytes_ += bytes.size();
    write_queue_.push_back(queued_frame{0, generation, std::move(bytes)});
    write_signal_.cancel();
  }

  awaitable<void> write_loop() {
    std::vector<std::string> batch;
    std::vector<asio::const_buffer> buffers;
    for (;;) {
      if (write_queue_.empty()) {
        write_signal_.expires_at(asio::steady_timer::time_point::max());
        co_await write_signal_.async_wait(use_nothrow);
        auto cs = co_await asio::this_coro::cancellation_state;
        if (closing_ || cs.cancelled() != asio::cancellation_type::none) co_return;
        continue;
      }
      batch.clear();
      buffers.clear();
      // Coalesce what is queued into one write, up to a few MiB.
      std::size_t bytes = 0;
      while (!write_queue_.empty() && (batch.empty() || bytes < (4u << 20))) {
        auto q = std::move(write_queue_.front());
        write_queue_.pop_front();
        write_queue_bytes_ -= q.bytes.size();
        if (q.request_id != 0) {
          auto it = pending_.find(q.request_id);
          if (it == pending_.end()) continue;
          it->second.sent = true;
        } else if (q.generation != generation_) {
          continue;
        }
        bytes += q.bytes.size();
        batch.push_back(std::move(q.bytes));
      }
      for (const auto& b : batch) buffers.push_back(asio::buffer(b));
      if (buffers.empty()) continue;
      auto [ec, n] = co_await asio::async_write(*socket_, buffers, use_nothrow);
      if (ec) {
        disconnect_reason_ = error(errc::connection_lost, "write failed: " + ec.message());
        co_return;
      }
    }
  }

  connection_options options_;
  std::optional<broker_address> address_;
  error address_error_;

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  // After options_: sized by options_.request_handler_threads.
  asio::thread_pool handler_pool_{std::max<std::size_t>(options_.request_handler_threads, 1)};
  std::thread thread_;
  std::atomic<std::thread::id> io_thread_id_{};
  std::atomic<std::uint64_t> next_id_{1};
  std::atomic<std::uint32_t> send_limit_{protocol::default_max_frame_bytes};
  std::atomic<bool> connected_flag_{false};
  std::atomic<std::uint64_t> connects_{0};

  // io thread only.
  std::unordered_map<std::uint64_t, pending_request> pending_;
  std::deque<queued_frame> write_queue_;
  std::size_t write_queue_bytes_ = 0;
  asio::steady_timer write_signal_{io_};
  asio::steady_timer backoff_timer_{io_};
  asio::steady_timer connect_timer_{io_};
  std::optional<tcp::socket> socket_;
  std::uint32_t receive_limit_ = protocol::default_max_frame_bytes;
  bool closing_ = false;
  bool connected_now_ = false;
  std::uint64_t generation_ = 0;
  std::optional<error> disconnect_reason_;
  std::optional<error> broker_notice_;
  std::optional<error> refusal_;
  std::optional<error> last_error_io_;
  // +-20% jitter, so that clients cut off together do not reconnect together.
  common::backoff reconnect_delay_{options_.reconnect_backoff_initial, options_.reconnect_backoff_max, 0.2};

  // Shared with user threads, under mutex_.
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool closed_ = false;
  bool connected_ = false;
  bool refused_ = false;
  bool run_finished_ = false;
  std::optional<error> last_error_;
  std::optional<server_info> server_;
  std::shared_ptr<request_handler> handler_;
};

connection::connection(connection_options options) : impl_(std::make_unique<impl>(std::move(options))) {}
connection::~connection() = default;

result<std::shared_ptr<connection>> connection::connect(connection_options options) {
  const auto timeout = options.connect_timeout;
  auto c = std::make_shared<connection>(std::move(options));
  auto ready = c->wait_connected(timeout);
  if (!ready) return ready.error();
  return c;
}

result<void> connection::wait_connected(std::chrono::milliseconds timeout) { return impl_->wait_connected(timeout); }

void connection::async_request(v1::Frame request, response_callback cb, std::optional<std::chrono::milliseconds> timeout) {
  impl_->async_request(std::move(request), std::move(cb), timeout);
}

result<v1::Frame> connection::request(v1::Frame request, std::optional<std::chrono::milliseconds> timeout) {
  return impl_->request(std::move(request), timeout);
}

void connection::set_request_handler(request_handler handler) { impl_->set_request_handler(std::move(handler)); }
bool connection::is_connected() const noexcept { return impl_->is_connected(); }
std::optional<server_info> connection::server() const { return impl_->server(); }
std::uint64_t connection::connects() const noexcept { return impl_->connects(); }
const connection_options& connection::options() const noexcept { return impl_->options(); }
void connection::close() { impl_->close(); }

}  // namespace txmq::client
