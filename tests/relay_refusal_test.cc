// A row the broker refuses for good stops its shard (outbox-relay/README.md, "Failures and
// back-off"): a real PostgreSQL, the real broker with a small --max-message-bytes, the real
// txmq-relay. Rows committed before the refused one are published; the refused row and every
// later row of its shard wait, round after round, until the operator deletes it; then the later
// rows follow in order. Label pg.

#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "broker_process.h"
#include "eventually.h"
#include "outbox_support.h"
#include "pg_cluster.h"
#include "raw_client.h"
#include "relay_process.h"
#include "txmq/client/admin.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/pg_schema.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;

// The value of an unlabelled counter in a /metrics text; -1 when absent.
double metric(const std::string& text, const std::string& name) {
  const auto at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

TEST(relay_refusal, a_row_over_the_brokers_message_limit_stops_its_shard_until_it_is_deleted) {
  const std::string db = shared_pg_cluster().create_database("relay_refusal");
  auto conn = connect_to(db);
  ASSERT_TRUE(producer::install_schema(conn.get(), 1));
  broker_process b({"--max-message-bytes", "1024"});
  b.start();
  {
    client::connection_options o;
    o.address = b.address();
    client::admin admin(std::make_shared<client::connection>(o));
    ASSERT_TRUE(admin.create_topic({"t", 1}));
  }
  // One transaction, one key, so one round of the relay reads all three in this order.
  ASSERT_TRUE(pg::exec(conn.get(),
                       "INSERT INTO txmq_outbox (topic, key, headers, payload) VALUES "
                       "('t', 'k', '{}', convert_to('first', 'UTF8')), "
                       "('t', 'k', '{}', convert_to(repeat('x', 2000), 'UTF8')), "
                       "('t', 'k', '{}', convert_to('third', 'UTF8'))"));
  const std::string big = scalar(db, "SELECT id FROM txmq_outbox WHERE length(payload) > 1024");
  ASSERT_FALSE(big.empty());

  std::mutex mu;
  std::vector<std::string> bodies;
  consumer::consumer_options co;
  co.connection.address = b.address();
  co.group = "refusal";
  co.topics = {"t"};
  co.max_wait = 200ms;
  consumer::consumer c(co);
  // Stopped and joined when the test ends, also on a failed ASSERT.
  std::jthread consuming([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      (void)c.run(
          [&](const consumer::delivery& d) -> client::result<void> {
            std::lock_guard lock(mu);
            bodies.push_back(d.message.body());
            return outcome::success();
          },
          stop);
    }
  });
  const auto consumed = [&] {
    std::lock_guard lock(mu);
    return bodies;
  };

  relay_process relay({"--pg", db, "--broker", b.address(), "--relay-id", "refusal", "--poll-interval", "200ms",
                       "--publish-timeout", "3s", "--backoff-max", "200ms"});
  relay.start();
  // One failure per round that stopped at the row: three means the relay came back to the shard
  // twice after its back-off, and the log names the row.
  ASSERT_TRUE(eventually(
      [&] {
        return relay.http_port() != 0 &&
               metric(http_get(relay.http_port(), "/metrics"), "txmq_relay_publish_failures_total") >= 3;
      },
      30s))
      << relay.log();
  EXPECT_NE(relay.log().find("outbox row " + big), std::string::npos) << relay.log();
  EXPECT_NE(relay.log().find("max_message_bytes"), std::string::npos) << relay.log();
  ASSERT_TRUE(eventually([&] { return !consumed().empty(); }, 20s));
  EXPECT_EQ(metric(http_get(b.http_port(), "/metrics"), "txmq_messages_in_total"), 1.0)
      << "a row after the refused one was stored before it";
  EXPECT_EQ(consumed(), std::vector<std::string>{"first"});
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM txmq_outbox"), "2");

  // The operator deletes the row; the shard goes on with the row after it.
  ASSERT_TRUE(pg::exec(conn.get(), "DELETE FROM txmq_outbox WHERE id = '" + big + "'"));
  ASSERT_TRUE(eventually([&] { return consumed().size() >= 2; }, 30s)) << relay.log();
  EXPECT_EQ(consumed(), (std::vector<std::string>{"first", "third"}));
  EXPECT_TRUE(eventually([&] { return scalar(db, "SELECT count(*) FROM txmq_outbox") == "0"; }, 20s));
  EXPECT_EQ(relay.stop(), 0) << relay.log();
}

}  // namespace
}  // namespace txmq::test
