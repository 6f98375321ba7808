// The group snapshot pager with transactions in it (issue 14, docs/cluster.md "Snapshot paging",
// "Transactions"): a home partition holding many PREPARED and committed-but-not-copied
// transaction records (bodies of 1 KiB) under a 72 KiB max_frame_bytes, so its snapshot spans
// several pages. A follower of it is SIGKILLed, its disk wiped, and restarted: it refills from the
// leader, taking the snapshot page by page. Then it is made leader (the old leader SIGKILLed):
// it must check back and commit the PREPARED transactions homed there and copy every committed
// transaction's messages, including the ones whose copy the old leader could not finish (their
// second message goes to a replicas-1 partition whose only node was down). Verdict: every
// message of every transaction consumed once, from the leaders. Label `cluster`.

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "cluster_brokers.h"
#include "eventually.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/transaction.h"
#include "txmq/protocol/partitioner.h"

namespace txmq::test {
namespace {
using std::chrono::milliseconds;
using namespace std::chrono_literals;

constexpr int k_prepared = 80;
constexpr int k_committed = 80;

TEST(cluster_tx_snapshot_test, a_wiped_follower_pages_in_the_tx_records_and_as_leader_resolves_and_copies_them) {
  if (!etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
  cluster_brokers c;
  c.start(tx_test_flags({"--max-message-bytes", "8KiB", "--max-frame-bytes", "72KiB"}));
  std::string why;
  ASSERT_TRUE(c.create_topic("home", 1, 3, why)) << why;
  ASSERT_TRUE(c.create_topic("dest", 3, 1, why)) << why;
  const int leader = static_cast<int>(c.view("home")->leader);
  // A dest partition led by another node (X), and a key of it; the third node is the follower
  // that will be wiped.
  int x = 0;
  std::string dest_key;
  for (int i = 0; i < 100 && x == 0; ++i) {
    const std::string k = "d" + std::to_string(i);
    auto v = c.view("dest", static_cast<std::int32_t>(protocol::partition_for_key(k, 3)));
    if (v && v->leader > 0 && v->leader != leader) {
      x = static_cast<int>(v->leader);
      dest_key = k;
    }
  }
  ASSERT_GT(x, 0) << c.logs();
  const auto dest_partition = static_cast<std::int32_t>(protocol::partition_for_key(dest_key, 3));
  const int follower = 6 - leader - x;

  std::atomic<bool> decide{false};
  producer::transactional_producer_options o;
  o.connection.address = c.bootstrap();
  o.connection.producer_group = "snapshotters";
  o.connection.reconnect_backoff_max = 300ms;
  o.request_timeout = 20000ms;
  o.checker = [&decide](const producer::tx_check&) {
    return decide.load() ? producer::tx_decision::commit : producer::tx_decision::unknown;
  };
  producer::transactional_producer tp(std::move(o));
  std::set<std::string> want;  // every message id: all of them end up committed
  const std::string body(1024, 'b');
  auto make_tx = [&](int n) {
    auto tx = tp.begin();
    for (int i = 0; i < 2; ++i) {
      producer::outgoing_message m;
      m.topic = i == 0 ? "home" : "dest";
      m.key = i == 0 ? "h" + std::to_string(n) : dest_key;
      m.body = body;
      m.id = protocol::uuid::make_v7();
      want.insert(std::string(m.id->raw()));
      tx.add(std::move(m));
    }
    return tx;
  };
  // PREPARED, left to the check-back (unknown until `decide`).
  for (int n = 0; n < k_prepared; ++n) {
    auto tx = make_tx(n);
    auto p = tx.prepare();
    ASSERT_TRUE(p) << p.error().to_string() << c.logs();
  }
  // X down: dest's partition has no leader, so these commits cannot be copied there.
  c.broker(x).kill();
  ASSERT_TRUE(eventually([&] {
    auto v = c.view("dest", dest_partition, leader);
    auto h = c.view("home", 0, leader);
    return v && v->leader <= 0 && h && h->isr.size() == 2;
  }, 20s)) << c.logs();
  for (int n = k_prepared; n < k_prepared + k_committed; ++n) {
    auto tx = make_tx(n);
    auto p = tx.prepare();
    ASSERT_TRUE(p) << p.error().to_string() << c.logs();
    auto r = tx.commit();
    ASSERT_TRUE(r) << r.error().to_string() << c.logs();
  }
  // The follower wiped: it refills the log and takes the snapshot (the tx records) in pages.
  c.broker(follower).kill();
  // Out of the ISR first (its lease runs out), so that rejoining means refilling.
  ASSERT_TRUE(eventually([&] {
    auto h = c.view("home", 0, leader);
    return h && h->isr.size() == 1;
  }, 20s)) << c.logs();
  std::filesystem::remove_all(c.broker(follower).data_dir());
  std::filesystem::create_directories(c.broker(follower).data_dir());
  c.broker(follower).start();
  ASSERT_TRUE(eventually([&] {
    auto h = c.view("home", 0, leader);
    return h && h->isr.size() == 2 && std::find(h->isr.begin(), h->isr.end(), follower) != h->isr.end();
  }, 40s)) << "the wiped follower did not rejoin\n" << c.logs();
  int pages = 0;
  {
    std::istringstream in(c.broker(follower).log());
    const std::regex re("([0-9]+) page\\(s\\)");
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (std::regex_search(line, m, re)) pages = std::max(pages, std::stoi(m[1]));
    }
  }
  EXPECT_GE(pages, 2) << "the snapshot should span several pages\n" << c.broker(follower).log();
  // The old leader SIGKILLed: the wiped follower (in the ISR) leads the home partition.
  c.broker(leader).kill();
  ASSERT_TRUE(eventually([&] {
    auto h = c.view("home", 0, follower);
    return h && h->leader == follower;
  }, 30s)) << c.logs();
  decide.store(true);
  c.broker(x).start();
  c.broker(leader).start();
  ASSERT_TRUE(eventually([&] {
    auto h = c.view("home", 0, follower);
    auto d = c.view("dest", dest_partition, follower);
    return h && h->isr.size() == 3 && d && d->leader == x;
  }, 40s)) << c.logs();

  consumer::consumer_options co;
  co.connection.address = c.bootstrap();
  co.connection.request_timeout = milliseconds(10000);
  co.group = "auditors";
  co.topics = {"home", "dest"};
  co.metadata_refresh = milliseconds(300);
  consumer::consumer reader(co);
  std::map<std::string, int> seen;
  auto all = [&] {
    auto r = reader.fetch(500, 300ms);
    if (r) {
      std::vector<consumer::delivery_ref> refs;
      for (auto& d : r.value()) {
        if (d.message.attempt() <= 1) ++seen[d.message.id()];
        refs.push_back(d.ref());
      }
      if (!refs.empty()) (void)reader.ack(refs);
    }
    for (auto& id : want) {
      if (!seen.contains(id)) return false;
    }
    return true;
  };
  const bool complete = eventually(all, 90s);
  for (int i = 0; i < 5; ++i) (void)all();
  std::size_t missing = 0, doubled = 0;
  for (auto& id : want) missing += seen.contains(id) ? 0 : 1;
  for (auto& [id, n] : seen) doubled += n > 1 ? 1 : 0;
  std::cout << "CLUSTER-FIGURES tx snapshot: " << k_prepared << " prepared + " << k_committed
            << " committed-not-copied records, snapshot in " << pages << " pages; " << want.size() << " messages, "
            << seen.size() << " consumed, missing " << missing << ", doubled " << doubled << "; checks answered commit "
            << tp.checks_answered().commit << "\n";
  EXPECT_TRUE(complete) << c.logs();
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(doubled, 0u);
  tp.close();
}

}  // namespace
}  // namespace txmq::test
