// The cluster's control plane against a real etcd (DESIGN.md §8, docs/cluster.md): nodes
// register on leases, one controller is elected and replaced when killed, partition state is
// written only by fenced transactions, a lost node's leaderships move to ISR members, a
// partition whose ISR is all down stays leaderless, and sessions come back after etcd is
// SIGKILLed and restarted. Nodes are cluster_node_child processes (the control plane without
// a broker), killed by PID. Label `cluster`. Prints CLUSTER-FIGURES lines with what it measured.

#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "broker_process.h"
#include "child_process.h"
#include "cluster_support.h"
#include "etcd_process.h"
#include "eventually.h"
#include "txmq/cluster/control_plane.h"
#include "txmq/cluster/errc.h"

namespace txmq::cluster {
namespace {
namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using test::eventually;
using test::run;

long long ms_since(steady_clock::time_point t0) {
  return std::chrono::duration_cast<milliseconds>(steady_clock::now() - t0).count();
}

class cluster_control_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
    etcd_.start();
    client_ = std::make_unique<etcd_client>(
        io_.get_executor(), etcd_options{{common::host_port{"127.0.0.1", etcd_.client_port()}}, milliseconds(2000)});
    dir_ = fs::temp_directory_path() / ("txmq-cluster-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    nodes_.clear();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void start_node(node_id id) {
    nodes_[id] = std::make_unique<test::child_process>(
        std::vector<std::string>{test::binary_path("cluster_node_child"), "--etcd", etcd_.url(), "--node-id",
                                 std::to_string(id), "--advertise", "127.0.0.1:" + std::to_string(7000 + id)},
        dir_ / ("node-" + std::to_string(id) + ".log"));
  }
  void kill_node(node_id id) { nodes_.at(id)->kill(); }
  void signal_node(node_id id, int sig) { ::kill(nodes_.at(id)->pid(), sig); }
  std::string node_log(node_id id) const {
    std::ifstream in(dir_ / ("node-" + std::to_string(id) + ".log"));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string logs() const {
    std::string out;
    for (const auto& [id, _] : nodes_) out += "--- node " + std::to_string(id) + "\n" + node_log(id);
    return out;
  }

  cluster_state state() {
    auto st = run(io_, read_cluster_state(*client_, keys_));
    if (!st) throw std::runtime_error(st.error().to_string());
    return std::move(st).value();
  }
  // Waits for `n` registered nodes and a controller among them.
  cluster_state wait_formed(std::size_t n) {
    cluster_state st;
    // Each node must also know it registered: under load a put can reach etcd while its answer
    // times out, and that node then has its key in etcd but no session of its own yet (it
    // registers again), so it has no session to lose when a test pauses etcd next.
    const bool formed = eventually([&] {
      st = state();
      if (st.nodes.size() != n || !st.controller.has_value()) return false;
      for (const auto& node : st.nodes)
        if (node_log(node.id).find("registered as") == std::string::npos) return false;
      return true;
    });
    EXPECT_TRUE(formed) << logs();
    return st;
  }
  // Creates the topic and waits until every partition has its state.
  cluster_state create(const std::string& topic, std::int32_t partitions, std::int32_t replicas) {
    const auto r = run(io_, create_topic(*client_, keys_, topic_config{topic, partitions, replicas}));
    EXPECT_TRUE(r) << r.error();
    cluster_state st;
    EXPECT_TRUE(eventually([&] {
      st = state();
      return std::count_if(st.partitions.begin(), st.partitions.end(),
                           [&](const auto& p) { return p.first.first == topic; }) == partitions;
    })) << logs();
    return st;
  }

  test::etcd_process etcd_;
  boost::asio::io_context io_;
  std::unique_ptr<etcd_client> client_;
  key_layout keys_{"txmq"};
  fs::path dir_;
  std::map<node_id, std::unique_ptr<test::child_process>> nodes_;
};

TEST_F(cluster_control_test, one_controller_is_elected_and_partitions_get_replicas_and_leaders) {
  for (node_id id : {1, 2, 3}) start_node(id);
  const auto formed = wait_formed(3);
  ASSERT_TRUE(formed.controller);
  for (const auto& n : formed.nodes) EXPECT_EQ(n.advertise, "127.0.0.1:" + std::to_string(7000 + n.id));
  const auto st = create("orders", 6, 3);
  std::map<node_id, int> leaders;
  for (const auto& [key, entry] : st.partitions) {
    const auto& s = entry.state;
    EXPECT_EQ(s.replicas.size(), 3u);
    EXPECT_EQ(s.isr, s.replicas);
    EXPECT_EQ(s.leader, s.replicas.front());
    EXPECT_EQ(s.leader_epoch, 1);
    ++leaders[s.leader];
  }
  EXPECT_EQ(leaders.size(), 3u) << "leaderships spread over the three nodes";
  // Exactly one node says it is the controller, and it is the one etcd names.
  const auto controller = formed.controller->id;
  EXPECT_TRUE(eventually([&] { return node_log(controller).find("is the controller") != std::string::npos; }));
  for (node_id id : {1, 2, 3}) {
    if (id == controller) continue;
    EXPECT_EQ(node_log(id).find("is the controller"), std::string::npos) << logs();
  }
}

TEST_F(cluster_control_test, a_sigkilled_controller_is_replaced_within_10s) {
  for (node_id id : {1, 2, 3}) start_node(id);
  wait_formed(3);
  std::vector<long long> failovers;
  for (int round = 0; round < 3; ++round) {
    const auto before = state();
    ASSERT_TRUE(before.controller);
    const auto old = before.controller->id;
    const auto t0 = steady_clock::now();
    kill_node(old);
    cluster_state after;
    ASSERT_TRUE(eventually([&] {
      after = state();
      return after.controller && after.controller->id != old;
    }, std::chrono::seconds(30))) << logs();
    const auto took = ms_since(t0);
    failovers.push_back(took);
    EXPECT_LT(took, 10000) << "new controller after " << took << " ms";
    EXPECT_EQ(after.nodes.size(), 2u) << "the killed node's key went with its lease";
    start_node(old);
    wait_formed(3);
  }
  std::sort(failovers.begin(), failovers.end());
  std::cout << "CLUSTER-FIGURES controller_failover_ms min=" << failovers.front() << " p50=" << failovers[1]
            << " max=" << failovers.back() << " (node_lease_ttl 5s, 3 SIGKILLs)\n";
}

TEST_F(cluster_control_test, a_stale_controller_cannot_overwrite_partition_state) {
  // Two controllers in turn, driven by hand: the first loses its lease (as a controller cut off
  // from etcd or paused past its TTL would), the second takes over; the first's late writes
  // are refused by etcd, whatever revision it read.
  auto& c = *client_;
  const auto lease_a = run(io_, c.lease_grant(std::chrono::seconds(30))).value().id;
  const auto term_a = run(io_, campaign(c, keys_, 1, lease_a));
  ASSERT_TRUE(term_a && term_a.value()) << "node 1 wins an empty election";
  const partition_state s1{1, 1, {1, 2}, {1, 2}};
  const auto created = run(io_, write_partition_state(c, keys_, "t", 0, s1, 0, term_a.value()->create_revision));
  ASSERT_TRUE(created) << created.error();
  const auto lease_b = run(io_, c.lease_grant(std::chrono::seconds(30))).value().id;
  const auto blocked = run(io_, campaign(c, keys_, 2, lease_b));
  ASSERT_TRUE(blocked);
  EXPECT_FALSE(blocked.value()) << "no second controller while the first holds the key";

  ASSERT_TRUE(run(io_, c.lease_revoke(lease_a)));
  const auto term_b = run(io_, campaign(c, keys_, 2, lease_b));
  ASSERT_TRUE(term_b && term_b.value());
  EXPECT_GT(term_b.value()->create_revision, term_a.value()->create_revision);

  // The stale controller writes with the right partition revision: refused as not_controller.
  const partition_state stale{2, 2, {1, 2}, {2}};
  const auto refused = run(io_, write_partition_state(c, keys_, "t", 0, stale, created.value(),
                                                      term_a.value()->create_revision));
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().is(errc::not_controller)) << refused.error();
  EXPECT_EQ(state().partitions.at({"t", 0}).state, s1) << "the stale write changed nothing";

  // The new controller's write based on the state it read goes through; one based on a state
  // that changed since is refused as compare_failed.
  const partition_state s2{2, 2, {1, 2}, {2}};
  const auto written = run(io_, write_partition_state(c, keys_, "t", 0, s2, created.value(),
                                                      term_b.value()->create_revision));
  ASSERT_TRUE(written) << written.error();
  const auto late = run(io_, write_partition_state(c, keys_, "t", 0, s1, created.value(),
                                                   term_b.value()->create_revision));
  ASSERT_FALSE(late);
  EXPECT_TRUE(late.error().is(errc::compare_failed)) << late.error();
  EXPECT_EQ(state().partitions.at({"t", 0}).state, s2);
}

TEST_F(cluster_control_test, a_lost_nodes_leaderships_move_to_isr_members_and_a_lone_replica_is_never_replaced) {
  for (node_id id : {1, 2, 3}) start_node(id);
  const auto formed = wait_formed(3);
  const auto controller = formed.controller->id;
  const auto st = create("orders", 3, 3);
  // A partition led by a node that is not the controller: its loss is a pure node loss.
  std::pair<std::string, std::int32_t> key;
  partition_state before;
  for (const auto& [k, e] : st.partitions)
    if (e.state.leader != controller) {
      key = k;
      before = e.state;
      break;
    }
  ASSERT_NE(before.leader, k_no_leader);
  const auto victim = before.leader;
  // A single-replica topic on the victim: its loss must leave that partition without a leader.
  partition_state solo_before;
  std::int32_t solo_p = -1;
  const auto with_solo = create("solo", 3, 1);
  for (const auto& [k, e] : with_solo.partitions)
    if (k.first == "solo" && e.state.leader == victim) {
      solo_p = k.second;
      solo_before = e.state;
    }
  ASSERT_GE(solo_p, 0) << "three single-replica partitions spread over three nodes";

  const auto t0 = steady_clock::now();
  kill_node(victim);
  partition_state after;
  ASSERT_TRUE(eventually([&] {
    after = state().partitions.at(key).state;
    return after.leader != victim;
  }, std::chrono::seconds(30))) << logs();
  const auto took = ms_since(t0);
  EXPECT_LT(took, 10000);
  EXPECT_NE(after.leader, k_no_leader);
  EXPECT_TRUE(std::find(before.isr.begin(), before.isr.end(), after.leader) != before.isr.end());
  EXPECT_EQ(after.leader_epoch, before.leader_epoch + 1);
  EXPECT_TRUE(std::find(after.isr.begin(), after.isr.end(), victim) == after.isr.end());
  std::cout << "CLUSTER-FIGURES leader_moved_after_node_kill_ms=" << took << " (node_lease_ttl 5s)\n";

  partition_state solo_after;
  ASSERT_TRUE(eventually([&] {
    solo_after = state().partitions.at({"solo", solo_p}).state;
    return solo_after.leader == k_no_leader;
  })) << logs();
  EXPECT_EQ(solo_after.isr, std::vector<node_id>{victim}) << "no unclean election: the ISR is kept";
  EXPECT_EQ(solo_after.leader_epoch, solo_before.leader_epoch + 1);
  EXPECT_EQ(state().leaderless().size(), 1u);
  EXPECT_TRUE(eventually([&] { return logs().find("solo/" + std::to_string(solo_p) + " has no leader") != std::string::npos; }))
      << logs();

  // The lone replica returns: it leads its partition again, with a new epoch.
  start_node(victim);
  ASSERT_TRUE(eventually([&] { return state().partitions.at({"solo", solo_p}).state.leader == victim; })) << logs();
  EXPECT_EQ(state().partitions.at({"solo", solo_p}).state.leader_epoch, solo_before.leader_epoch + 2);
  EXPECT_TRUE(state().leaderless().empty());
}

TEST_F(cluster_control_test, sessions_come_back_after_etcd_is_sigkilled_and_restarted) {
  for (node_id id : {1, 2, 3}) start_node(id);
  wait_formed(3);
  create("orders", 3, 3);
  // The leases of the sessions before the outage: etcd restores them (with a fresh TTL) when it
  // restarts, so their keys alone would look like live sessions. The nodes must make new ones.
  std::set<std::int64_t> old_leases;
  const auto before = run(io_, client_->range(keys_.nodes_prefix(), prefix_end(keys_.nodes_prefix())));
  ASSERT_TRUE(before) << before.error();
  for (const auto& kv : before.value().kvs) old_leases.insert(kv.lease);
  ASSERT_EQ(old_leases.size(), 3u);
  etcd_.kill();
  // Down longer than the lease TTL: every node must give its session up by itself.
  ASSERT_TRUE(eventually([&] {
    for (node_id id : {1, 2, 3})
      if (node_log(id).find("lost its session") == std::string::npos) return false;
    return true;
  }, std::chrono::seconds(30))) << logs();
  const auto t0 = steady_clock::now();
  etcd_.start();
  const auto healthy = ms_since(t0);
  cluster_state st;
  ASSERT_TRUE(eventually([&] {
    const auto nodes = run(io_, client_->range(keys_.nodes_prefix(), prefix_end(keys_.nodes_prefix())));
    if (!nodes || nodes.value().kvs.size() != 3) return false;
    for (const auto& kv : nodes.value().kvs)
      if (old_leases.contains(kv.lease)) return false;
    st = state();
    if (!st.controller || old_leases.contains(st.controller->lease)) return false;
    std::set<node_id> live;
    for (const auto& n : st.nodes) live.insert(n.id);
    if (!live.contains(st.controller->id)) return false;
    for (const auto& [k, e] : st.partitions)
      if (!live.contains(e.state.leader)) return false;
    return true;
  }, std::chrono::seconds(30))) << logs();
  const auto took = ms_since(t0);
  EXPECT_LT(took - healthy, 10000) << "every session and partition back within 10 s of etcd's return";
  EXPECT_EQ(st.partitions.size(), 3u);
  std::cout << "CLUSTER-FIGURES etcd_restart_sessions_back_ms=" << took << " from etcd's start, " << took - healthy
            << " after it answered /health\n";
}

TEST_F(cluster_control_test, sessions_end_while_etcd_hangs_and_come_back_when_it_resumes) {
  // etcd SIGSTOPped: connections stay open and nothing answers, so only the nodes' own request
  // deadlines tell them; they must still give their sessions up before their leases could have
  // expired, and resume when etcd does.
  for (node_id id : {1, 2, 3}) start_node(id);
  const auto formed = wait_formed(3);
  const auto t0 = steady_clock::now();
  etcd_.pause();
  const bool all_lost = eventually([&] {
    for (node_id id : {1, 2, 3})
      if (node_log(id).find("lost its session") == std::string::npos) return false;
    return true;
  }, std::chrono::seconds(30));
  const auto gave_up = ms_since(t0);
  etcd_.resume();
  ASSERT_TRUE(all_lost) << logs();
  // Every node ends its session by itself within the lease TTL (5 s) of its last renewal.
  EXPECT_LT(gave_up, 6000);
  EXPECT_TRUE(node_log(formed.controller->id).find("steps down as controller") != std::string::npos) << logs();
  const auto t1 = steady_clock::now();
  ASSERT_TRUE(eventually([&] {
    const auto st = state();
    return st.nodes.size() == 3 && st.controller.has_value();
  }, std::chrono::seconds(30))) << logs();
  const auto back = ms_since(t1);
  EXPECT_LT(back, 10000);
  std::cout << "CLUSTER-FIGURES etcd_hung_sessions_given_up_ms=" << gave_up << " back_after_sigcont_ms=" << back
            << "\n";
}

TEST_F(cluster_control_test, a_controller_paused_past_its_lease_is_replaced_and_steps_down_when_it_resumes) {
  for (node_id id : {1, 2, 3}) start_node(id);
  const auto formed = wait_formed(3);
  create("orders", 3, 3);
  const auto zombie = formed.controller->id;
  const auto old_term = formed.controller->create_revision;
  const auto t0 = steady_clock::now();
  signal_node(zombie, SIGSTOP);
  cluster_state st;
  ASSERT_TRUE(eventually([&] {
    st = state();
    return st.controller && st.controller->id != zombie;
  }, std::chrono::seconds(30))) << logs();
  const auto took = ms_since(t0);
  EXPECT_LT(took, 10000);
  const auto successor = *st.controller;
  EXPECT_GT(successor.create_revision, old_term);
  // While it sleeps, its leaderships move away and it leaves every ISR.
  ASSERT_TRUE(eventually([&] {
    st = state();
    for (const auto& [k, e] : st.partitions)
      if (e.state.leader == zombie || std::find(e.state.isr.begin(), e.state.isr.end(), zombie) != e.state.isr.end())
        return false;
    return true;
  })) << logs();
  signal_node(zombie, SIGCONT);
  // Awake, it finds its term over (its writes would be refused, its lease is gone): it steps down
  // and comes back as an ordinary node with a new session; the successor stays controller.
  ASSERT_TRUE(eventually([&] { return node_log(zombie).find("steps down as controller") != std::string::npos; }))
      << logs();
  ASSERT_TRUE(eventually([&] { return state().nodes.size() == 3; })) << logs();
  st = state();
  ASSERT_TRUE(st.controller);
  EXPECT_EQ(st.controller->id, successor.id);
  EXPECT_EQ(st.controller->create_revision, successor.create_revision);
  std::cout << "CLUSTER-FIGURES paused_controller_replaced_ms=" << took << " (SIGSTOP, node_lease_ttl 5s)\n";
}

}  // namespace
}  // namespace txmq::cluster
