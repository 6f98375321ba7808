// Operators see the whole cluster (issue 14, docs/cluster.md "The admin HTTP API and the
// console in a cluster"): etcd and three txmq-broker processes on free loopback ports, stopped
// by PID. A replicas-3 topic of 3 partitions (leaders spread) and a replicas-1 topic of 3
// partitions (each partition's only copy on its leader), plus a replicas-1 topic of one
// partition; transactions prepared on both topics' partitions and left PREPARED; a group whose
// nacked messages become dead letters on the replicas-3 topic. Through one node:
//  - `txmq tx list` lists every transaction (those homed on the other nodes' replicas-1
//    partitions included), `txmq topic list` every topic with the cluster's message counts;
//  - the admin HTTP API's dead letters, group, transactions, topics and cluster answers hold
//    everything and say `cluster.complete`; a commit through HTTP reaches the home leader;
//  - a leader SIGKILLed: every answer polled meanwhile is either complete and whole or names
//    what it misses; once new leaders are in, the only missing partitions are the dead node's
//    replicas-1 ones (named, "no leader"); the node restarted, answers are complete again.
// Label `cluster`.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <set>

#include <boost/json.hpp>

#include "broker_process.h"
#include "cli_runner.h"
#include "cluster_brokers.h"
#include "etcd_process.h"
#include "eventually.h"
#include "fault_support.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/producer.h"
#include "txmq/protocol/message_id.h"
#include "txmq/protocol/partitioner.h"

namespace txmq::test {
namespace {
using std::chrono::milliseconds;
using namespace std::chrono_literals;

constexpr const char* k_shared = "views";  // replicas 3
constexpr const char* k_spread = "spread";  // replicas 1, 3 partitions
constexpr const char* k_solo = "solo";      // replicas 1, 1 partition
constexpr const char* k_group = "viewers";
constexpr int k_partitions = 3;
constexpr int k_messages = 48;

bool poison(const std::string& body) { return body.rfind("poison", 0) == 0; }

struct http_answer {
  unsigned status = 0;
  json::value body;
};

// One HTTP/1.0 request to 127.0.0.1:port; the status and the JSON body (null when not JSON).
http_answer http_call(std::uint16_t port, const std::string& method, const std::string& path) {
  http_answer out;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  std::string raw;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string body = method == "POST" ? "{}" : "";
    const std::string req = method + " " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                            "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      const auto until = std::chrono::steady_clock::now() + 30s;
      char buf[8192];
      while (std::chrono::steady_clock::now() < until) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 1000) < 0) break;
        if (p.revents == 0) continue;
        const auto n = ::read(fd, buf, sizeof buf);
        if (n <= 0) break;
        raw.append(buf, static_cast<std::size_t>(n));
      }
    }
  }
  ::close(fd);
  if (raw.size() > 12) out.status = static_cast<unsigned>(std::atoi(raw.substr(9, 3).c_str()));
  const auto head_end = raw.find("\r\n\r\n");
  if (head_end != std::string::npos) {
    boost::system::error_code ec;
    auto v = json::parse(raw.substr(head_end + 4), ec);
    if (!ec) out.body = std::move(v);
  }
  return out;
}

std::string text_of(const json::value& v) { return json::serialize(v); }

class cluster_views_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
    cluster_ = std::make_unique<cluster_brokers>();
    cluster_->start({"--node-lease-ttl", lease_ttl(), "--replica-lag-max", "4s", "--replication-timeout", "10s",
                     "--max-attempts", "2", "--retry-schedule", "100ms", "--ack-deadline", "20s", "--tx-timeout", "1h"});
  }
  virtual std::string lease_ttl() const { return "3s"; }

  std::string logs() const { return cluster_->logs(); }
  bool whole(const std::string& topic, int partitions, std::size_t isr) {
    for (int p = 0; p < partitions; ++p) {
      auto v = cluster_->view(topic, p);
      if (!v || v->leader <= 0 || v->isr.size() != isr) return false;
    }
    return true;
  }
  int leader_of(const std::string& topic, int p) {
    auto v = cluster_->view(topic, p);
    return v ? static_cast<int>(v->leader) : -1;
  }
  http_answer get(int node, const std::string& path) { return http_call(cluster_->broker(node).http_port(), "GET", path); }
  // A key of `topic` (with `partitions`) that lands in partition p.
  static std::string key_for(int p, const std::string& salt) {
    for (int i = 0;; ++i) {
      const std::string k = salt + std::to_string(i);
      if (static_cast<int>(protocol::partition_for_key(k, k_partitions)) == p) return k;
    }
  }
  // Prepares a transaction with `key` on `topic` through its home leader; its txid text.
  std::string prepare(const std::string& topic, int partitions, const std::string& key) {
    const auto home = static_cast<int>(protocol::partition_for_key(key, static_cast<std::uint32_t>(partitions)));
    cli_result p;
    EXPECT_TRUE(eventually([&] {
      p = txmq(cluster_->broker(leader_of(topic, home)), {"--json", "tx", "prepare", topic, "body-" + key, "--group", "pg",
                                                          "--key", key});
      return p.status == 0;
    }, 15s)) << p << logs();
    return p.status == 0 ? std::string(p.objects().at(0).at("txid").as_string()) : std::string();
  }
  static std::set<std::string> ids_of(const json::value& v, const char* array, const char* field, bool nested = false) {
    std::set<std::string> out;
    if (!v.is_object() || !v.as_object().contains(array)) return out;
    for (const auto& e : v.at(array).as_array()) {
      const auto& o = nested ? e.at("message") : e;
      out.insert(std::string(o.at(field).as_string()));
    }
    return out;
  }
  static bool complete(const json::value& v) {
    return v.is_object() && v.as_object().contains("cluster") && v.at("cluster").at("complete").as_bool();
  }

  std::unique_ptr<cluster_brokers> cluster_;
};

// A node paused (SIGSTOP) but still registered: a lease long enough that the Metadata keeps
// naming it as the leader of its partitions while the view asks it.
class cluster_views_pause_test : public cluster_views_test {
 protected:
  std::string lease_ttl() const override { return "60s"; }
};

// The nodes of a view are asked at once under one deadline (5 s), over kept connections
// (docs/cluster.md "The admin HTTP API and the console in a cluster"):
//  - five GET /v1/topics through node A leave exactly one view connection from A on each other
//    leader (before: a connection per node per request, closed after it: none left);
//  - node B SIGSTOPped (not killed: its TCP port still accepts, nothing answers): GET
//    /v1/topics and GET /v1/transactions through A answer 200 within the deadline plus a
//    margin, complete = false, B named as not answering and its partitions in `missing`;
//  - B continued: complete again.
// Before: the nodes were asked one after another, each bounded by 10 s.
TEST_F(cluster_views_pause_test, a_paused_node_is_named_missing_within_the_deadline_and_connections_are_kept) {
  std::string why;
  ASSERT_TRUE(cluster_->create_topic(k_spread, k_partitions, 1, why)) << why;
  std::set<int> spread_leaders;
  for (int p = 0; p < k_partitions; ++p) spread_leaders.insert(leader_of(k_spread, p));
  ASSERT_GT(spread_leaders.size(), 1u) << "the replicas-1 topic's partitions all on one node";
  // A: the node asked; B: another node leading a partition of the topic.
  const int asked = 1;
  int paused = 0;
  std::set<std::pair<std::string, int>> paused_parts;
  for (int p = 0; p < k_partitions; ++p) {
    const int l = leader_of(k_spread, p);
    if (l != asked && (paused == 0 || l == paused)) {
      paused = l;
      paused_parts.insert({k_spread, p});
    }
  }
  ASSERT_GT(paused, 0) << "node 1 leads every partition";

  for (int i = 0; i < 5; ++i) {
    auto tp = get(asked, "/v1/topics");
    ASSERT_EQ(tp.status, 200u) << text_of(tp.body);
    EXPECT_TRUE(complete(tp.body)) << text_of(tp.body);
  }
  for (int n : spread_leaders) {
    if (n == asked) continue;  // the leaders are asked; a node leading nothing is not
    auto conns = get(n, "/v1/connections");
    ASSERT_EQ(conns.status, 200u) << text_of(conns.body);
    int views = 0;
    for (const auto& c : conns.body.at("connections").as_array()) {
      if (c.at("client_id").as_string() == "txmq-http-view") ++views;
    }
    EXPECT_EQ(views, 1) << "node " << n << ": view connections from node " << asked << " after five GETs: "
                        << text_of(conns.body);
  }

  const auto missing_of = [](const json::value& v) {
    std::set<std::pair<std::string, int>> out;
    for (const auto& m : v.at("cluster").at("missing").as_array()) {
      out.insert({std::string(m.at("topic").as_string()), static_cast<int>(m.at("partition").to_number<std::int64_t>())});
    }
    return out;
  };
  const auto not_answering = [](const json::value& v) {
    std::set<std::int64_t> out;
    for (const auto& n : v.at("cluster").at("nodes").as_array()) {
      if (!n.at("answered").as_bool()) out.insert(n.at("node").to_number<std::int64_t>());
    }
    return out;
  };
  ASSERT_EQ(::kill(cluster_->broker(paused).pid(), SIGSTOP), 0);
  ASSERT_TRUE(wait_stopped(cluster_->broker(paused).pid()));
  for (const char* path : {"/v1/topics", "/v1/transactions?state=prepared"}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto v = get(asked, path);
    const auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_EQ(v.status, 200u) << path << ": " << text_of(v.body);
    EXPECT_LT(took, 8s) << path << " took " << std::chrono::duration_cast<milliseconds>(took).count()
                        << " ms with node " << paused << " paused (deadline 5 s)";
    EXPECT_FALSE(complete(v.body)) << path << ": " << text_of(v.body);
    EXPECT_EQ(not_answering(v.body), std::set<std::int64_t>{paused}) << path << ": " << text_of(v.body);
    EXPECT_EQ(missing_of(v.body), paused_parts) << path << ": " << text_of(v.body);
    std::cout << "CLUSTER-FIGURES views paused node: " << path << " answered in "
              << std::chrono::duration_cast<milliseconds>(took).count() << " ms\n";
  }
  ASSERT_EQ(::kill(cluster_->broker(paused).pid(), SIGCONT), 0);
  EXPECT_TRUE(eventually([&] {
    auto v = get(asked, "/v1/topics");
    return v.status == 200 && complete(v.body);
  }, 30s)) << logs();
}

TEST_F(cluster_views_test, tx_list_topics_and_the_http_api_show_every_leaders_part_across_a_leader_kill) {
  std::string why;
  ASSERT_TRUE(cluster_->create_topic(k_shared, k_partitions, 3, why)) << why;
  ASSERT_TRUE(cluster_->create_topic(k_spread, k_partitions, 1, why)) << why;
  ASSERT_TRUE(cluster_->create_topic(k_solo, 1, 1, why)) << why;

  // The node asked: one that does not lead the solo topic's partition (so it holds no copy of
  // it) and does not lead every partition of the others.
  const int solo_leader = leader_of(k_solo, 0);
  const int asked = solo_leader == 1 ? 2 : 1;
  std::set<int> spread_leaders;
  for (int p = 0; p < k_partitions; ++p) spread_leaders.insert(leader_of(k_spread, p));
  ASSERT_GT(spread_leaders.size(), 1u) << "the replicas-1 topic's partitions all on one node";

  // Transactions: one per partition of each topic, left PREPARED (no checker, tx_timeout 1h).
  std::set<std::string> txids;
  for (int p = 0; p < k_partitions; ++p) {
    txids.insert(prepare(k_shared, k_partitions, key_for(p, "s")));
    txids.insert(prepare(k_spread, k_partitions, key_for(p, "r")));
  }
  txids.erase("");
  ASSERT_EQ(txids.size(), 2u * k_partitions);

  // Messages on the replicas-1 topics (counted by topic list from their leaders) and on the
  // replicas-3 topic, a quarter poison: nacked until dead letters.
  std::map<std::string, std::uint64_t> produced;
  {
    producer::producer_options o;
    o.connection.address = cluster_->bootstrap();
    o.delivery_timeout = 30000ms;
    o.linger = 1ms;
    producer::producer p(o);
    std::atomic<int> acked{0};
    for (int i = 0; i < k_messages; ++i) {
      for (const char* topic : {k_shared, k_spread, k_solo}) {
        producer::outgoing_message m;
        m.topic = topic;
        m.key = "k" + std::to_string(i % 12);
        m.body = (i % 4 == 1 ? "poison" : "job") + std::to_string(i);
        ++produced[topic];
        p.async_send(std::move(m), [&acked](client::result<producer::send_result> r) {
          if (r) acked.fetch_add(1);
        });
      }
    }
    ASSERT_TRUE(p.flush(30s)) << logs();
    p.close();
    ASSERT_EQ(acked.load(), 3 * k_messages) << logs();
  }
  consumer::consumer_options co;
  co.connection.address = cluster_->bootstrap();
  co.connection.request_timeout = 10000ms;
  co.group = k_group;
  co.topics = {k_shared};
  co.metadata_refresh = 300ms;
  std::set<std::string> poison_ids;
  {
    consumer::consumer reader(co);
    std::set<std::string> acked_ids;
    std::map<std::string, std::uint32_t> nacked;
    ASSERT_TRUE(eventually([&] {
      auto r = reader.fetch(50, 300ms);
      if (!r) return false;
      std::vector<consumer::delivery_ref> acks, nacks;
      for (const auto& d : r.value()) {
        const auto id = protocol::uuid::from_bytes(d.message.id()).value().to_string();
        if (poison(d.message.body())) {
          nacks.push_back(d.ref());
          nacked[id] = std::max(nacked[id], d.message.attempt());
        } else {
          acks.push_back(d.ref());
          acked_ids.insert(id);
        }
      }
      if (!acks.empty()) (void)reader.ack(acks);
      if (!nacks.empty()) (void)reader.nack(nacks, 0ms);
      poison_ids.clear();
      for (auto& [id, a] : nacked) {
        if (a >= 2) poison_ids.insert(id);
      }
      return acked_ids.size() == k_messages - k_messages / 4 && poison_ids.size() == static_cast<std::size_t>(k_messages / 4);
    }, 60s)) << logs();
  }

  // 1. The CLI through `asked`: every transaction, every topic with the cluster's counts.
  auto tl = txmq(cluster_->broker(asked), {"--json", "tx", "list"});
  ASSERT_EQ(tl.status, 0) << tl << logs();
  std::set<std::string> listed;
  for (const auto& o : tl.objects()) listed.insert(std::string(o.at("txid").as_string()));
  EXPECT_EQ(listed, txids) << tl;
  auto top = txmq(cluster_->broker(asked), {"--json", "topic", "list"});
  ASSERT_EQ(top.status, 0) << top << logs();
  std::map<std::string, std::uint64_t> counted;
  std::map<std::string, std::uint64_t> replicas;
  for (const auto& o : top.objects()) {
    counted[std::string(o.at("topic").as_string())] = o.at("messages").to_number<std::uint64_t>();
    if (o.contains("replicas")) replicas[std::string(o.at("topic").as_string())] = o.at("replicas").to_number<std::uint64_t>();
  }
  EXPECT_EQ(counted, produced) << top;
  EXPECT_EQ(replicas[k_shared], 3u) << top;
  EXPECT_EQ(replicas[k_solo], 1u) << top;

  // 2. The admin HTTP API through `asked`.
  auto dl = get(asked, std::string("/v1/groups/") + k_group + "/dead-letters?limit=1000");
  ASSERT_EQ(dl.status, 200u) << text_of(dl.body);
  EXPECT_EQ(ids_of(dl.body, "dead_letters", "id", true), poison_ids) << text_of(dl.body);
  EXPECT_TRUE(complete(dl.body)) << text_of(dl.body);
  auto g = get(asked, std::string("/v1/groups/") + k_group);
  ASSERT_EQ(g.status, 200u) << text_of(g.body);
  EXPECT_EQ(g.body.at("dead_letters").to_number<std::uint64_t>(), poison_ids.size()) << text_of(g.body);
  EXPECT_EQ(g.body.at("partitions").as_array().size(), static_cast<std::size_t>(k_partitions)) << text_of(g.body);
  auto tx = get(asked, "/v1/transactions?state=prepared&limit=1000");
  ASSERT_EQ(tx.status, 200u) << text_of(tx.body);
  EXPECT_EQ(ids_of(tx.body, "txs", "txid"), txids) << text_of(tx.body);
  EXPECT_TRUE(complete(tx.body)) << text_of(tx.body);
  // Paged by two: the pages together are every transaction once.
  {
    std::set<std::string> paged;
    std::string after;
    for (int i = 0; i < 10; ++i) {
      auto page = get(asked, "/v1/transactions?state=prepared&limit=2" + (after.empty() ? "" : "&after=" + after));
      ASSERT_EQ(page.status, 200u) << text_of(page.body);
      for (const auto& id : ids_of(page.body, "txs", "txid")) EXPECT_TRUE(paged.insert(id).second) << id << " twice";
      after = std::string(page.body.at("next_after_txid").as_string());
      if (after.empty()) break;
    }
    EXPECT_EQ(paged, txids);
  }
  auto tp = get(asked, "/v1/topics");
  ASSERT_EQ(tp.status, 200u) << text_of(tp.body);
  std::map<std::string, std::uint64_t> http_counted;
  for (const auto& t : tp.body.at("topics").as_array()) {
    std::uint64_t n = 0;
    for (const auto& p : t.at("partition_info").as_array()) {
      n += p.at("end_offset").to_number<std::uint64_t>() - p.at("start_offset").to_number<std::uint64_t>();
    }
    http_counted[std::string(t.at("name").as_string())] = n;
  }
  EXPECT_EQ(http_counted, produced) << text_of(tp.body);
  EXPECT_TRUE(complete(tp.body)) << text_of(tp.body);
  auto cl = get(asked, "/v1/cluster");
  ASSERT_EQ(cl.status, 200u) << text_of(cl.body);
  EXPECT_TRUE(cl.body.at("cluster").as_bool());
  EXPECT_EQ(cl.body.at("nodes").as_array().size(), 3u) << text_of(cl.body);

  // A commit through HTTP on a node that does not lead the home partition reaches its leader.
  std::string remote_tx;
  int remote_home_leader = 0;
  for (int p = 0; p < k_partitions && remote_tx.empty(); ++p) {
    if (leader_of(k_spread, p) == asked) continue;
    remote_home_leader = leader_of(k_spread, p);
    remote_tx = prepare(k_spread, k_partitions, key_for(p, "c"));
  }
  ASSERT_FALSE(remote_tx.empty());
  auto commit = http_call(cluster_->broker(asked).http_port(), "POST", "/v1/transactions/" + remote_tx + "/commit");
  EXPECT_EQ(commit.status, 200u) << text_of(commit.body) << logs();
  auto shown = get(asked, "/v1/transactions/" + remote_tx);
  EXPECT_EQ(shown.status, 200u) << text_of(shown.body);
  EXPECT_EQ(shown.body.is_object() ? std::string(shown.body.at("state").as_string()) : "", "COMMITTED")
      << text_of(shown.body) << " (home leader node " << remote_home_leader << ")";

  // 3. A leader of a replicas-3 partition other than `asked` SIGKILLed. Every answer polled
  //    is whole or says what it misses; the dead node's replicas-1 partitions stay missing
  //    ("no leader") until it returns.
  int killed = 0;
  for (int p = 0; p < k_partitions && killed == 0; ++p) {
    if (leader_of(k_shared, p) != asked) killed = leader_of(k_shared, p);
  }
  ASSERT_GT(killed, 0);
  std::set<std::pair<std::string, int>> dead_parts;  // the killed node's replicas-1 partitions
  for (int p = 0; p < k_partitions; ++p) {
    if (leader_of(k_spread, p) == killed) dead_parts.insert({k_spread, p});
  }
  if (solo_leader == killed) dead_parts.insert({k_solo, 0});
  cluster_->broker(killed).kill();
  int polls = 0, partial = 0, lying = 0;
  std::string last;
  const auto missing_of = [](const json::value& v) {
    std::set<std::pair<std::string, int>> out;
    for (const auto& m : v.at("cluster").at("missing").as_array()) {
      out.insert({std::string(m.at("topic").as_string()), static_cast<int>(m.at("partition").to_number<std::int64_t>())});
    }
    return out;
  };
  const bool settled = eventually([&] {
    auto d = get(asked, std::string("/v1/groups/") + k_group + "/dead-letters?limit=1000");
    if (d.status != 200 || !d.body.is_object()) return false;
    ++polls;
    last = text_of(d.body);
    const bool whole_list = ids_of(d.body, "dead_letters", "id", true) == poison_ids;
    if (complete(d.body) && !whole_list) ++lying;  // a partial view presented as whole
    if (!complete(d.body)) {
      ++partial;
      if (d.body.at("cluster").at("missing").as_array().empty() &&
          std::all_of(d.body.at("cluster").at("nodes").as_array().begin(), d.body.at("cluster").at("nodes").as_array().end(),
                      [](const json::value& n) { return n.at("answered").as_bool(); })) {
        ++lying;  // incomplete without saying why
      }
    }
    // Settled: every dead letter listed through the new leaders; what is missing is exactly
    // the dead node's replicas-1 partitions (nothing when it led none).
    return whole_list && missing_of(d.body) == dead_parts;
  }, 30s);
  EXPECT_TRUE(settled) << polls << " polls, last: " << last << "\n" << logs();
  EXPECT_EQ(lying, 0) << "answers presented as whole without every dead letter, or partial without saying why; last: " << last;
  auto tx2 = get(asked, "/v1/transactions?state=prepared&limit=1000");
  ASSERT_EQ(tx2.status, 200u);
  const auto listed2 = ids_of(tx2.body, "txs", "txid");
  EXPECT_EQ(complete(tx2.body), dead_parts.empty()) << text_of(tx2.body);
  EXPECT_EQ(missing_of(tx2.body), dead_parts) << text_of(tx2.body);
  // Every transaction homed on the replicas-3 topic is listed through the new leaders.
  std::size_t shared_listed = 0;
  for (const auto& t : tx2.body.at("txs").as_array()) {
    if (t.at("topics").as_array().at(0).as_string() == k_shared) ++shared_listed;
  }
  EXPECT_EQ(shared_listed, static_cast<std::size_t>(k_partitions)) << text_of(tx2.body);
  auto tl2 = txmq(cluster_->broker(asked), {"--json", "tx", "list"});
  EXPECT_EQ(tl2.status, 0) << tl2;
  if (!dead_parts.empty()) {
    EXPECT_NE(tl2.err.find("has no leader now"), std::string::npos) << tl2;
  }

  // 4. The node back: complete again, every transaction listed.
  cluster_->broker(killed).start();
  EXPECT_TRUE(eventually([&] { return whole(k_shared, k_partitions, 3) && whole(k_spread, k_partitions, 1); }, 40s)) << logs();
  EXPECT_TRUE(eventually([&] {
    auto t = get(asked, "/v1/transactions?state=prepared&limit=1000");
    return t.status == 200 && complete(t.body) && ids_of(t.body, "txs", "txid") == txids;
  }, 30s)) << logs();
  std::cout << "CLUSTER-FIGURES views: " << txids.size() << " transactions, " << poison_ids.size()
            << " dead letters through node " << asked << "; node " << killed << " killed: " << polls << " polls, "
            << partial << " partial (each naming what it missed), " << lying << " presented as whole wrongly\n";
}

}  // namespace
}  // namespace txmq::test
