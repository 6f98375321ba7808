// The link between the clients and the broker cut and restored (issue 13 item 6,
// docs/operations.md "The network between clients and the broker fails"): the broker runs in a
// network namespace made by the test, joined by a veth pair; taking this side's link down
// drops every packet without a reset, as a pulled cable does. During a produce stream, a
// consume stream and a transactional producer (whose checker answers from its local
// decisions), the link goes down for TXMQ_FAULT_CUT (default 6s: longer than the clients'
// 3 s dead_link_timeout, so each client's connection fails and is made again) and comes back.
// Then: every acknowledged message is consumed, none invented; every transaction ends as its
// local transaction did (committed ones published once, rolled-back ones never). Needs root
// (ip netns); the namespace is removed even when the test fails.

#include <thread>

#include <gtest/gtest.h>

#include "broker_process.h"
#include "client_workload.h"
#include "eventually.h"
#include "fault_support.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;

std::chrono::milliseconds cut_length() { return fault_pause(6s, "TXMQ_FAULT_CUT"); }

TEST(link_cut, clients_reconnect_and_nothing_acknowledged_is_lost_nor_decided_against_its_local_outcome) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for ip netns";
  netns_link link;
  if (!link.ok()) GTEST_SKIP() << "cannot make a network namespace: " << link.error();
  const auto cut_for = cut_length();
  broker_process broker({"--insecure", "--ack-deadline", "2s", "--retry-schedule", "200ms", "--max-attempts", "100000",
                         "--tx-timeout", "1s", "--tx-check-schedule", "500ms"});
  broker.set_launch(link.exec_prefix(), link.inside_address());
  broker.start();

  // Producer, consumer and transactional producer with its checker (client_workload.h), all
  // with a 3 s dead_link_timeout: the cut outlasts it, so every client notices and reconnects.
  client_workload clients(broker.address(), "cut");
  ASSERT_TRUE(eventually([&] { return clients.consumed() >= 300; }, 30s)) << broker.log();
  const auto acked_before = clients.acknowledged();
  ASSERT_TRUE(link.cut());
  std::this_thread::sleep_for(cut_for);  // the fault itself: no packet passes for this long
  ASSERT_TRUE(link.restore());
  const bool resumed = eventually([&] { return clients.acknowledged() >= acked_before + 1000; }, 60s);
  const auto r = clients.finish(broker.address(), 60s);

  print_fault_counts("link_cut", r.acknowledged, r.consumed, r.lost, r.invented,
                     "cut_ms=" + std::to_string(cut_for.count()) + " " + r.extra());
  EXPECT_TRUE(resumed) << "the produce stream did not resume after the link came back";
  // Three connections (producer, consumer, transactional producer), each made again.
  EXPECT_GE(r.client_connects, 6);
  expect_nothing_lost_nor_decided_wrongly(r);
  EXPECT_EQ(broker.stop(), 0) << broker.log();
}

}  // namespace
}  // namespace txmq::test
