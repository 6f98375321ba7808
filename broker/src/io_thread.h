#pragma once

// What the code on the broker's io thread shares: storage completions brought back to that
// thread, and the wall clock the stored times are written in.

#include <chrono>
#include <cstdint>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "txmq/storage/store.h"

namespace txmq::broker {

// A storage completion that runs fn(result<T>) on `io`. The store completes on its own threads;
// the handlers' state lives on the io thread, which needs no locks because only it touches it.
template <class T, class Fn>
[[nodiscard]] storage::completion<T> on_io(boost::asio::io_context& io, Fn&& fn) {
  return [&io, fn = std::forward<Fn>(fn)](result<T> r) mutable {
    boost::asio::post(io, [fn = std::move(fn), r = std::move(r)]() mutable { fn(std::move(r)); });
  };
}

// Unix milliseconds by the system clock: deadlines, due times and publish times are kept in it.
[[nodiscard]] inline std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace txmq::broker
