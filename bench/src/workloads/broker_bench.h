#pragma once

// Workloads against a running broker — txmq or one of its peers (peers/system_under_test.h):
// publish with N messages in flight, publish at a steady rate, publish + consume end to end,
// consume with acks from a backlog, and fill a backlog. The same loops, message bodies and latency
// recorder serve every system, so their figures compare.

#include <cstdint>
#include <string>
#include <vector>

#include "txmq/client/connection.h"

namespace txmq::bench {

struct broker_bench_options {
  std::string workload;  // publish | rate | e2e | consume | fill
  std::string system = "txmq";  // see known_systems()
  std::string label;             // printed instead of `system` when set
  // txmq, RabbitMQ, NATS: HOST:PORT; pgqueue: a libpq connection string.
  std::string address = "127.0.0.1:7878";
  client::tls_options tls;  // txmq: --tls, --tls-ca, --tls-cert, --tls-key
  std::string auth_token;  // txmq with auth: --token, --token-file or TXMQ_TOKEN
  std::string topic = "bench";  // prefix of the topic/queue/stream/table made for each run
  std::uint32_t partitions = 4;
  std::uint32_t replicas = 0;    // txmq cluster: replicas of the new topic (0: the broker default)
  std::size_t message_bytes = 256;
  // Bodies of pseudo-random bytes instead of one repeated byte: what compression makes of the
  // stored messages is then what it makes of encrypted or already compressed payloads.
  bool random_bodies = false;
  std::size_t in_flight = 1000;  // publish, consume's fill: messages in flight
  std::size_t batch = 100;       // publish: messages per request (txmq produce, SQL INSERT)
  double rate = 10'000;          // rate, e2e: messages per second
  std::size_t backlog = 1'000'000;  // consume, fill
  double seconds = 5;
  double warmup = 1;
  int runs = 3;
  // When set, the memory and CPU time of these processes (and their descendants), summed, are
  // reported: one broker, or every broker of a cluster (`--broker-pid 1,2,3`).
  std::vector<int> broker_pids;
  bool json = false;
  // rate, e2e: when set, every measured message's scheduled send time (steady clock, ns:
  // CLOCK_MONOTONIC on Linux, the clock of ftrace's "mono" and of perf) and its latency (ns) are
  // written to this file, one "send_ns latency_ns" line each, so slow messages can be lined up
  // in time with kernel and RocksDB events (issue #15, docs/BENCHMARKS.md "Ninth round").
  std::string latency_log;
};

// Runs the workload `runs` times, each on a new topic/queue/stream/table, and prints the
// medians (a table, or one JSON line). Returns 0, or 1 when any message was refused or lost.
int run_broker_bench(const broker_bench_options& options);

}  // namespace txmq::bench
