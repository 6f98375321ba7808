// A network that misbehaves without breaking TCP (issue 13 item 6, docs/operations.md "The
// network between clients and the broker fails"): the clients reach the broker through a TCP
// proxy in the test (tcp_proxy.h) that adds delay, stalls every link (nothing forwarded, the
// links stay up) and makes the open links half-open, one direction and then the other (bytes
// dropped, no FIN, no reset). A producer stream, a consumer and a transactional producer with
// its checker (client_workload.h) run through it. TCP keepalive cannot see these faults (the
// proxy's kernel acknowledges everything): the clients' dead_link_timeout (3 s) ends a session
// on which a request timed out with nothing received for that long, and they reconnect.
// Then: every acknowledged message is consumed, none invented; every transaction ends as its
// local transaction did, none published twice. Loopback only; no root needed. Each fault lasts
// TXMQ_FAULT_PROXY (default 5s).

#include <thread>

#include <gtest/gtest.h>

#include "broker_process.h"
#include "client_workload.h"
#include "eventually.h"
#include "fault_support.h"
#include "tcp_proxy.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;

// It was disabled for a while: the consumer fell behind in most runs. The cause was the proxy,
// not the clients: its sockets had Nagle on, so a Fetch answer written right behind an Ack
// answer waited ~40 ms for the consumer's delayed ACK, the consumer took ~100 messages a second
// against a ~400-a-second producer, and the backlog outlasted finish(). tcp_proxy_test holds that.
TEST(proxy_fault, delay_stall_and_half_open_links_lose_nothing_acknowledged_nor_decide_against_the_local_outcome) {
  const auto fault_for = fault_pause(5s, "TXMQ_FAULT_PROXY");
  broker_process broker({"--ack-deadline", "2s", "--retry-schedule", "200ms", "--max-attempts", "100000",
                         "--tx-timeout", "1s", "--tx-check-schedule", "500ms"});
  broker.start();
  tcp_proxy proxy("127.0.0.1", broker.port());

  client_workload clients(proxy.address(), "proxy");
  ASSERT_TRUE(eventually([&] { return clients.consumed() >= 300; }, 30s)) << broker.log();

  // Each fault: the produce stream must go on once it is over, and for stalls and half-open
  // links every client (3 connections) must have connected again.
  const auto after_fault = [&](const char* what, bool reconnects, int connects_before, std::size_t acked_before) {
    if (reconnects) {
      EXPECT_TRUE(eventually([&] { return clients.connects() >= connects_before + 3; }, 30s))
          << what << ": the clients did not reconnect (" << clients.connects() - connects_before
          << " new connections); the clients said:\n"
          << clients.log_tail();
    }
    EXPECT_TRUE(eventually([&] { return clients.acknowledged() >= acked_before + 200; }, 30s))
        << what << ": the produce stream did not resume (" << clients.acknowledged() - acked_before
        << " acknowledged since); the clients said:\n"
        << clients.log_tail();
  };

  // 1. 20 ms on every chunk each way: slower, nothing fails.
  auto connects = clients.connects();
  auto acked = clients.acknowledged();
  proxy.set_delay(20ms);
  after_fault("delay", false, connects, acked);
  proxy.set_delay(0ms);

  // 2. Every link stalls (new ones too), longer than dead_link_timeout; then flows again.
  connects = clients.connects();
  acked = clients.acknowledged();
  proxy.stall();
  std::this_thread::sleep_for(fault_for);  // the fault itself
  proxy.resume();
  after_fault("stall", true, connects, acked);

  // 3. The open links drop what the broker sends (requests arrive and are applied, answers are
  // lost); links made afterwards are healthy.
  connects = clients.connects();
  acked = clients.acknowledged();
  const auto half_open_to_client = proxy.half_open(tcp_proxy::direction::to_client);
  std::this_thread::sleep_for(fault_for);
  after_fault("half-open (broker to client)", true, connects, acked);

  // 4. The open links drop what the clients send.
  connects = clients.connects();
  acked = clients.acknowledged();
  const auto half_open_to_broker = proxy.half_open(tcp_proxy::direction::to_target);
  std::this_thread::sleep_for(fault_for);
  after_fault("half-open (client to broker)", true, connects, acked);

  // Read back directly from the broker, not through the proxy.
  const auto r = clients.finish(broker.address(), 60s);
  print_fault_counts("proxy_fault", r.acknowledged, r.consumed, r.lost, r.invented,
                     "fault_ms=" + std::to_string(fault_for.count()) + " links=" + std::to_string(proxy.links_accepted()) +
                         " half_open_links=" + std::to_string(half_open_to_client) + "+" +
                         std::to_string(half_open_to_broker) + " bytes_dropped=" + std::to_string(proxy.bytes_dropped()) +
                         " " + r.extra());
  EXPECT_GT(half_open_to_client, 0u);
  EXPECT_GT(half_open_to_broker, 0u);
  EXPECT_GT(proxy.bytes_dropped(), 0u);
  expect_nothing_lost_nor_decided_wrongly(r, clients.log_tail());
  EXPECT_EQ(broker.stop(), 0) << broker.log();
}

}  // namespace
}  // namespace txmq::test
