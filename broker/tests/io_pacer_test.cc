// io_pacer (net/io_pacer.h): flood work (deadline closes) in slices, so that a handler queued
// meanwhile, a well-behaved client's read, runs after a slice and not after the whole flood.

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include <boost/asio.hpp>

#include "net/io_pacer.h"

namespace txmq::broker::test {
namespace {

namespace asio = boost::asio;

TEST(io_pacer, a_handler_queued_during_a_flood_runs_after_a_slice_not_after_the_flood) {
  constexpr std::size_t per_turn = 4;
  constexpr int pieces = 40;
  asio::io_context io;
  io_pacer pacer(io.get_executor(), per_turn);
  std::vector<int> order;  // 1..pieces: the flood's pieces; 0: the client's handler
  for (int i = 1; i <= pieces; ++i) {
    asio::co_spawn(io, [&, i]() -> asio::awaitable<void> {
      co_await pacer.take(asio::use_awaitable);
      order.push_back(i);
      // The client's read becomes ready while the flood is being worked off.
      if (i == 1) asio::post(io, [&] { order.push_back(0); });
    }, asio::detached);
  }
  io.run();
  ASSERT_EQ(order.size(), static_cast<std::size_t>(pieces) + 1);
  const auto client_at = static_cast<std::size_t>(std::find(order.begin(), order.end(), 0) - order.begin());
  // Unpaced, all 40 would run first (they were queued before it).
  EXPECT_LE(client_at, 2 * per_turn);
  EXPECT_EQ(pacer.deferred(), static_cast<std::size_t>(pieces) - per_turn);
  EXPECT_EQ(pacer.waiting(), 0u);
  // In arrival order.
  std::vector<int> flood;
  for (int v : order) {
    if (v != 0) flood.push_back(v);
  }
  EXPECT_TRUE(std::is_sorted(flood.begin(), flood.end()));
}

TEST(io_pacer, a_quiet_turn_takes_at_once_and_the_budget_comes_back) {
  asio::io_context io;
  io_pacer pacer(io.get_executor(), 2);
  int done = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 2; ++i) {
      asio::co_spawn(io, [&]() -> asio::awaitable<void> {
        co_await pacer.take(asio::use_awaitable);
        ++done;
      }, asio::detached);
    }
    io.run();
    io.restart();
  }
  EXPECT_EQ(done, 6);
  EXPECT_EQ(pacer.deferred(), 0u) << "two a turn never wait";
}

}  // namespace
}  // namespace txmq::broker::test
