#pragma once

// Running txmq::cluster coroutines from a test's thread: run() drives the test's io_context
// until the coroutine is done and returns its value (its exception rethrown).

#include <exception>
#include <optional>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

namespace txmq::test {

template <class T>
T run(boost::asio::io_context& io, boost::asio::awaitable<T> work) {
  // result<T> has no default value, so the answer is kept in an optional rather than a future.
  std::optional<T> out;
  std::exception_ptr failure;
  bool done = false;
  boost::asio::co_spawn(
      io, [&]() -> boost::asio::awaitable<void> { out.emplace(co_await std::move(work)); },
      [&](std::exception_ptr e) {
        failure = e;
        done = true;
      });
  io.restart();
  while (!done) {
    if (io.run_one() == 0) io.restart();
  }
  if (failure) std::rethrow_exception(failure);
  return std::move(*out);
}

}  // namespace txmq::test
