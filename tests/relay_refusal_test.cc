// A row the broker refuses for good stops its shard, and only its shard (outbox-relay/README.md,
// "Failures and back-off"): a real PostgreSQL, the real broker with a small --max-message-bytes,
// the real txmq-relay. Rows committed before the refused one are published; the refused row and
// every later row of its shard wait, read after read, until the operator deletes it, while the
// other shard's rows flow; then the later rows follow in order. Label pg.

#include <algorithm>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "admin_of.h"
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

TEST(relay_refusal, a_row_over_the_brokers_message_limit_stops_its_shard_until_it_is_deleted) {
  const std::string db = shared_pg_cluster().create_database("relay_refusal");
  auto conn = connect_to(db);
  ASSERT_TRUE(producer::install_schema(conn.get(), 2));
  broker_process b({"--max-message-bytes", "1024"});
  b.start();
  {
    client::admin admin = admin_of(b);
    ASSERT_TRUE(admin.create_topic({"t", 2}));
  }
  const std::string other = key_of_other_shard(db, "k");
  ASSERT_FALSE(other.empty());
  // One transaction, one key, so one read of the relay takes all three in this order.
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
  const auto has = [&](const std::string& body) {
    const auto all = consumed();
    return std::find(all.begin(), all.end(), body) != all.end();
  };

  relay_process relay({"--pg", db, "--broker", b.address(), "--relay-id", "refusal", "--poll-interval", "200ms",
                       "--publish-timeout", "3s", "--backoff-max", "200ms"});
  relay.start();
  const auto relay_metric = [&](const std::string& name) {
    return relay.http_port() == 0 ? -1.0 : metric(http_get(relay.http_port(), "/metrics"), name);
  };
  const auto reads = [&] {
    const std::string text = relay.http_port() == 0 ? "" : http_get(relay.http_port(), "/metrics");
    double n = 0;
    for (const char* start : {"resume", "lowered", "full", "deferred"}) {
      const std::string line = "txmq_relay_reads_total{start=\"" + std::string(start) + "\"} ";
      if (auto at = text.find(line); at != std::string::npos) n += std::stod(text.substr(at + line.size()));
    }
    return n;
  };
  ASSERT_TRUE(eventually([&] { return relay_metric("txmq_relay_shards_stopped") == 1; }, 30s)) << relay.log();
  EXPECT_NE(relay.log().find("shard "), std::string::npos) << relay.log();
  EXPECT_NE(relay.log().find("outbox row " + big), std::string::npos) << relay.log();
  EXPECT_NE(relay.log().find("max_message_bytes"), std::string::npos) << relay.log();
  ASSERT_TRUE(eventually([&] { return has("first"); }, 20s));

  // The other shard flows meanwhile, and the stopped one is read again (every poll) and stops
  // at the same row each time: the row is logged once.
  const double reads_at_stop = reads();
  ASSERT_TRUE(pg::exec(conn.get(), "INSERT INTO txmq_outbox (topic, key, headers, payload) VALUES ('t', '" + other +
                                       "', '{}', convert_to('other', 'UTF8'))"));
  ASSERT_TRUE(eventually([&] { return has("other"); }, 20s)) << relay.log();
  ASSERT_TRUE(eventually([&] { return reads() >= reads_at_stop + 4; }, 20s)) << relay.log();
  EXPECT_EQ(metric(http_get(b.http_port(), "/metrics"), "txmq_messages_in_total"), 2.0)
      << "a row after the refused one was stored before it";
  EXPECT_FALSE(has("third"));
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM txmq_outbox"), "2");
  EXPECT_EQ(relay_metric("txmq_relay_shards_stopped"), 1);
  EXPECT_EQ(relay_metric("txmq_relay_publish_failures_total"), 0) << "the broker is fine; one row is not";

  // The operator deletes the row; the shard goes on with the row after it.
  ASSERT_TRUE(pg::exec(conn.get(), "DELETE FROM txmq_outbox WHERE id = '" + big + "'"));
  ASSERT_TRUE(eventually([&] { return has("third"); }, 30s)) << relay.log();
  std::vector<std::string> of_k;
  for (const auto& body : consumed()) {
    if (body != "other") of_k.push_back(body);
  }
  EXPECT_EQ(of_k, (std::vector<std::string>{"first", "third"}));
  EXPECT_TRUE(eventually([&] { return scalar(db, "SELECT count(*) FROM txmq_outbox") == "0"; }, 20s));
  EXPECT_TRUE(eventually([&] { return relay_metric("txmq_relay_shards_stopped") == 0; }, 20s)) << relay.log();
  EXPECT_NE(relay.log().find("goes on"), std::string::npos) << relay.log();
  EXPECT_EQ(relay.stop(), 0) << relay.log();
}

}  // namespace
}  // namespace txmq::test
