#pragma once

// The bytes of all requests being handled, broker-wide (`max_request_memory`,
// docs/semantics.md §6). A connection charges a request's frame when its body has been read
// and releases it when the request is answered (or the connection closes). While the total is
// above the limit, connections read no new frame: the broker stops reading sockets until
// answers free memory, and never drops a request it has read. Each connection may finish the
// frame it is reading, so the total passes the limit by at most one frame per connection.
//
// One per broker, shared by its connections by reference; runs on the io thread, not
// thread-safe. Must outlive the coroutines waiting in wait_below().

#include <cstddef>
#include <cstdint>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace txmq::broker {

class request_memory {
 public:
  // `limit` 0 = no limit.
  request_memory(const boost::asio::any_io_executor& executor, std::size_t limit)
      : limit_(limit), freed_(executor) {
    freed_.expires_at(boost::asio::steady_timer::time_point::max());
  }

  void charge(std::size_t bytes) noexcept { used_ += bytes; }
  // Wakes the waiting readers once the total is back within the limit.
  void release(std::size_t bytes) {
    used_ -= bytes < used_ ? bytes : used_;
    if (waiting_ > 0 && !over()) wake_all();
  }
  [[nodiscard]] bool over() const noexcept { return limit_ > 0 && used_ > limit_; }
  [[nodiscard]] std::size_t used() const noexcept { return used_; }
  [[nodiscard]] std::size_t limit() const noexcept { return limit_; }
  // Readers that wait now, and how many times one had to wait (for metrics and tests).
  [[nodiscard]] std::size_t waiting() const noexcept { return waiting_; }
  [[nodiscard]] std::uint64_t pauses() const noexcept { return pauses_; }

  // Waits for one wake-up: memory freed below the limit, or wake_all() (a closing connection
  // wakes its reader so). The caller checks over() again.
  boost::asio::awaitable<void> wait() {
    ++waiting_;
    ++pauses_;
    auto [ec] = co_await freed_.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    (void)ec;  // cancelled = woken
    --waiting_;
  }
  void wake_all() { freed_.cancel(); }

 private:
  std::size_t limit_;
  std::size_t used_ = 0;
  std::size_t waiting_ = 0;
  std::uint64_t pauses_ = 0;
  boost::asio::steady_timer freed_;
};

}  // namespace txmq::broker
