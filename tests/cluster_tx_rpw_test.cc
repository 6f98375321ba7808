// Read-process-write across leader failovers (issue 14, docs/cluster.md "Transactions"): etcd and
// three txmq-broker processes, stopped by PID. An input topic and an output topic, each of 3
// partitions on 3 replicas (leaders spread). Two workers each consume the input through a
// consumer group and, for every batch of deliveries, run one transaction: an output message per
// input (same key, the input's id in a header) plus the acks of those deliveries. Most commit,
// some roll back, some wait longer than the ack deadline between Prepare and EndTx (the hold must
// keep their inputs from being redelivered meanwhile). The local decision is recorded before
// EndTx and answers the check-backs. Meanwhile leaders — of input partitions (where the holds
// and acks live) and of output partitions (the transactions' homes) — are SIGKILLed at random
// moments and restarted. Verdict, read through a second group from the output partitions'
// leaders:
//  - every input has exactly one visible output (none missing: no input acked without its
//    output committed; none doubled: no input processed into two committed transactions);
//  - no visible output belongs to a transaction the worker rolled back or whose Prepare failed;
//  - no output at two positions.
// Label `cluster`. TXMQ_CLUSTER_KILLS (default 4), TXMQ_RPW_INPUTS (default 120).
//
// The same with TLS and auth on between brokers and for the clients (cluster_security_test's
// setup: a test CA, an admin token, the cluster token): the home leaders' holds, acks and
// releases go to the input leaders over TLS as the cluster's principal (they need
// `replicate`), and only input partitions' leaders are killed.

#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "cluster_brokers.h"
#include "eventually.h"
#include "test_certificates.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/producer.h"
#include "txmq/producer/transaction.h"
#include "txmq/protocol/partitioner.h"

namespace txmq::test {
namespace {
using std::chrono::milliseconds;
using namespace std::chrono_literals;

constexpr const char* k_in = "rpw-in";
constexpr const char* k_out = "rpw-out";
constexpr const char* k_group = "transformers";
constexpr std::uint32_t k_partitions = 3;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::max(1, std::atoi(v)) : fallback;
}

// The workers' local side: each transaction's decision (answers check-backs), and which
// transaction each output message belongs to.
struct local_db {
  std::mutex mu;
  std::map<std::string, producer::tx_decision> decided;  // txid bytes → commit / rollback
  std::map<std::string, std::string> output_tx;          // output id → txid bytes
  producer::tx_decision answer(const std::string& txid) {
    std::lock_guard lk(mu);
    auto it = decided.find(txid);
    return it == decided.end() ? producer::tx_decision::unknown : it->second;
  }
  void decide(const std::string& txid, producer::tx_decision d) {
    std::lock_guard lk(mu);
    decided[txid] = d;
  }
};

struct counts {
  std::atomic<int> committed{0}, rolled_back{0}, prepare_failed{0}, end_failed{0}, slow{0}, deliveries{0};
};

class cluster_tx_rpw_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
    cluster_ = std::make_unique<cluster_brokers>();
    cluster_->start(tx_test_flags({"--ack-deadline", "2s", "--retry-schedule", "200ms", "--max-attempts", "1000"}));
    base_.address = cluster_->bootstrap();
  }
  // Inputs through two workers while `kills` leaders (of input partitions only, or of inputs
  // and outputs) are SIGKILLed and restarted; then the verdict.
  void run(int kills, int inputs, bool inputs_only);
  // Every client connection's settings (address: the bootstrap list; TLS and token when on).
  client::connection_options base_;
  std::string logs() const { return cluster_->logs(); }
  bool whole() {
    for (const char* t : {k_in, k_out}) {
      for (std::uint32_t p = 0; p < k_partitions; ++p) {
        auto v = cluster_->view(t, static_cast<std::int32_t>(p));
        if (!v || v->leader <= 0 || v->isr.size() != 3) return false;
      }
    }
    return true;
  }
  std::unique_ptr<cluster_brokers> cluster_;
};

// One worker: consume, transform, commit outputs and acks together.
void work(const client::connection_options& base, int seed, local_db& db, counts& n, const std::atomic<bool>& stop) {
  consumer::consumer_options co;
  co.connection = base;
  co.connection.request_timeout = milliseconds(10000);
  co.connection.reconnect_backoff_max = 300ms;
  co.group = k_group;
  co.topics = {k_in};
  co.metadata_refresh = milliseconds(300);
  consumer::consumer in(co);
  producer::transactional_producer_options po;
  po.connection = base;
  po.connection.producer_group = "transformers-tx";
  po.connection.reconnect_backoff_max = 300ms;
  po.request_timeout = 20000ms;
  po.checker = [&db](const producer::tx_check& c) { return db.answer(std::string(c.txid.raw())); };
  producer::transactional_producer tp(std::move(po));
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  while (!stop.load()) {
    auto got = in.fetch(3, 300ms);
    if (!got || got.value().empty()) continue;
    n.deliveries.fetch_add(static_cast<int>(got.value().size()));
    auto tx = tp.begin();
    const std::string txid(tx.id().raw());
    for (auto& d : got.value()) {
      producer::outgoing_message m;
      m.topic = k_out;
      m.key = d.message.key();
      m.body = d.message.body();
      m.headers["input"] = protocol::uuid::from_bytes(d.message.id()).value().to_string();
      m.id = protocol::uuid::make_v7();
      {
        std::lock_guard lk(db.mu);
        db.output_tx[std::string(m.id->raw())] = txid;
      }
      tx.add(std::move(m));
      tx.add_ack(k_group, {d.message.topic(), d.message.partition(), d.message.offset(), d.message.attempt()});
    }
    if (auto p = tx.prepare(); !p) {
      // The broker may have it: its check-back is answered rollback (nothing committed locally).
      db.decide(txid, producer::tx_decision::rollback);
      n.prepare_failed.fetch_add(1);
      continue;
    }
    const int pick = static_cast<int>(rng() % 12);
    if (pick == 0) {
      // Longer than the ack deadline (2 s): only the hold keeps the inputs from going to the
      // other worker meanwhile.
      n.slow.fetch_add(1);
      std::this_thread::sleep_for(2500ms);
    }
    const auto d = pick < 10 ? producer::tx_decision::commit : producer::tx_decision::rollback;
    db.decide(txid, d);  // the local transaction is done before EndTx
    client::result<void> r = outcome::success();
    if (d == producer::tx_decision::commit) {
      if (auto c = tx.commit(); !c) r = c.error();
    } else {
      r = tx.rollback();
    }
    if (!r) {
      // Left to the check-back (it answers from `decided`), or rolled back by the broker
      // (UNKNOWN_DELIVERY: an input was no longer in flight for it).
      n.end_failed.fetch_add(1);
      continue;
    }
    (d == producer::tx_decision::commit ? n.committed : n.rolled_back).fetch_add(1);
  }
  tp.close();
}

TEST_F(cluster_tx_rpw_test, every_input_consumed_exactly_once_into_outputs_across_leader_sigkills) {
  run(env_int("TXMQ_CLUSTER_KILLS", 4), env_int("TXMQ_RPW_INPUTS", 120), false);
}

void cluster_tx_rpw_test::run(int k_kills, int k_inputs, bool inputs_only) {
  const auto started = std::chrono::steady_clock::now();
  std::string why;
  ASSERT_TRUE(cluster_->create_topic(k_in, k_partitions, 3, why)) << why;
  ASSERT_TRUE(cluster_->create_topic(k_out, k_partitions, 3, why)) << why;

  std::set<std::string> inputs;
  {
    producer::producer_options o;
    o.connection = base_;
    producer::producer p(o);
    for (int i = 0; i < k_inputs; ++i) {
      producer::outgoing_message m;
      m.topic = k_in;
      m.key = "k" + std::to_string(i % 15);
      m.body = "in-" + std::to_string(i);
      auto r = p.send(std::move(m));
      ASSERT_TRUE(r) << r.error().to_string();
      inputs.insert(r.value().id.to_string());
    }
    p.close();
  }

  local_db db;
  counts n;
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) workers.emplace_back([&, w] { work(base_, 100 + w, db, n, stop); });

  // The verdict's reader: every output, through its own group, from the leaders.
  consumer::consumer_options co;
  co.connection = base_;
  co.connection.request_timeout = milliseconds(10000);
  co.group = "auditors";
  co.topics = {k_out};
  co.metadata_refresh = milliseconds(300);
  consumer::consumer reader(co);
  std::map<std::string, std::set<std::string>> outputs_of;                   // input id → output ids
  std::map<std::string, std::set<std::pair<std::uint32_t, std::uint64_t>>> positions;  // output id → positions
  auto read_some = [&] {
    auto r = reader.fetch(200, 200ms);
    if (!r) return;
    std::vector<consumer::delivery_ref> refs;
    for (auto& d : r.value()) {
      auto h = d.message.headers().find("input");
      const std::string input = h == d.message.headers().end() ? "" : h->second;
      outputs_of[input].insert(d.message.id());
      positions[d.message.id()].insert({d.message.partition(), d.message.offset()});
      refs.push_back(d.ref());
    }
    if (!refs.empty()) (void)reader.ack(refs);
  };
  auto all_covered = [&] {
    read_some();
    for (auto& i : inputs) {
      if (!outputs_of.contains(i)) return false;
    }
    return true;
  };

  // Kills at random moments while the workers run: the leader of a random partition of the
  // input (holds and acks) or of the output (homes and copies).
  std::mt19937 rng(1414);
  std::vector<std::string> kill_log;
  for (int k = 0; k < k_kills; ++k) {
    const char* topic = inputs_only || rng() % 2 ? k_in : k_out;
    const auto part = static_cast<std::int32_t>(rng() % k_partitions);
    const auto wait_until = std::chrono::steady_clock::now() + milliseconds(300 + rng() % 1500);
    while (std::chrono::steady_clock::now() < wait_until) read_some();
    auto v = cluster_->view(topic, part);
    ASSERT_TRUE(v && v->leader > 0) << logs();
    const int victim = static_cast<int>(v->leader);
    kill_log.push_back(std::string(topic) + "/" + std::to_string(part) + " leader " + std::to_string(victim));
    cluster_->broker(victim).kill();
    ASSERT_TRUE(eventually([&] {
      read_some();
      auto now = cluster_->view(topic, part);
      return now && now->leader > 0 && now->leader != victim;
    }, 20s)) << logs();
    cluster_->broker(victim).start();
    ASSERT_TRUE(eventually([&] { read_some(); return whole(); }, 40s)) << logs();
  }
  const bool complete = eventually(all_covered, 120s);
  // A while longer: an input processed twice, or a late copy, would show up now.
  const auto settle_until = std::chrono::steady_clock::now() + 3s;
  while (std::chrono::steady_clock::now() < settle_until) read_some();
  stop.store(true);
  for (auto& t : workers) t.join();
  for (int i = 0; i < 5; ++i) read_some();

  std::size_t missing = 0, doubled = 0, exposed = 0, two_positions = 0, outputs = 0;
  std::set<std::string> allowed_tx;
  {
    std::lock_guard lk(db.mu);
    for (auto& [txid, d] : db.decided) {
      if (d == producer::tx_decision::commit) allowed_tx.insert(txid);
    }
    for (auto& [input, outs] : outputs_of) {
      for (auto& o : outs) {
        ++outputs;
        auto t = db.output_tx.find(o);
        if (t == db.output_tx.end() || !allowed_tx.contains(t->second)) ++exposed;
      }
    }
  }
  for (auto& i : inputs) {
    auto it = outputs_of.find(i);
    if (it == outputs_of.end()) {
      ++missing;
    } else if (it->second.size() > 1) {
      ++doubled;
    }
  }
  for (auto& [id, pos] : positions) two_positions += pos.size() > 1 ? 1 : 0;
  const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - started);
  std::cout << "CLUSTER-FIGURES rpw: " << inputs.size() << " inputs, " << n.deliveries << " deliveries, transactions "
            << n.committed << " committed, " << n.rolled_back << " rolled back, " << n.prepare_failed
            << " prepares failed, " << n.end_failed << " EndTx errors, " << n.slow
            << " slower than the ack deadline; " << outputs << " visible outputs; missing " << missing
            << ", doubled " << doubled << ", rolled-back exposed " << exposed << ", at two positions "
            << two_positions << "; " << k_kills << " kills (";
  for (auto& k : kill_log) std::cout << k << "; ";
  std::cout << "); " << took.count() << " ms\n";
  EXPECT_TRUE(complete) << logs();
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(doubled, 0u);
  EXPECT_EQ(exposed, 0u);
  EXPECT_EQ(two_positions, 0u);
  EXPECT_GT(n.committed.load(), 10);
  EXPECT_GT(n.slow.load(), 0);
}

const std::string k_admin_token = "txmq_admin0123456789abcdef0123456789abcdef0123";
const std::string k_cluster_token = "txmq_cluster0123456789abcdef0123456789abcdef01";

class cluster_tx_rpw_secure_test : public cluster_tx_rpw_test {
 protected:
  void SetUp() override {
    if (!etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
    certs_.dir = std::filesystem::temp_directory_path() / ("txmq-rpw-tls-" + std::to_string(::getpid()));
    std::filesystem::remove_all(certs_.dir);
    std::filesystem::create_directories(certs_.dir);
    ASSERT_NO_FATAL_FAILURE(certs_.authority("ca", "txmq test CA"));
    ASSERT_NO_FATAL_FAILURE(certs_.leaf("server", "localhost", "DNS:localhost,IP:127.0.0.1"));
    std::ofstream(certs_.dir / "admin.token") << k_admin_token << "\n";
    std::ofstream(certs_.dir / "cluster.token") << k_cluster_token << "\n";
    cluster_ = std::make_unique<cluster_brokers>();
    cluster_->start(tx_test_flags({"--ack-deadline", "2s", "--retry-schedule", "200ms", "--max-attempts", "1000",
                                   "--auth", "--admin-token-file", certs_.path("admin.token"), "--cluster-token-file",
                                   certs_.path("cluster.token"), "--tls-cert-file", certs_.path("server.pem"),
                                   "--tls-key-file", certs_.path("server.key"), "--cluster-tls-ca-file",
                                   certs_.path("ca.pem")}));
    base_.tls.enabled = true;
    base_.tls.ca_file = certs_.path("ca.pem");
    base_.auth_token = k_admin_token;
    cluster_->set_client_options(base_);
    base_.address = cluster_->bootstrap();
  }
  void TearDown() override {
    cluster_.reset();
    std::error_code ec;
    std::filesystem::remove_all(certs_.dir, ec);
  }
  test_certificates certs_;
};

// Issue 14: read-process-write with TLS and auth on between brokers (and for the clients), the
// inputs' leaders SIGKILLed: every input once into a visible output.
TEST_F(cluster_tx_rpw_secure_test, every_input_once_with_tls_and_auth_across_input_leader_sigkills) {
  run(env_int("TXMQ_CLUSTER_KILLS", 3), env_int("TXMQ_RPW_INPUTS", 60), true);
}

}  // namespace
}  // namespace txmq::test
