// A topic the broker refuses stops only the shards whose next row targets it (outbox-relay/README.md,
// "Failures and back-off"): a real PostgreSQL, the real broker, the real txmq-relay. (a) auth on,
// the relay's principal may produce to topic 'a' but not 'b': 'a' flows, the shard of the 'b' rows
// stops with NOT_AUTHORIZED, no publish failure is counted and txmq_relay_broker_up stays 1; once
// the grant is given the 'b' rows follow in order. (b) auto_create_topics off, rows for a missing
// topic stop their shard until the topic is created. (c) a topic name the broker does not take
// (INVALID_ARGUMENT) stops its shard until an operator mends the row. Label pg.

#include <algorithm>
#include <filesystem>
#include <fstream>
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

const std::string k_admin_token = "txmq_admin0123456789abcdef0123456789abcdef";

// Removed when the test ends.
struct temp_file {
  std::filesystem::path path;
  explicit temp_file(const std::string& name, const std::string& text)
      : path(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    std::ofstream(path) << text << "\n";
  }
  ~temp_file() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

// Consumes `topics` as `token` in the background; bodies in the order delivered.
class collector {
 public:
  collector(const std::string& address, std::vector<std::string> topics, const std::string& token) {
    consumer::consumer_options co;
    co.connection.address = address;
    co.connection.auth_token = token;
    co.group = "topic-refusal";
    co.topics = std::move(topics);
    co.max_wait = 200ms;
    consumer_ = std::make_unique<consumer::consumer>(co);
    thread_ = std::jthread([this](std::stop_token stop) {
      while (!stop.stop_requested()) {
        (void)consumer_->run(
            [this](const consumer::delivery& d) -> client::result<void> {
              std::lock_guard lock(mu_);
              bodies_.push_back(d.message.body());
              return outcome::success();
            },
            stop);
      }
    });
  }
  std::vector<std::string> bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  bool has(const std::string& body) {
    const auto all = bodies();
    return std::find(all.begin(), all.end(), body) != all.end();
  }
  // The bodies starting with `prefix`, in order.
  std::vector<std::string> of(const std::string& prefix) {
    std::vector<std::string> out;
    for (auto& b : bodies()) {
      if (b.rfind(prefix, 0) == 0) out.push_back(b);
    }
    return out;
  }

 private:
  std::unique_ptr<consumer::consumer> consumer_;
  std::mutex mu_;
  std::vector<std::string> bodies_;
  std::jthread thread_;  // last: joined before the rest goes
};

// Two keys of different shards of a 2-shard outbox.
// A connection to `db` with a 2-shard outbox installed, and a key of each shard (`key` "k").
struct two_shard_outbox {
  pg::connection_ptr conn;
  std::string key = "k";
  std::string other_key;
};

void make_outbox(const std::string& db, two_shard_outbox& out) {
  out.conn = connect_to(db);
  ASSERT_TRUE(producer::install_schema(out.conn.get(), 2));
  out.other_key = key_of_other_shard(db, out.key);
  ASSERT_FALSE(out.other_key.empty());
}

// The admin client of broker `b`, as `token` when auth is on.
void insert(PGconn* conn, const std::string& topic, const std::string& key, const std::vector<std::string>& bodies) {
  std::string values;
  for (const auto& b : bodies) {
    values += (values.empty() ? "" : ", ") + ("('" + topic + "', '" + key + "', '{}', convert_to('" + b + "', 'UTF8'))");
  }
  ASSERT_TRUE(pg::exec(conn, "INSERT INTO txmq_outbox (topic, key, headers, payload) VALUES " + values));
}

double relay_metric(relay_process& relay, const std::string& name) {
  return relay.http_port() == 0 ? -1.0 : metric(http_get(relay.http_port(), "/metrics"), name);
}

TEST(relay_topic_refusal, a_topic_the_relay_may_not_produce_to_stops_only_its_shard_until_granted) {
  const std::string db = shared_pg_cluster().create_database("relay_topic_acl");
  two_shard_outbox outbox;
  ASSERT_NO_FATAL_FAILURE(make_outbox(db, outbox));
  auto& [conn, kb, ka] = outbox;
  temp_file admin_token("txmq-topic-refusal-admin", k_admin_token);
  broker_process b({"--auth", "--admin-token-file", admin_token.path.string()});
  b.start();
  client::admin admin = admin_of(b, k_admin_token);
  ASSERT_TRUE(admin.create_topic({"a", 2}));
  ASSERT_TRUE(admin.create_topic({"b", 2}));
  auto principal = admin.create_principal("relay");
  ASSERT_TRUE(principal);
  ASSERT_TRUE(admin.grant("relay", "produce", "topic:a"));
  temp_file relay_token("txmq-topic-refusal-relay", principal.value().token());

  // Shard of kb: two rows for 'b', which the relay may not produce to; shard of ka: 'a'.
  insert(conn.get(), "b", kb, {"b1", "b2"});
  insert(conn.get(), "a", ka, {"a1"});
  collector c(b.address(), {"a", "b"}, k_admin_token);
  relay_process relay({"--pg", db, "--broker", b.address(), "--relay-id", "acl", "--token-file",
                       relay_token.path.string(), "--poll-interval", "200ms", "--publish-timeout", "3s",
                       "--backoff-max", "200ms"});
  relay.start();
  ASSERT_TRUE(eventually([&] { return relay_metric(relay, "txmq_relay_shards_stopped") == 1; }, 30s)) << relay.log();
  ASSERT_TRUE(eventually([&] { return c.has("a1"); }, 20s)) << relay.log();
  EXPECT_NE(relay.log().find("NOT_AUTHORIZED"), std::string::npos) << relay.log();
  EXPECT_NE(relay.log().find("topic 'b'"), std::string::npos) << relay.log();
  EXPECT_TRUE(eventually([&] { return scalar(db, "SELECT last_error FROM txmq_relay").find("NOT_AUTHORIZED") != std::string::npos; },
                         10s));

  // The other shard flows while the 'b' shard is refused poll after poll; the broker is up.
  insert(conn.get(), "a", ka, {"a2"});
  ASSERT_TRUE(eventually([&] { return c.has("a2"); }, 20s)) << relay.log();
  EXPECT_FALSE(c.has("b1"));
  // a2 is deleted just after its ack, which the consumer may see first.
  EXPECT_TRUE(eventually([&] { return scalar(db, "SELECT count(*) FROM txmq_outbox") == "2"; }, 10s));
  EXPECT_EQ(relay_metric(relay, "txmq_relay_publish_failures_total"), 0) << "the broker is fine; one topic is refused";
  EXPECT_EQ(relay_metric(relay, "txmq_relay_broker_up"), 1) << relay.log();
  EXPECT_EQ(relay_metric(relay, "txmq_relay_shards_stopped"), 1);

  // The operator grants produce on 'b': the shard goes on by itself, in order.
  ASSERT_TRUE(admin.grant("relay", "produce", "topic:b"));
  ASSERT_TRUE(eventually([&] { return c.of("b").size() == 2; }, 30s)) << relay.log();
  EXPECT_EQ(c.of("b"), (std::vector<std::string>{"b1", "b2"}));
  EXPECT_TRUE(eventually([&] { return scalar(db, "SELECT count(*) FROM txmq_outbox") == "0"; }, 20s));
  EXPECT_TRUE(eventually([&] { return relay_metric(relay, "txmq_relay_shards_stopped") == 0; }, 20s)) << relay.log();
  EXPECT_NE(relay.log().find("goes on"), std::string::npos) << relay.log();
  EXPECT_EQ(relay_metric(relay, "txmq_relay_publish_failures_total"), 0) << relay.log();
  EXPECT_EQ(relay.stop(), 0) << relay.log();
}

TEST(relay_topic_refusal, a_missing_topic_with_auto_create_off_stops_only_its_shard_until_created) {
  const std::string db = shared_pg_cluster().create_database("relay_topic_missing");
  two_shard_outbox outbox;
  ASSERT_NO_FATAL_FAILURE(make_outbox(db, outbox));
  auto& [conn, km, ka] = outbox;
  broker_process b({"--auto-create-topics", "false"});
  b.start();
  client::admin admin = admin_of(b);
  ASSERT_TRUE(admin.create_topic({"a", 2}));

  insert(conn.get(), "m", km, {"m1", "m2"});
  insert(conn.get(), "a", ka, {"a1"});
  relay_process relay({"--pg", db, "--broker", b.address(), "--relay-id", "missing", "--poll-interval", "200ms",
                       "--publish-timeout", "3s", "--backoff-max", "200ms"});
  relay.start();
  ASSERT_TRUE(eventually([&] { return relay_metric(relay, "txmq_relay_shards_stopped") == 1; }, 30s)) << relay.log();
  EXPECT_NE(relay.log().find("UNKNOWN_TOPIC"), std::string::npos) << relay.log();
  EXPECT_NE(relay.log().find("topic 'm'"), std::string::npos) << relay.log();
  ASSERT_TRUE(eventually([&] { return scalar(db, "SELECT count(*) FROM txmq_outbox") == "2"; }, 20s)) << relay.log();
  insert(conn.get(), "a", ka, {"a2"});
  ASSERT_TRUE(eventually([&] { return scalar(db, "SELECT count(*) FROM txmq_outbox") == "2"; }, 20s)) << relay.log();
  EXPECT_EQ(relay_metric(relay, "txmq_relay_publish_failures_total"), 0) << relay.log();
  EXPECT_EQ(relay_metric(relay, "txmq_relay_broker_up"), 1) << relay.log();

  // The topic is created: the shard goes on, in order.
  ASSERT_TRUE(admin.create_topic({"m", 2}));
  collector c(b.address(), {"a", "m"}, "");
  ASSERT_TRUE(eventually([&] { return c.of("m").size() == 2; }, 30s)) << relay.log();
  EXPECT_EQ(c.of("m"), (std::vector<std::string>{"m1", "m2"}));
  EXPECT_TRUE(eventually([&] { return c.of("a").size() == 2; }, 20s));
  EXPECT_TRUE(eventually([&] { return relay_metric(relay, "txmq_relay_shards_stopped") == 0; }, 20s)) << relay.log();
  EXPECT_EQ(relay_metric(relay, "txmq_relay_publish_failures_total"), 0) << relay.log();
  EXPECT_EQ(relay.stop(), 0) << relay.log();
}

TEST(relay_topic_refusal, a_topic_name_the_broker_does_not_take_stops_only_its_shard_until_the_row_goes) {
  // A control character in a topic name: PostgreSQL stores it, the broker refuses the request
  // (INVALID_ARGUMENT) before storing anything. Only an operator can mend such a row (update or
  // delete it); meanwhile the other shards flow.
  const std::string db = shared_pg_cluster().create_database("relay_topic_invalid");
  two_shard_outbox outbox;
  ASSERT_NO_FATAL_FAILURE(make_outbox(db, outbox));
  auto& [conn, kx, ka] = outbox;
  broker_process b;
  b.start();
  client::admin admin = admin_of(b);
  ASSERT_TRUE(admin.create_topic({"x", 2}));  // where the mended rows go; the consumer reads it from the start
  // Two rows of one key for that topic: the second must not be stored before the first.
  for (const char* body : {"x1", "x2"}) {
    ASSERT_TRUE(pg::exec(conn.get(), "INSERT INTO txmq_outbox (topic, key, headers, payload) VALUES "
                                     "(E'bad\\ttopic', '" + kx + "', '{}', convert_to('" + body + "', 'UTF8'))"));
  }
  insert(conn.get(), "a", ka, {"a1"});
  collector c(b.address(), {"a", "x"}, "");
  relay_process relay({"--pg", db, "--broker", b.address(), "--relay-id", "invalid", "--poll-interval", "200ms",
                       "--publish-timeout", "3s", "--backoff-max", "200ms"});
  relay.start();
  ASSERT_TRUE(eventually([&] { return relay_metric(relay, "txmq_relay_shards_stopped") == 1; }, 30s)) << relay.log();
  EXPECT_NE(relay.log().find("INVALID_ARGUMENT"), std::string::npos) << relay.log();
  ASSERT_TRUE(eventually([&] { return c.has("a1"); }, 20s)) << relay.log();
  insert(conn.get(), "a", ka, {"a2"});
  ASSERT_TRUE(eventually([&] { return c.has("a2"); }, 20s)) << relay.log();
  // a2 is deleted just after its ack, which the consumer may see first.
  EXPECT_TRUE(eventually([&] { return scalar(db, "SELECT count(*) FROM txmq_outbox") == "2"; }, 10s)) << relay.log();
  EXPECT_EQ(relay_metric(relay, "txmq_relay_publish_failures_total"), 0) << relay.log();
  EXPECT_EQ(relay_metric(relay, "txmq_relay_broker_up"), 1) << relay.log();

  // The operator mends the rows' topic: the shard goes on, in order.
  ASSERT_TRUE(pg::exec(conn.get(), "UPDATE txmq_outbox SET topic = 'x' WHERE topic <> 'a'"));
  ASSERT_TRUE(eventually([&] { return c.of("x").size() == 2; }, 30s)) << relay.log();
  EXPECT_EQ(c.of("x"), (std::vector<std::string>{"x1", "x2"}));
  EXPECT_TRUE(eventually([&] { return scalar(db, "SELECT count(*) FROM txmq_outbox") == "0"; }, 20s));
  EXPECT_TRUE(eventually([&] { return relay_metric(relay, "txmq_relay_shards_stopped") == 0; }, 20s)) << relay.log();
  EXPECT_EQ(relay.stop(), 0) << relay.log();
}

}  // namespace
}  // namespace txmq::test
