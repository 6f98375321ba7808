#pragma once

// Flood work in bounded slices, so that a well-behaved client's request waits behind at most a
// few dozen pieces of it, not behind thousands (issue 13: the connection flood).
//
// Why: silent sockets accepted together reach hello_timeout together. Asio runs every timer
// that is due in one turn of the io loop, before it looks at the sockets again, so 5,000
// connections closing at once (an Error frame each, a shutdown) used to run back to back while
// a client's request, already readable, waited for all of them: tens of milliseconds on a quiet
// machine, hundreds when other work preempts the io thread in the middle of the burst.
//
// take() completes at once while fewer than `per_turn` took a slot in this turn; beyond that
// the caller waits in a queue, and `per_turn` of them resume at each following turn. A turn
// ends with a handler posted behind everything that is queued, the reactor's poll of the
// sockets included, so other connections' reads run between two slices.
//
// One per broker, shared by its connections by reference; runs on the io thread only, not
// thread-safe. Must outlive the coroutines waiting in take().

#include <cstddef>
#include <deque>
#include <utility>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>

namespace txmq::broker {

class io_pacer {
 public:
  io_pacer(boost::asio::any_io_executor executor, std::size_t per_turn)
      : executor_(std::move(executor)), per_turn_(per_turn > 0 ? per_turn : 1) {}
  io_pacer(const io_pacer&) = delete;
  io_pacer& operator=(const io_pacer&) = delete;
  io_pacer(io_pacer&&) = delete;
  io_pacer& operator=(io_pacer&&) = delete;

  // Completes (void()) when the caller may do one piece of flood work: at once if this turn has
  // a slot left and nobody waits, else in a later turn, in arrival order.
  template <typename CompletionToken>
  auto take(CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void()>(
        [this](auto handler) {
          if (waiting_.empty() && used_ < per_turn_) {
            ++used_;
            end_turn_later();
            // Not inline: an initiation must not complete in the caller's frame.
            boost::asio::post(executor_, std::move(handler));
            return;
          }
          waiting_.emplace_back(std::move(handler));
          ++deferred_;
          end_turn_later();
        },
        token);
  }

  [[nodiscard]] std::size_t waiting() const noexcept { return waiting_.size(); }
  // How many pieces of work had to wait for a later turn (for tests).
  [[nodiscard]] std::size_t deferred() const noexcept { return deferred_; }

 private:
  void end_turn_later() {
    if (turn_end_posted_) return;
    turn_end_posted_ = true;
    boost::asio::post(executor_, [this] { next_turn(); });
  }

  void next_turn() {
    turn_end_posted_ = false;
    used_ = 0;
    while (used_ < per_turn_ && !waiting_.empty()) {
      ++used_;
      auto h = std::move(waiting_.front());
      waiting_.pop_front();
      boost::asio::post(executor_, std::move(h));
    }
    if (used_ > 0) end_turn_later();
  }

  boost::asio::any_io_executor executor_;
  std::size_t per_turn_;
  std::size_t used_ = 0;
  std::size_t deferred_ = 0;
  bool turn_end_posted_ = false;
  std::deque<boost::asio::any_completion_handler<void()>> waiting_;
};

}  // namespace txmq::broker
