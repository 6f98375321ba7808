// run_guarded (io_thread.h): an exception escaping a posted handler or a timer is logged and
// counted, and the io loop keeps serving what comes after it. on_io inside gather_completions:
// a burst of storage completions reaches the io thread as one handler, in order.

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <vector>

#include <boost/asio.hpp>

#include "io_thread.h"
#include "txmq/common/metrics.h"

namespace txmq::broker {
namespace {

namespace asio = boost::asio;

TEST(io_loop, an_exception_from_a_posted_handler_or_timer_is_counted_and_the_loop_keeps_serving) {
  asio::io_context io;
  common::metrics_registry registry;
  auto& internal_errors = registry.add_counter("txmq_internal_errors_total", "test");
  std::vector<int> served;

  asio::post(io, [] { throw std::runtime_error("a bug in a handler"); });
  asio::post(io, [&] { served.push_back(1); });
  asio::steady_timer timer(io, std::chrono::milliseconds(1));
  timer.async_wait([&](boost::system::error_code) {
    served.push_back(2);
    throw std::logic_error("a bug in a timer");
  });
  asio::steady_timer later(io, std::chrono::milliseconds(5));
  later.async_wait([&](boost::system::error_code) {
    served.push_back(3);
    asio::post(io, [] { throw 42; });  // not even a std::exception
    asio::post(io, [&] {
      served.push_back(4);
      io.stop();
    });
  });

  run_guarded(io, internal_errors);  // returns when stopped; throws nothing

  EXPECT_EQ(served, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(internal_errors.value(), 3u);
  EXPECT_NE(registry.render().find("txmq_internal_errors_total 3"), std::string::npos) << registry.render();
}

TEST(io_loop, run_guarded_returns_when_the_loop_runs_out_of_work) {
  asio::io_context io;
  common::metrics_registry registry;
  auto& internal_errors = registry.add_counter("txmq_internal_errors_total", "test");
  bool ran = false;
  asio::post(io, [&] { ran = true; });
  run_guarded(io, internal_errors);
  EXPECT_TRUE(ran);
  EXPECT_EQ(internal_errors.value(), 0u);
}

TEST(io_loop, the_completions_of_one_burst_run_in_one_handler_in_order) {
  asio::io_context io;
  std::vector<int> got;
  auto record = [&](result<int> r) { got.push_back(r.value()); };
  auto first = on_io<int>(io, record);
  auto second = on_io<int>(io, record);
  auto third = on_io<int>(io, record);
  gather_completions([&] {
    first(1);
    second(2);
    third(3);
  });
  EXPECT_TRUE(got.empty()) << "completions run on the io thread, not on the store's";
  EXPECT_EQ(io.poll_one(), 1u);
  EXPECT_EQ(got, (std::vector<int>{1, 2, 3})) << "one handler runs the whole burst";
  EXPECT_EQ(io.poll(), 0u);
  io.restart();  // it ran out of work

  // Outside a burst each completion is a post of its own.
  auto alone = on_io<int>(io, record);
  alone(4);
  EXPECT_EQ(io.poll_one(), 1u);
  EXPECT_EQ(got, (std::vector<int>{1, 2, 3, 4}));
}

TEST(io_loop, a_completion_that_throws_does_not_drop_the_rest_of_its_burst) {
  asio::io_context io;
  common::metrics_registry registry;
  auto& internal_errors = registry.add_counter("txmq_internal_errors_total", "test");
  std::vector<int> got;
  auto record = [&](result<int> r) { got.push_back(r.value()); };
  auto before = on_io<int>(io, record);
  auto buggy = on_io<int>(io, [](result<int>) { throw std::runtime_error("a bug in a completion"); });
  auto after = on_io<int>(io, record);
  auto last = on_io<int>(io, record);
  gather_completions([&] {
    before(1);
    buggy(2);
    after(3);
    last(4);
  });
  run_guarded(io, internal_errors);
  EXPECT_EQ(got, (std::vector<int>{1, 3, 4}));
  EXPECT_EQ(internal_errors.value(), 1u);
}

}  // namespace
}  // namespace txmq::broker
