#pragma once

// What the code on the broker's io thread shares: the guarded loop that runs it, storage
// completions brought back to that thread, and the wall clock the stored times are written in.

#include <chrono>
#include <cstdint>
#include <exception>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "txmq/common/log.h"
#include "txmq/common/metrics.h"
#include "txmq/storage/store.h"

namespace txmq::broker {

// Runs `io` until it is stopped or out of work. An exception that escapes a handler or timer is
// a bug, but one request's bug must not end the process and every other client's connection:
// it is logged, counted in `internal_errors` (txmq_internal_errors_total) and the loop runs
// again (Asio allows run() after a handler threw; the thrower's own state is what it left).
inline void run_guarded(boost::asio::io_context& io, common::counter& internal_errors) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      internal_errors.inc();
      common::log::error("internal error on the io thread (the broker keeps serving): ", e.what());
    } catch (...) {
      internal_errors.inc();
      common::log::error("internal error on the io thread (the broker keeps serving): a non-standard exception");
    }
  }
}

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
