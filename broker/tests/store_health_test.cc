// The store's health as the operator sees it, through the broker's handlers on an in-memory
// store whose free space the test sets: below min_free_disk_bytes /healthz answers 503 naming
// the reason, txmq_store_healthy is 0, Produce and Prepare answer STORE_FULL with the numbers
// while acks and EndTx commits still run; with space back everything is served again.

#include <atomic>
#include <future>
#include <string>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <gmock/gmock.h>

#include "handler_test_support.h"
#include "request_checks.h"
#include "store_health.h"
#include "txmq/common/admin_http.h"
#include "txmq/common/metrics.h"
#include "txmq/storage/errc.h"

namespace txmq::broker::test {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using testing::HasSubstr;

struct reply {
  unsigned status = 0;
  std::string body;
};

// A blocking GET on its own io_context and thread: the test thread runs the server's.
reply get(asio::ip::tcp::endpoint server, std::string target) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect(server);
  http::request<http::string_body> req{http::verb::get, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.keep_alive(false);
  http::write(socket, req);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(socket, buffer, res);
  return {res.result_int(), res.body()};
}

class store_health_test : public handler_test {
 protected:
  static constexpr std::uint64_t k_min_free = 256u << 20;

  void SetUp() override {
    store_options.min_free_bytes = k_min_free;
    store_options.disk_check_interval = 2ms;
    store_options.free_bytes = [this] { return std::optional<std::uint64_t>(free_.load()); };
    ASSERT_NO_FATAL_FAILURE(start());
    http_ = std::make_unique<common::admin_http_server>(io_, registry_);
    auto bound = http_->start(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    ASSERT_TRUE(bound) << bound.error();
    endpoint_ = bound.value();
    watch_store_health(*store_, registry_, *http_);
  }

  void TearDown() override {
    http_.reset();
    handler_test::TearDown();
  }

  // GET through the admin server, the io_context run here until the answer came.
  reply admin_get(const std::string& target) {
    auto answer = std::async(std::launch::async, [&] { return get(endpoint_, target); });
    EXPECT_TRUE(run_until([&] { return answer.wait_for(0s) == std::future_status::ready; }));
    return answer.get();
  }

  std::atomic<std::uint64_t> free_{1ull << 40};
  common::metrics_registry registry_;
  std::unique_ptr<common::admin_http_server> http_;
  asio::ip::tcp::endpoint endpoint_;
};

TEST_F(store_health_test, below_min_free_disk_healthz_is_503_the_gauge_0_and_produce_store_full_while_acks_run) {
  auto c = client("producers");
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  ASSERT_TRUE(request(c, produce_frame("t", {message("a")})).has_produce_response());
  const protocol::txid tx = protocol::uuid::make_v7();
  ASSERT_TRUE(request(c, prepare_frame(tx, "producers", {message("in tx", std::nullopt, "t")})).has_prepare_response());
  auto fetched = request(c, fetch_frame("g", "t"));
  ASSERT_EQ(fetched.fetch_response().deliveries_size(), 1) << fetched.ShortDebugString();

  EXPECT_EQ(admin_get("/healthz").status, 200u);
  EXPECT_THAT(registry_.render(), HasSubstr("\ntxmq_store_healthy 1\n"));

  free_ = k_min_free - 1;
  ASSERT_TRUE(run_until([&] { return store_->health().status == storage::store_health::state::full; }));

  const reply unhealthy = admin_get("/healthz");
  EXPECT_EQ(unhealthy.status, 503u);
  EXPECT_THAT(unhealthy.body, HasSubstr(std::to_string(k_min_free - 1) + " bytes free, below the minimum of " +
                                        std::to_string(k_min_free)));
  EXPECT_THAT(registry_.render(), HasSubstr("\ntxmq_store_healthy 0\n"));

  auto refused = request(c, produce_frame("t", {message("b")}));
  ASSERT_TRUE(refused.has_error()) << refused.ShortDebugString();
  EXPECT_EQ(refused.error().code(), v1::STORE_FULL);
  EXPECT_THAT(refused.error().message(), HasSubstr("new messages are refused until space is freed"));
  auto refused_tx = request(c, prepare_frame(protocol::uuid::make_v7(), "producers", {message("x", std::nullopt, "t")}));
  ASSERT_TRUE(refused_tx.has_error()) << refused_tx.ShortDebugString();
  EXPECT_EQ(refused_tx.error().code(), v1::STORE_FULL);

  // What frees space, or needs none, still runs.
  auto acked = request(c, ack_frame("g", fetched.fetch_response().deliveries(0).message()));
  ASSERT_TRUE(acked.has_delivery_results()) << acked.ShortDebugString();
  EXPECT_EQ(acked.delivery_results().results(0), v1::ERROR_CODE_UNSPECIFIED);
  auto committed = request(c, end_tx_frame(tx, v1::COMMIT));
  ASSERT_TRUE(committed.has_end_tx_response()) << committed.ShortDebugString();
  EXPECT_EQ(committed.end_tx_response().state(), v1::COMMITTED);

  free_ = k_min_free;
  ASSERT_TRUE(run_until([&] { return store_->health().status == storage::store_health::state::ok; }));
  EXPECT_EQ(admin_get("/healthz").status, 200u);
  EXPECT_THAT(registry_.render(), HasSubstr("\ntxmq_store_healthy 1\n"));
  EXPECT_TRUE(request(c, produce_frame("t", {message("c")})).has_produce_response());
}

TEST(store_health_change, logs_the_reason_once_when_it_starts_and_the_recovery) {
  using state = storage::store_health::state;
  const storage::store_health failed{state::failed, "the store stopped taking writes after: No space", true};
  EXPECT_EQ(store_health_change(state::ok, failed),
            "the store refuses every write (STORE_UNAVAILABLE): the store stopped taking writes after: No space");
  EXPECT_EQ(store_health_change(state::failed, failed), std::nullopt);
  const storage::store_health full{state::full, "3 bytes free", false};
  EXPECT_EQ(store_health_change(state::ok, full), "produce and Prepare are refused (STORE_FULL): 3 bytes free");
  EXPECT_EQ(store_health_change(state::full, storage::store_health{}), "the store takes writes again");
  EXPECT_EQ(store_health_change(state::ok, storage::store_health{}), std::nullopt);
}

TEST(store_wire_codes, a_failed_store_is_store_unavailable_and_a_full_disk_store_full) {
  EXPECT_EQ(wire_code(make_error_code(storage::errc::store_failed)), v1::STORE_UNAVAILABLE);
  EXPECT_EQ(wire_code(make_error_code(storage::errc::io_error)), v1::STORE_UNAVAILABLE);
  EXPECT_EQ(wire_code(make_error_code(storage::errc::store_full)), v1::STORE_FULL);
  EXPECT_EQ(wire_code(make_error_code(storage::errc::corruption)), v1::STORAGE_ERROR);
}

}  // namespace
}  // namespace txmq::broker::test
