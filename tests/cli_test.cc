// The txmq CLI (cli/README.md) against the real broker: the real `txmq` binary is run as a child
// process with its stdin fed and its stdout, stderr and exit status captured.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "broker_process.h"
#include "cli_runner.h"

extern char** environ;

namespace txmq::test {
namespace {

using namespace std::chrono_literals;
namespace json = boost::json;


std::string str(const json::object& o, const char* key) { return std::string(o.at(key).as_string()); }
std::uint64_t num(const json::object& o, const char* key) { return o.at(key).to_number<std::uint64_t>(); }

TEST(cli_test, topic_create_list_describe) {
  broker_process b;
  b.start();
  auto created = txmq(b, {"topic", "create", "orders", "--partitions", "3"});
  ASSERT_EQ(created.status, 0) << created;
  EXPECT_TRUE(created.out.starts_with("TOPIC")) << created;
  ASSERT_EQ(created.rows().size(), 1u) << created;
  EXPECT_EQ(fields(created.rows()[0])[0], "orders");
  EXPECT_EQ(fields(created.rows()[0])[1], "3");

  ASSERT_EQ(txmq(b, {"topic", "create", "audit"}).status, 0);
  auto list = txmq(b, {"topic", "list"});
  ASSERT_EQ(list.status, 0) << list;
  ASSERT_EQ(list.rows().size(), 2u) << list;
  EXPECT_EQ(fields(list.rows()[0])[0], "audit");
  EXPECT_EQ(fields(list.rows()[0])[1], "4");  // the broker's default
  EXPECT_EQ(fields(list.rows()[1])[0], "orders");

  ASSERT_EQ(txmq(b, {"produce", "orders", "--key", "a", "x"}).status, 0);
  auto describe = txmq(b, {"topic", "describe", "orders"});
  ASSERT_EQ(describe.status, 0) << describe;
  EXPECT_NE(describe.out.find("PARTITION  START  END"), std::string::npos) << describe;
  auto d = txmq(b, {"--json", "topic", "describe", "orders"}).objects();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(str(d[0], "topic"), "orders");
  EXPECT_EQ(num(d[0], "partitions"), 3u);
  EXPECT_EQ(num(d[0], "messages"), 1u);
  ASSERT_EQ(d[0].at("partition_info").as_array().size(), 3u);

  // The broker takes a repeated create with the same spec as done; another spec is refused.
  EXPECT_EQ(txmq(b, {"topic", "create", "orders", "--partitions", "3"}).status, 0);
  auto again = txmq(b, {"topic", "create", "orders", "--partitions", "5"});
  EXPECT_EQ(again.status, 1) << again;
  EXPECT_TRUE(again.err.starts_with("txmq: create topic 'orders': TOPIC_EXISTS")) << again;
  EXPECT_EQ(again.out, "");
}

// `topic alter` on a single broker (docs/cluster.md "Topic settings"): the retention it stores
// per topic changes (0 = the broker's own again) and survives a restart; min-insync is refused
// (one copy, no replicas), as is a topic that does not exist.
TEST(cli_test, topic_alter_changes_retention_on_a_single_broker) {
  broker_process b({"--retention", "2h"});
  b.start();
  ASSERT_EQ(txmq(b, {"topic", "create", "orders", "--partitions", "1"}).status, 0);
  auto altered = txmq(b, {"--json", "topic", "alter", "orders", "--retention-bytes", "4096", "--retention-ms", "60000"});
  ASSERT_EQ(altered.status, 0) << altered;
  ASSERT_EQ(altered.objects().size(), 1u) << altered;
  EXPECT_EQ(num(altered.objects()[0], "retention_bytes"), 4096u);
  EXPECT_EQ(num(altered.objects()[0], "retention_ms"), 60000u);
  auto half = txmq(b, {"--json", "topic", "alter", "orders", "--retention-ms", "0"});  // bytes kept
  ASSERT_EQ(half.status, 0) << half;
  EXPECT_EQ(num(half.objects().at(0), "retention_ms"), 7'200'000u);  // the broker's --retention
  EXPECT_EQ(num(half.objects().at(0), "retention_bytes"), 4096u);
  b.kill();
  b.start();
  auto d = txmq(b, {"--json", "topic", "describe", "orders"});
  ASSERT_EQ(d.status, 0) << d;
  EXPECT_EQ(num(d.objects().at(0), "retention_bytes"), 4096u) << d;
  EXPECT_EQ(num(d.objects().at(0), "retention_ms"), 7'200'000u) << d;

  auto insync = txmq(b, {"topic", "alter", "orders", "--min-insync", "2"});
  EXPECT_EQ(insync.status, 1) << insync;
  EXPECT_NE(insync.err.find("single node"), std::string::npos) << insync;
  auto unknown = txmq(b, {"topic", "alter", "nosuch", "--retention-bytes", "1"});
  EXPECT_EQ(unknown.status, 1) << unknown;
  EXPECT_NE(unknown.err.find("UNKNOWN_TOPIC"), std::string::npos) << unknown;
  EXPECT_EQ(txmq(b, {"topic", "alter", "orders"}).status, 2);
}

TEST(cli_test, produce_stdin_lines_then_consume_them_once) {
  broker_process b;
  b.start();
  ASSERT_EQ(txmq(b, {"topic", "create", "orders", "--partitions", "1"}).status, 0);
  auto produced = txmq(b, {"produce", "orders"}, "first\nsecond\nthird\n");
  ASSERT_EQ(produced.status, 0) << produced;
  EXPECT_EQ(fields(produced.out.substr(0, produced.out.find('\n'))),
            (std::vector<std::string>{"ID", "PARTITION", "OFFSET", "STATUS"}));
  ASSERT_EQ(produced.rows().size(), 3u) << produced;
  std::vector<std::string> ids;
  std::set<std::string> offsets;
  for (const auto& row : produced.rows()) {
    const auto f = fields(row);
    ASSERT_EQ(f.size(), 4u) << row;
    EXPECT_EQ(f[0].size(), 36u) << row;
    ids.push_back(f[0]);
    offsets.insert(f[2]);
    EXPECT_EQ(f[3], "stored");
  }
  EXPECT_EQ(offsets, (std::set<std::string>{"0", "1", "2"}));

  const auto start = std::chrono::steady_clock::now();
  auto consumed = txmq(b, {"consume", "orders", "--group", "billing", "--wait", "500"});
  EXPECT_GE(std::chrono::steady_clock::now() - start, 500ms);  // it waited for more, then left
  ASSERT_EQ(consumed.status, 0) << consumed;
  EXPECT_EQ(fields(consumed.out.substr(0, consumed.out.find('\n'))),
            (std::vector<std::string>{"ID", "KEY", "HEADERS", "PARTITION", "OFFSET", "ATTEMPT", "BODY"}));
  ASSERT_EQ(consumed.rows().size(), 3u) << consumed;
  const std::vector<std::string> bodies{"first", "second", "third"};
  for (std::size_t i = 0; i < 3; ++i) {
    const auto f = fields(consumed.rows()[i]);
    ASSERT_EQ(f.size(), 7u) << consumed.rows()[i];
    EXPECT_EQ(f[0], ids[i]);
    EXPECT_EQ(f[1], "-");  // no key
    EXPECT_EQ(f[2], "-");  // no headers
    EXPECT_EQ(f[3], "0");
    EXPECT_EQ(f[4], std::to_string(i));
    EXPECT_EQ(f[5], "1");  // first attempt
    EXPECT_EQ(f[6], bodies[i]);
  }

  // Acked: the group has nothing more.
  auto again = txmq(b, {"consume", "orders", "--group", "billing", "--wait", "300"});
  EXPECT_EQ(again.status, 0) << again;
  EXPECT_EQ(again.out, "");

  auto group = txmq(b, {"group", "describe", "billing"});
  ASSERT_EQ(group.status, 0) << group;
  ASSERT_EQ(group.rows().size(), 1u) << group;
  const auto f = fields(group.rows()[0]);  // TOPIC PARTITION ACKED DISPATCHED END LAG ...
  EXPECT_EQ(f[0], "orders");
  EXPECT_EQ(f[2], "3");
  EXPECT_EQ(f[4], "3");
  EXPECT_EQ(f[5], "0");
  auto gj = txmq(b, {"group", "describe", "billing", "--json"}).objects();
  ASSERT_EQ(gj.size(), 1u);
  EXPECT_EQ(num(gj[0], "lag"), 0u);
  EXPECT_EQ(num(gj[0].at("partitions").as_array().at(0).as_object(), "lag"), 0u);

  auto groups = txmq(b, {"group", "list"});
  ASSERT_EQ(groups.status, 0) << groups;
  ASSERT_EQ(groups.rows().size(), 1u) << groups;
  EXPECT_EQ(fields(groups.rows()[0])[0], "billing");
}

TEST(cli_test, consume_stops_after_max) {
  broker_process b;
  b.start();
  ASSERT_EQ(txmq(b, {"produce", "t"}, "1\n2\n3\n4\n5\n").status, 0);
  // A long --wait that is never needed: --max ends it.
  const auto start = std::chrono::steady_clock::now();
  auto two = txmq(b, {"consume", "t", "--group", "g", "--max", "2", "--wait", "30000"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  ASSERT_EQ(two.status, 0) << two;
  EXPECT_EQ(two.rows().size(), 2u) << two;
  auto rest = txmq(b, {"consume", "t", "--group", "g", "--wait", "300"});
  EXPECT_EQ(rest.rows().size(), 3u) << rest;
}

TEST(cli_test, produce_with_the_same_id_twice_reports_a_duplicate) {
  broker_process b;
  b.start();
  const std::string id = "01890a5d-ac96-774b-bcce-b302099a8057";
  auto first = txmq(b, {"produce", "orders", "--id", id, "--json", "payload"});
  ASSERT_EQ(first.status, 0) << first;
  auto second = txmq(b, {"produce", "orders", "--id", id, "--json", "payload"});
  ASSERT_EQ(second.status, 0) << second;
  auto a = first.objects();
  auto d = second.objects();
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(str(a[0], "id"), id);
  EXPECT_EQ(str(d[0], "id"), id);
  EXPECT_FALSE(a[0].at("duplicate").as_bool());
  EXPECT_TRUE(d[0].at("duplicate").as_bool());
  EXPECT_EQ(num(d[0], "partition"), num(a[0], "partition"));
  EXPECT_EQ(num(d[0], "offset"), num(a[0], "offset"));

  // Human output says so too; upper-case ids are accepted, printed canonical.
  auto third = txmq(b, {"produce", "orders", "--id", "01890A5D-AC96-774B-BCCE-B302099A8057"}, "payload\n");
  ASSERT_EQ(third.status, 0) << third;
  ASSERT_EQ(third.rows().size(), 1u) << third;
  const auto f = fields(third.rows()[0]);
  EXPECT_EQ(f[0], id);
  EXPECT_EQ(f[1], std::to_string(num(a[0], "partition")));
  EXPECT_EQ(f[2], std::to_string(num(a[0], "offset")));
  EXPECT_EQ(f[3], "duplicate");

  auto topic = txmq(b, {"topic", "describe", "orders", "--json"}).objects();
  ASSERT_EQ(topic.size(), 1u);
  EXPECT_EQ(num(topic[0], "messages"), 1u);  // stored once
}

TEST(cli_test, json_lines_carry_every_field) {
  broker_process b;
  b.start();
  auto produced = txmq(b, {"--json", "produce", "events", "--key", "user-7", "--header", "trace=abc", "--header",
                           "kind=signup=new", "hello world"});
  ASSERT_EQ(produced.status, 0) << produced;
  auto p = produced.objects();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(str(p[0], "topic"), "events");
  // A body that is not UTF-8 comes back as body_base64.
  ASSERT_EQ(txmq(b, {"produce", "events", "--key", "user-7", std::string("\xff\xfe", 2)}).status, 0);

  auto consumed = txmq(b, {"consume", "events", "--group", "g", "--wait", "300", "--json"});
  ASSERT_EQ(consumed.status, 0) << consumed;
  auto c = consumed.objects();
  ASSERT_EQ(c.size(), 2u) << consumed;
  EXPECT_EQ(str(c[0], "id"), str(p[0], "id"));
  EXPECT_EQ(str(c[0], "topic"), "events");
  EXPECT_EQ(str(c[0], "key"), "user-7");
  const auto& headers = c[0].at("headers").as_object();
  EXPECT_EQ(headers.size(), 2u);
  EXPECT_EQ(str(headers, "trace"), "abc");
  EXPECT_EQ(str(headers, "kind"), "signup=new");
  EXPECT_EQ(num(c[0], "partition"), num(p[0], "partition"));
  EXPECT_EQ(num(c[0], "offset"), num(p[0], "offset"));
  EXPECT_EQ(num(c[0], "attempt"), 1u);
  EXPECT_EQ(str(c[0], "body"), "hello world");
  EXPECT_FALSE(c[0].contains("body_base64"));
  EXPECT_EQ(str(c[1], "body_base64"), "//4=");
  EXPECT_FALSE(c[1].contains("body"));

  auto topics = txmq(b, {"topic", "list", "--json"}).objects();
  ASSERT_EQ(topics.size(), 1u);
  EXPECT_EQ(str(topics[0], "topic"), "events");
  EXPECT_EQ(num(topics[0], "messages"), 2u);
  auto groups = txmq(b, {"group", "list", "--json"}).objects();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(str(groups[0], "group"), "g");
  EXPECT_EQ(num(groups[0], "lag"), 0u);
}

TEST(cli_test, no_ack_leaves_the_message_for_redelivery) {
  // The CLI acks in a round trip after the fetch: 1 s leaves a loaded machine room for it.
  broker_process b({"--ack-deadline", "1s", "--retry-schedule", "50ms"});
  b.start();
  auto produced = txmq(b, {"produce", "jobs", "--json", "work"});
  ASSERT_EQ(produced.status, 0) << produced;
  const auto id = str(produced.objects().at(0), "id");

  auto first = txmq(b, {"consume", "jobs", "--group", "workers", "--max", "1", "--no-ack", "--json"});
  ASSERT_EQ(first.status, 0) << first;
  auto f = first.objects();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(str(f[0], "id"), id);
  EXPECT_EQ(num(f[0], "attempt"), 1u);

  // The long poll answers once the deadline passed and the retry is due.
  auto second = txmq(b, {"consume", "jobs", "--group", "workers", "--max", "1", "--wait", "10000", "--json"});
  ASSERT_EQ(second.status, 0) << second;
  auto s = second.objects();
  ASSERT_EQ(s.size(), 1u) << second;
  EXPECT_EQ(str(s[0], "id"), id);
  EXPECT_EQ(num(s[0], "attempt"), 2u);

  // That one was acked: nothing comes back after the deadline.
  auto third = txmq(b, {"consume", "jobs", "--group", "workers", "--wait", "1500"});
  EXPECT_EQ(third.status, 0) << third;
  EXPECT_EQ(third.out, "");
}

TEST(cli_test, dead_letters_are_listed_and_redriven) {
  // The redriven message's ack, a round trip after its fetch, must beat the deadline (max_attempts 1).
  broker_process b({"--max-attempts", "1", "--retry-schedule", "20ms", "--ack-deadline", "1s"});
  b.start();
  auto produced = txmq(b, {"produce", "payments", "--key", "p-1", "--json", "poison"});
  ASSERT_EQ(produced.status, 0) << produced;
  const auto id = str(produced.objects().at(0), "id");
  auto got = txmq(b, {"consume", "payments", "--group", "ledger", "--max", "1", "--no-ack"});
  ASSERT_EQ(got.status, 0) << got;
  ASSERT_EQ(got.rows().size(), 1u) << got;

  // The ack deadline passes and, with max_attempts 1, the message is dead.
  std::vector<json::object> dead;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto list = txmq(b, {"dlq", "list", "ledger", "--json"});
    ASSERT_EQ(list.status, 0) << list;
    dead = list.objects();
    if (!dead.empty()) break;
  }
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(str(dead[0], "id"), id);
  EXPECT_EQ(str(dead[0], "topic"), "payments");
  EXPECT_EQ(str(dead[0], "key"), "p-1");
  EXPECT_EQ(str(dead[0], "body"), "poison");
  EXPECT_EQ(num(dead[0], "attempts"), 1u);

  auto human = txmq(b, {"dlq", "list", "ledger"});
  ASSERT_EQ(human.status, 0) << human;
  ASSERT_EQ(human.rows().size(), 1u) << human;
  EXPECT_EQ(fields(human.rows()[0])[0], id);
  auto group = txmq(b, {"group", "describe", "ledger", "--json"}).objects();
  ASSERT_EQ(group.size(), 1u);
  EXPECT_EQ(num(group[0], "dead_letters"), 1u);

  auto redrive = txmq(b, {"dlq", "redrive", "ledger"});
  ASSERT_EQ(redrive.status, 0) << redrive;
  ASSERT_EQ(redrive.rows().size(), 1u) << redrive;
  EXPECT_EQ(fields(redrive.rows()[0]), (std::vector<std::string>{"ledger", "1"}));

  auto back = txmq(b, {"consume", "payments", "--group", "ledger", "--max", "1", "--wait", "10000", "--json"});
  ASSERT_EQ(back.status, 0) << back;
  auto m = back.objects();
  ASSERT_EQ(m.size(), 1u) << back;
  EXPECT_EQ(str(m[0], "id"), id);
  EXPECT_EQ(str(m[0], "body"), "poison");
  auto empty = txmq(b, {"dlq", "list", "ledger"});
  EXPECT_EQ(empty.status, 0) << empty;
  EXPECT_TRUE(empty.rows().empty()) << empty;
}

TEST(cli_test, group_create_from_latest_skips_what_is_there) {
  broker_process b;
  b.start();
  ASSERT_EQ(txmq(b, {"produce", "t", "old"}).status, 0);
  auto created = txmq(b, {"group", "create", "late", "--topic", "t", "--from", "latest"});
  ASSERT_EQ(created.status, 0) << created;
  ASSERT_EQ(created.rows().size(), 1u) << created;
  EXPECT_EQ(fields(created.rows()[0])[0], "late");
  ASSERT_EQ(txmq(b, {"group", "create", "early", "--topic", "t"}).status, 0);
  ASSERT_EQ(txmq(b, {"produce", "t", "new"}).status, 0);
  auto late = txmq(b, {"consume", "t", "--group", "late", "--wait", "300", "--json"}).objects();
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(str(late[0], "body"), "new");
  EXPECT_EQ(txmq(b, {"consume", "t", "--group", "early", "--wait", "300", "--json"}).objects().size(), 2u);
}

TEST(cli_test, broker_errors_exit_1_with_the_brokers_message) {
  broker_process b;
  b.start();
  auto topic = txmq(b, {"topic", "describe", "nope"});
  EXPECT_EQ(topic.status, 1) << topic;
  EXPECT_EQ(topic.out, "");
  EXPECT_TRUE(topic.err.starts_with("txmq: describe topic 'nope': UNKNOWN_TOPIC")) << topic;
  EXPECT_EQ(std::count(topic.err.begin(), topic.err.end(), '\n'), 1) << topic;  // one line

  auto group = txmq(b, {"group", "describe", "nobody"});
  EXPECT_EQ(group.status, 1) << group;
  EXPECT_TRUE(group.err.starts_with("txmq: describe group 'nobody': UNKNOWN_GROUP")) << group;
}

TEST(cli_test, an_unreachable_broker_is_named) {
  const std::string address = "127.0.0.1:" + std::to_string(free_port());
  auto r = run_txmq({"--broker", address, "--connect-timeout", "500", "topic", "list"});
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(r.err.starts_with("txmq: cannot reach the broker at " + address)) << r;
  EXPECT_NE(r.err.find("Connection refused"), std::string::npos) << r;

  auto produce = run_txmq({"--broker", address, "--connect-timeout", "500", "produce", "t"}, "a\nb\n");
  EXPECT_EQ(produce.status, 1) << produce;
  EXPECT_NE(produce.err.find(address), std::string::npos) << produce;
}

TEST(cli_test, usage_errors_exit_2) {
  const std::vector<std::vector<std::string>> bad{
      {}, {"nonsense"}, {"topic", "create"}, {"consume", "t"}, {"produce", "t", "--id", "12345"},
      {"topic", "list", "--no-such-flag"}, {"--broker", "localhost", "topic", "list"}};
  for (const auto& args : bad) {
    auto r = run_txmq(args);
    EXPECT_EQ(r.status, 2) << r;
    EXPECT_NE(r.err.find("usage: txmq"), std::string::npos) << r;
  }
  auto help = run_txmq({"--help"});
  EXPECT_EQ(help.status, 0) << help;
  EXPECT_NE(help.out.find("consume TOPIC --group G"), std::string::npos) << help;
  auto command_help = run_txmq({"dlq", "list", "--help"});
  EXPECT_EQ(command_help.status, 0) << command_help;
  EXPECT_TRUE(command_help.out.starts_with("usage: txmq dlq list G")) << command_help;
}

TEST(cli_test, txmq_broker_variable_is_honoured) {
  broker_process b;
  b.start();
  ASSERT_EQ(txmq(b, {"topic", "create", "via-flag"}).status, 0);
  auto from_env = run_txmq({"topic", "list"}, "", b.address());
  ASSERT_EQ(from_env.status, 0) << from_env;
  ASSERT_EQ(from_env.rows().size(), 1u) << from_env;
  EXPECT_EQ(fields(from_env.rows()[0])[0], "via-flag");

  // --broker wins over the variable.
  const std::string nowhere = "127.0.0.1:" + std::to_string(free_port());
  auto flag_wins = run_txmq({"--broker", b.address(), "topic", "list"}, "", nowhere);
  EXPECT_EQ(flag_wins.status, 0) << flag_wins;
  auto env_used = run_txmq({"--connect-timeout", "300", "topic", "list"}, "", nowhere);
  EXPECT_EQ(env_used.status, 1) << env_used;
  EXPECT_NE(env_used.err.find(nowhere), std::string::npos) << env_used;
}

}  // namespace
}  // namespace txmq::test
