#pragma once

// The connection's private half, shared by its three source files:
//   connection.cc          the public facade and the calls made on user threads;
//   connection_requests.cc the io thread's request table: timeouts, answers, the broker's own
//                          requests (CheckTx) handed to the handler pool;
//   connection_session.cc  one TCP session after another: connect, Hello, read and write loops,
//                          reconnecting with back-off.
// Members marked "io thread only" are touched by the io thread alone; the others are atomics or
// guarded by mutex_.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>
#include <string>
#include <thread>
#include <unordered_map>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include "txmq/client/connection.h"
#include "txmq/common/backoff.h"
#include "txmq/common/tls.h"
#include "txmq/protocol/frame_codec.h"

namespace txmq::client {
namespace asio = boost::asio;

namespace detail {
// Broker handshake refusals that another attempt will not cure: requests waiting for a
// connection fail with them at once instead of waiting for their timeout.
inline bool is_refusal(const error& e) {
  return e.is(errc::tls_failed) || e.is(protocol::errc::not_authenticated) || e.is(protocol::errc::unsupported_version) ||
         e.is(protocol::errc::hello_required) || e.is(protocol::errc::not_authorized);
}
}  // namespace detail

class connection::impl {
 public:
  explicit impl(connection_options options);

  ~impl();

  void close();

  result<void> wait_connected(std::chrono::milliseconds timeout);

  // Encodes `request` here, on the caller's thread (setting its correlation id), and leaves it to
  // the caller: both public forms of async_request come here.
  void async_request(v1::Frame& request, response_callback cb, std::optional<std::chrono::milliseconds> timeout);

  result<v1::Frame> request(v1::Frame request, std::optional<std::chrono::milliseconds> timeout);

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

  void enqueue_request(std::uint64_t id, std::string bytes, response_callback cb, std::chrono::milliseconds wait);

  void on_timeout(std::uint64_t id, std::chrono::milliseconds wait);

  // A sent request timed out while the broker was last heard less than dead_link_timeout ago:
  // ends the session when that much silence has passed, unless something arrives first.
  void check_dead_link_later();

  void complete(std::uint64_t id, result<v1::Frame> r);

  void invoke(response_callback& cb, result<v1::Frame> r);

  void fail_all(const error& e);

  // Requests written on a connection that broke get `e`; those still queued wait for the next.
  void fail_sent(const error& e);

  void fail_unsent(const error& e);

  void begin_close();

  void set_last_error(const error& e);

  asio::awaitable<void> run();

  void on_connected();

  void on_disconnected();

  asio::awaitable<result<common::wire_stream>> connect_once();

  asio::awaitable<result<common::wire_stream>> handshake();

  // One frame: the length is checked against the limit before anything is allocated.
  asio::awaitable<result<v1::Frame>> read_frame(common::wire_stream& stream, std::uint32_t limit);
  // A read error as the client reports it (TLS alerts explained).
  error read_error(const boost::system::error_code& ec, common::wire_stream& stream, std::string_view what);

  asio::awaitable<void> read_loop();

  void dispatch(v1::Frame frame);

  void enqueue_answer(std::uint64_t broker_id, std::uint64_t generation, v1::Frame answer);

  asio::awaitable<void> write_loop();

  connection_options options_;
  std::optional<broker_address> address_;  // the one being tried or used: an entry of bootstrap_
  std::vector<broker_address> bootstrap_;
  std::size_t bootstrap_next_ = 1;
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
  asio::steady_timer dead_link_timer_{io_};
  std::optional<common::wire_stream> socket_;
  // options_.tls.enabled: the context every session uses, built once; or why it could not be.
  std::shared_ptr<asio::ssl::context> tls_context_;
  std::optional<error> tls_error_;
  std::uint32_t receive_limit_ = protocol::default_max_frame_bytes;
  bool closing_ = false;
  bool connected_now_ = false;
  // When the current session last received an answer (set at connect): see on_timeout().
  std::chrono::steady_clock::time_point last_received_{};
  std::uint64_t generation_ = 0;
  std::optional<error> disconnect_reason_;
  std::optional<error> broker_notice_;
  std::optional<error> refusal_;
  // fail_while_unreachable: the last connect attempt failed (why), and no session since.
  std::optional<error> unreachable_;
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

}  // namespace txmq::client
