// A cluster with TLS and auth on (docs/cluster.md "Between brokers"): etcd and three brokers
// serving TLS with certificates of a test CA, auth on with an admin token and a cluster token.
// Followers reach their leader over TLS (the leader's certificate verified against the CA and
// the advertised host) and authenticate as the brokers' principal; clients, admin included,
// are refused ReplicaFetch with NOT_AUTHORIZED.
//
// On main before this change the brokers refuse the --cluster-token-file flag, and without it a
// follower's Hello (no token, no TLS) is refused by its leader, so nothing replicates.

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cluster_brokers.h"
#include "eventually.h"
#include "fault_support.h"
#include "history_checker.h"
#include "keyed_stream.h"
#include "store_reader.h"
#include "test_certificates.h"
#include "txmq/client/admin.h"
#include "txmq/producer/transaction.h"
#include "txmq/protocol/partitioner.h"

namespace txmq::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

const std::string k_admin_token = "txmq_admin0123456789abcdef0123456789abcdef0123";
const std::string k_cluster_token = "txmq_cluster0123456789abcdef0123456789abcdef01";
const std::string k_topic = "secure";

class cluster_security_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
    certs_.dir = fs::temp_directory_path() / ("txmq-csec-" + std::to_string(::getpid()) + "-" +
                                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(certs_.dir);
    fs::create_directories(certs_.dir);
    ASSERT_NO_FATAL_FAILURE(certs_.authority("ca", "txmq test CA"));
    ASSERT_NO_FATAL_FAILURE(certs_.leaf("server", "localhost", "DNS:localhost,IP:127.0.0.1"));
    std::ofstream(certs_.dir / "admin.token") << k_admin_token << "\n";
    std::ofstream(certs_.dir / "cluster.token") << k_cluster_token << "\n";
    cluster_ = std::make_unique<cluster_brokers>();
    std::vector<std::string> args{"--node-lease-ttl", "3s", "--replica-lag-max", "4s", "--auth", "--admin-token-file",
                                  certs_.path("admin.token"), "--cluster-token-file", certs_.path("cluster.token"),
                                  "--tls-cert-file", certs_.path("server.pem"), "--tls-key-file",
                                  certs_.path("server.key"), "--cluster-tls-ca-file", certs_.path("ca.pem")};
    if (mtls_) args.insert(args.end(), {"--tls-client-ca-file", certs_.path("ca.pem")});
    cluster_->start(args);
    cluster_->set_client_options(client_options(k_admin_token));
  }
  void TearDown() override {
    cluster_.reset();
    std::error_code ec;
    fs::remove_all(certs_.dir, ec);
  }

  client::connection_options client_options(const std::string& token) const {
    client::connection_options o;
    o.tls.enabled = true;
    o.tls.ca_file = certs_.path("ca.pem");
    o.auth_token = token;
    if (mtls_) {
      // Clients need a certificate of the CA too; the server's will do for the test.
      o.tls.cert_file = certs_.path("server.pem");
      o.tls.key_file = certs_.path("server.key");
    }
    return o;
  }

  // A ReplicaFetch as a follower would send it, through a connection with `token`: "OK" for a
  // replica fetch answer, else the error's text (its wire code first: "NOT_AUTHORIZED: ...").
  std::string replica_fetch(int broker, const std::string& token) {
    auto o = client_options(token);
    o.address = cluster_->broker(broker).address();
    o.connect_timeout = 3000ms;
    auto c = client::connection::connect(o);
    if (!c) return "cannot connect: " + c.error().to_string();
    v1::Frame f;
    auto* r = f.mutable_replica_fetch();
    r->set_node_id(2);
    r->set_topic(k_topic);
    r->set_partition(0);
    r->set_leader_epoch(0);
    auto a = c.value()->request(std::move(f), 5000ms);
    if (!a) return a.error().to_string();
    return a.value().has_replica_fetch_response() ? "OK" : a.value().ShortDebugString();
  }

  // A keyed Produce to `broker` through `conn` (or a new connection with `token`): "OK", or the
  // error's text ("NOT_AUTHORIZED: ...", "NOT_LEADER: ..."; a refused Hello: "cannot connect").
  std::string produce(int broker, const std::string& token, std::shared_ptr<client::connection> conn = nullptr) {
    if (!conn) {
      auto o = client_options(token);
      o.address = cluster_->broker(broker).address();
      o.connect_timeout = 3000ms;
      auto c = client::connection::connect(o);
      if (!c) return "cannot connect: " + c.error().to_string();
      conn = c.value();
    }
    v1::Frame f;
    f.mutable_produce()->set_topic(k_topic);
    auto* m = f.mutable_produce()->add_messages();
    m->set_key("k");
    m->set_body("b");
    auto a = conn->request(std::move(f), 5000ms);
    if (!a) return a.error().to_string();
    return "OK";
  }

  bool mtls_ = false;  // tls_client_ca_file set: every connection, a follower's too, needs a certificate
  test_certificates certs_;
  std::unique_ptr<cluster_brokers> cluster_;
};

class cluster_mtls_test : public cluster_security_test {
 protected:
  void SetUp() override {
    mtls_ = true;
    cluster_security_test::SetUp();
  }
};

// With mTLS the leader requires a client certificate of every connection: a follower presents
// its broker's own (tls_cert_file), and authenticates with the cluster token.
TEST_F(cluster_mtls_test, followers_present_their_certificate_and_replicate) {
  std::string why;
  ASSERT_TRUE(cluster_->create_topic(k_topic, 1, 3, why)) << why;
  history h;
  keyed_stream stream(cluster_->bootstrap(), k_topic, h, std::nullopt, client_options(k_admin_token));
  ASSERT_TRUE(eventually([&] { return stream.acks() >= 300; }, 30s)) << cluster_->logs();
  for (int id = 1; id <= 3; ++id) {
    ASSERT_TRUE(eventually([&] { return cluster_->end_offset(id, k_topic) >= 300; }, 20s))
        << "broker " << id << " has not replicated\n" << cluster_->logs();
  }
  stream.stop();
}

// How long until `cond` holds, or nullopt after `bound`.
template <class F>
std::optional<milliseconds> time_until(F cond, milliseconds bound) {
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < bound) {
    if (cond()) return std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
    std::this_thread::sleep_for(10ms);
  }
  return std::nullopt;
}

TEST_F(cluster_security_test, principals_and_grants_made_on_one_node_are_enforced_by_every_node) {
  std::string why;
  ASSERT_TRUE(cluster_->create_topic(k_topic, 1, 3, why)) << why;
  auto admin1 = cluster_->connect(cluster_->broker(1).address());
  ASSERT_TRUE(admin1);
  client::admin admin(admin1);
  // Documented bound (docs/cluster.md "Principals and ACLs"): the next state read (at once on
  // the watch event, at worst reconcile_interval, 1 s) plus a service tick; asserted with margin.
  const milliseconds bound = 3000ms;
  auto created = admin.create_principal("app");
  ASSERT_TRUE(created) << created.error().to_string();
  const std::string token = created.value().token();
  // Authenticated by node 3 (which was told nothing), refused produce until granted.
  const auto known = time_until([&] { return produce(3, token).find("cannot connect") == std::string::npos; }, bound);
  ASSERT_TRUE(known) << produce(3, token) << "\n" << cluster_->logs();
  EXPECT_TRUE(produce(3, token).starts_with("NOT_AUTHORIZED")) << produce(3, token);
  ASSERT_TRUE(admin.grant("app", "produce", "topic:" + k_topic));
  // Granted: node 3 lets it through (OK when it leads, else NOT_LEADER: past the ACL check).
  const auto granted = time_until([&] { return !produce(3, token).starts_with("NOT_AUTHORIZED"); }, bound);
  ASSERT_TRUE(granted) << produce(3, token);
  // etcd holds the token's hash, never a token.
  const auto dump = shell_stdout("ETCDCTL_API=3 etcdctl --endpoints " + cluster_->etcd().url() +
                                 " get --prefix /txmq/principals/ 2>&1");
  EXPECT_NE(dump.find("token_sha256"), std::string::npos) << dump;
  EXPECT_EQ(dump.find(token), std::string::npos);
  EXPECT_EQ(dump.find(k_admin_token), std::string::npos);
  EXPECT_EQ(dump.find(k_cluster_token), std::string::npos);
  // Listed from another node, without the token. Node 2 answers from its own copy, which
  // follows etcd within the same bound as node 3's.
  {
    auto c2 = cluster_->connect(cluster_->broker(2).address());
    ASSERT_TRUE(c2);
    client::admin a2(c2);
    std::string acls_seen, principals_seen;
    EXPECT_TRUE(eventually([&] {
      auto acls = a2.list_acls("app");
      acls_seen = acls ? acls.value().ShortDebugString() : acls.error().to_string();
      return acls && acls.value().entries_size() == 1;
    }, bound)) << acls_seen;
    EXPECT_TRUE(eventually([&] {
      auto list = a2.list_principals();
      principals_seen = list ? list.value().ShortDebugString() : list.error().to_string();
      if (!list) return false;
      for (const auto& p : list.value().principals()) {
        if (p.name() == "app") return true;
      }
      return false;
    }, bound)) << principals_seen;
  }
  // Revoked on node 1: an open connection of node 3 is refused its next produce.
  auto o = client_options(token);
  o.address = cluster_->broker(3).address();
  auto open3 = client::connection::connect(o);
  ASSERT_TRUE(open3) << open3.error().to_string();
  ASSERT_FALSE(produce(3, token, open3.value()).starts_with("NOT_AUTHORIZED"));
  ASSERT_TRUE(admin.revoke("app", "produce", "topic:" + k_topic));
  const auto revoked = time_until([&] { return produce(3, token, open3.value()).starts_with("NOT_AUTHORIZED"); }, bound);
  ASSERT_TRUE(revoked) << produce(3, token, open3.value());
  // Deleted on node 1: node 3 refuses its token, and closed the open connection.
  ASSERT_TRUE(admin.delete_principal("app"));
  const auto deleted = time_until([&] { return produce(3, token).starts_with("cannot connect"); }, bound);
  ASSERT_TRUE(deleted) << produce(3, token);
  EXPECT_NE(produce(3, token, open3.value()), "OK");
  std::cout << "CLUSTER-FIGURES principals: node 3 knew a new principal after " << known->count()
            << " ms, a grant after " << granted->count() << " ms, a revoke after " << revoked->count()
            << " ms, a delete after " << deleted->count() << " ms\n";
}

TEST_F(cluster_security_test, replicates_over_tls_with_auth_and_survives_a_leader_kill) {
  std::string why;
  ASSERT_TRUE(cluster_->create_topic(k_topic, 1, 3, why)) << why;
  const auto before = cluster_->view(k_topic);
  ASSERT_TRUE(before);
  const int leader = static_cast<int>(before->leader);
  history h;
  keyed_stream stream(cluster_->bootstrap(), k_topic, h, std::nullopt, client_options(k_admin_token));
  // Acknowledgements need both followers' fsync reports (min ISR 2 of 3): they fetch over TLS
  // as the brokers' principal, or nothing is acknowledged.
  ASSERT_TRUE(eventually([&] { return stream.acks() >= 300; }, 30s)) << cluster_->logs();
  for (int id = 1; id <= 3; ++id) {
    ASSERT_TRUE(eventually([&] { return cluster_->end_offset(id, k_topic) >= 300; }, 20s))
        << "broker " << id << " has not replicated\n" << cluster_->logs();
  }
  cluster_->broker(leader).kill();
  const auto killed_at = std::chrono::steady_clock::now();
  const auto acks_at_kill = stream.acks();
  int next = 0;
  ASSERT_TRUE(eventually([&] {
    auto v = cluster_->view(k_topic);
    if (v && v->leader > 0 && v->leader != leader) next = static_cast<int>(v->leader);
    return next != 0;
  }, 15s)) << cluster_->logs();
  // The new leader acknowledges again: its remaining follower fetches from it over TLS.
  ASSERT_TRUE(eventually([&] { return stream.acks() >= acks_at_kill + 300; }, 30s)) << cluster_->logs();
  const auto after = stream.first_ack_after(killed_at);
  ASSERT_TRUE(after);
  std::cout << "CLUSTER-FIGURES secure failover: new leader " << next << ", first ack "
            << std::chrono::duration_cast<milliseconds>(*after - killed_at).count() << " ms after the kill\n";
  stream.stop();
  // Both survivors hold every acknowledged write, once, in order (their stores, read stopped).
  for (int id = 1; id <= 3; ++id) {
    if (id == leader) continue;
    cluster_->broker(id).kill();
  }
  for (int id = 1; id <= 3; ++id) {
    if (id == leader) continue;
    history copy(h);
    const auto err = read_stopped_log(cluster_->broker(id).data_dir(), k_topic, 0, copy);
    ASSERT_TRUE(err.empty()) << err;
    const auto verdict = copy.check();
    EXPECT_TRUE(verdict.ok()) << "broker " << id << ": " << verdict.summary();
    EXPECT_GE(verdict.acknowledged, 600u);
  }
}

// With auth and TLS on, a COMMIT's messages reach partitions led by other brokers: the home
// leader copies them as a Produce over its peer connection, authenticated as txmq-cluster,
// which therefore holds produce (docs/cluster.md "Transactions", "Between brokers"). Without
// that permission the copy is refused NOT_AUTHORIZED and retried forever: the second message
// never appears on its partition's leader.
TEST_F(cluster_security_test, a_commit_reaches_partitions_led_by_other_brokers_with_auth_on) {
  const std::string topic = "secure-tx";
  constexpr std::uint32_t partitions = 3;
  std::string why;
  ASSERT_TRUE(cluster_->create_topic(topic, partitions, 3, why)) << why;
  // Two keys whose partitions have different leaders (the controller spreads leaderships).
  std::map<std::uint32_t, std::int64_t> leader;
  ASSERT_TRUE(eventually([&] {
    for (std::uint32_t p = 0; p < partitions; ++p) {
      auto v = cluster_->view(topic, static_cast<std::int32_t>(p));
      if (!v || v->leader <= 0 || v->isr.size() != 3) return false;
      leader[p] = v->leader;
    }
    return true;
  }, 20s)) << cluster_->logs();
  std::string home_key, other_key;
  for (int i = 0; i < 200 && other_key.empty(); ++i) {
    const std::string k = "acct-" + std::to_string(i);
    const auto p = protocol::partition_for_key(k, partitions);
    if (home_key.empty()) {
      home_key = k;
    } else if (leader[p] != leader[protocol::partition_for_key(home_key, partitions)]) {
      other_key = k;
    }
  }
  ASSERT_FALSE(other_key.empty()) << "every partition has one leader";
  const auto other_partition = protocol::partition_for_key(other_key, partitions);
  const int other_leader = static_cast<int>(leader[other_partition]);
  const auto before = cluster_->end_offset(other_leader, topic, other_partition);

  producer::transactional_producer_options o;
  o.connection = client_options(k_admin_token);
  o.connection.address = cluster_->bootstrap();
  o.connection.producer_group = "payers";
  o.request_timeout = 20000ms;
  o.checker = [](const producer::tx_check&) { return producer::tx_decision::commit; };
  producer::transactional_producer tp(std::move(o));
  std::string failed;
  ASSERT_TRUE(eventually([&] {
    auto tx = tp.begin();
    for (const auto& key : {home_key, other_key}) {
      producer::outgoing_message m;
      m.topic = topic;
      m.key = key;
      m.body = "tx-" + key;
      tx.add(std::move(m));
    }
    if (auto p = tx.prepare(); !p) {
      failed = p.error().to_string();  // e.g. NOT_LEADER while the leaders record their epochs: again
      return false;
    }
    if (auto c = tx.commit(); !c) {
      failed = c.error().to_string();
      return false;
    }
    return true;
  }, 30s)) << failed << "\n" << cluster_->logs();
  // The copy to the other leader is made after EndTx is answered: wait for it there.
  EXPECT_TRUE(eventually([&] { return cluster_->end_offset(other_leader, topic, other_partition) > before; }, 15s))
      << "the commit's message of " << other_key << " never reached broker " << other_leader << "\n"
      << cluster_->logs();
}

TEST_F(cluster_security_test, replica_fetch_is_refused_to_every_client_principal) {
  std::string why;
  ASSERT_TRUE(cluster_->create_topic(k_topic, 1, 3, why)) << why;
  const auto v = cluster_->view(k_topic);
  ASSERT_TRUE(v);
  const int leader = static_cast<int>(v->leader);
  // A principal holding admin on the cluster, and admin itself: NOT_AUTHORIZED, not a replica.
  auto admin_conn = cluster_->connect(cluster_->broker(leader).address());
  ASSERT_TRUE(admin_conn);
  client::admin admin(admin_conn);
  auto created = admin.create_principal("svc");
  ASSERT_TRUE(created) << created.error().to_string();
  ASSERT_TRUE(admin.grant("svc", "admin", "cluster"));
  for (const std::string& token : {created.value().token(), k_admin_token}) {
    const auto a = replica_fetch(leader, token);
    EXPECT_TRUE(a.starts_with("NOT_AUTHORIZED")) << a;
    EXPECT_NE(a.find("may not fetch replicas"), std::string::npos) << a;
  }
  // The brokers' own token is let through (a replica fetch answer, or a fencing error for this
  // made-up follower's epoch: never an auth error).
  const auto ok = replica_fetch(leader, k_cluster_token);
  EXPECT_EQ(ok.find("NOT_AUTHORIZED"), std::string::npos) << ok;
  EXPECT_EQ(ok.find("NOT_AUTHENTICATED"), std::string::npos) << ok;
  EXPECT_EQ(ok.find("cannot connect"), std::string::npos) << ok;
  // And a granting of replicate is refused: nobody else can be given it.
  auto g = admin.grant("svc", "replicate", "cluster");
  EXPECT_FALSE(g);
}

}  // namespace
}  // namespace txmq::test
