#pragma once

// Workloads against a running broker: publish with N messages in flight, publish at a steady
// rate, publish + consume end to end, and consume with acks from a backlog.

#include <cstdint>
#include <string>

namespace txmq::bench {

struct broker_bench_options {
  std::string workload;  // publish | rate | e2e | consume | fill
  std::string host = "127.0.0.1";
  std::uint16_t port = 7878;
  std::string topic = "bench";
  std::uint32_t partitions = 4;
  std::size_t message_bytes = 256;
  std::size_t in_flight = 1000;  // publish: messages in flight
  std::size_t batch = 100;       // publish: messages per produce request
  double rate = 10'000;          // rate, e2e: messages per second
  std::size_t backlog = 1'000'000;  // consume
  std::size_t connections = 1;
  double seconds = 5;
  double warmup = 1;
  int runs = 3;
  int broker_pid = 0;  // when set, the broker's resident memory and CPU time are reported
  bool json = false;
};

int run_broker_bench(const broker_bench_options& options);

}  // namespace txmq::bench
