// max_request_memory (docs/semantics.md §6): the broker-wide budget of requests being handled,
// and a connection that stops reading its socket while the budget is spent.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "handler_test_support.h"
#include "net/connection.h"
#include "net/request_memory.h"
#include "txmq/protocol/frame_codec.h"

namespace txmq::broker::test {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

TEST(request_memory, waiters_wake_when_answers_free_memory_below_the_limit) {
  asio::io_context io;
  request_memory memory(io.get_executor(), 100);
  memory.charge(60);
  EXPECT_FALSE(memory.over());
  memory.charge(60);
  EXPECT_TRUE(memory.over());
  bool passed = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    while (memory.over()) co_await memory.wait();
    passed = true;
  }, asio::detached);
  io.poll();
  EXPECT_FALSE(passed);
  EXPECT_EQ(memory.waiting(), 1u);
  memory.release(10);  // 110: still above
  io.poll();
  EXPECT_FALSE(passed);
  memory.release(60);  // 50
  io.poll();
  EXPECT_TRUE(passed);
  EXPECT_EQ(memory.waiting(), 0u);
  EXPECT_EQ(memory.used(), 50u);
  memory.release(1000);
  EXPECT_EQ(memory.used(), 0u) << "a release never goes below zero";

  request_memory unlimited(io.get_executor(), 0);
  unlimited.charge(1u << 30);
  EXPECT_FALSE(unlimited.over());
}

// A real connection on loopback with a budget of one byte: a parked long poll holds its
// request's memory, so the Produce sent right after it is not read until the poll's wait ends.
// Without the budget the Produce would be read at once and answer the poll with its message.
class request_memory_connection_test : public handler_test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(start());
    tcp::acceptor acceptor(io_, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    client_.connect(acceptor.local_endpoint());
    tcp::socket server(io_);
    acceptor.accept(server);
    memory_ = std::make_unique<request_memory>(io_.get_executor(), 1);
    connection_limits limits;
    limits.memory = memory_.get();
    conn_ = std::make_shared<connection>(common::wire_stream(std::move(server)), *svc_, limits, 1);
    conn_->start();
    client_.non_blocking(true);
  }

  void TearDown() override {
    boost::system::error_code ec;
    client_.close(ec);
    run_until([&] { return !conn_->is_open(); }, 2s);
    conn_.reset();
    handler_test::TearDown();
  }

  void send(v1::Frame f, std::uint64_t corr) {
    f.set_correlation_id(corr);
    std::string bytes;
    ASSERT_TRUE(protocol::encode_frame(f, bytes));
    asio::write(client_, asio::buffer(bytes));  // small: the socket's buffer takes it
  }

  // Reads what arrived (without blocking) into answers_.
  void pump() {
    std::array<std::byte, 65536> buf{};
    boost::system::error_code ec;
    const std::size_t n = client_.read_some(asio::buffer(buf), ec);
    if (!ec && n > 0) reader_.feed(std::span(buf.data(), n));
    while (auto f = reader_.next()) {
      if (!f.value()) break;
      answers_.push_back(std::move(*f.value()));
    }
  }

  std::optional<v1::Frame> answer(std::uint64_t corr) {
    for (auto& a : answers_) {
      if (a.correlation_id() == corr) return a;
    }
    return std::nullopt;
  }

  bool wait_answer(std::uint64_t corr) {
    return run_until([&] {
      pump();
      return answer(corr).has_value();
    });
  }

  tcp::socket client_{io_};
  std::unique_ptr<request_memory> memory_;
  std::shared_ptr<connection> conn_;
  protocol::frame_reader reader_;
  std::vector<v1::Frame> answers_;
};

TEST_F(request_memory_connection_test, a_connection_reads_no_request_while_the_budget_is_spent) {
  v1::Frame hello;
  hello.mutable_hello()->set_protocol_version(1);
  hello.mutable_hello()->set_client_id("test");
  ASSERT_NO_FATAL_FAILURE(send(hello, 1));
  ASSERT_TRUE(wait_answer(1));
  ASSERT_NO_FATAL_FAILURE(send(create_topic_frame("t", 1), 2));
  ASSERT_TRUE(wait_answer(2));
  ASSERT_TRUE(answer(2)->has_topic_info()) << answer(2)->ShortDebugString();
  EXPECT_EQ(memory_->used(), 0u);

  ASSERT_NO_FATAL_FAILURE(send(fetch_frame("g", "t", 300), 3));
  ASSERT_TRUE(run_until([&] { return memory_->waiting() == 1; })) << "the reader waits for memory";
  EXPECT_TRUE(memory_->over());
  ASSERT_NO_FATAL_FAILURE(send(produce_frame("t", {message("m")}), 4));

  ASSERT_TRUE(wait_answer(3));
  ASSERT_TRUE(answer(3)->has_fetch_response()) << answer(3)->ShortDebugString();
  EXPECT_EQ(answer(3)->fetch_response().deliveries_size(), 0) << "the produce was read while the poll held memory";
  EXPECT_FALSE(answer(4)) << "the produce was answered before the poll";

  // The poll's answer freed its memory: the produce is read, stored and answered.
  ASSERT_TRUE(wait_answer(4));
  EXPECT_TRUE(answer(4)->has_produce_response()) << answer(4)->ShortDebugString();
  EXPECT_GE(memory_->pauses(), 1u);
  EXPECT_EQ(memory_->used(), 0u);
  EXPECT_TRUE(conn_->is_open());
}

}  // namespace
}  // namespace txmq::broker::test
