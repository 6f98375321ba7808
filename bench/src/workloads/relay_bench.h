#pragma once

// `txmq-bench relay`: the outbox route measured against sending straight to the broker, in the
// same run (docs/BENCHMARKS.md "Outbox relay"):
//   backlog  — N outbox rows already committed, then txmq-relay started: rows/s until empty;
//              beside it, the same N events sent by the application with the producer library.
//   latency  — outbox rows committed at a steady rate (one row per transaction), consumed by a
//              group: commit-to-consume p50/p99; beside it, the same rate sent straight to the
//              broker: send-to-consume.

#include <cstddef>
#include <string>

namespace txmq::bench {

struct relay_bench_options {
  std::string pg;                    // libpq conninfo of the database with (or for) the outbox
  std::string broker = "127.0.0.1:7878";
  std::string auth_token;          // --token, --token-file, TXMQ_TOKEN (a broker with auth)
  std::string relay;                 // path of txmq-relay (default: beside txmq-bench)
  std::size_t rows = 1'000'000;      // backlog rows
  std::size_t message_bytes = 256;
  double rate = 2000;                // latency: rows per second
  double seconds = 10;               // latency: measured time per run
  double warmup = 1;
  int batch = 500;                   // the relay's --batch
  int runs = 3;
  int broker_pid = 0;                // when set, the broker's CPU time per backlog row is reported
  bool json = false;
};

// Returns 0, or 1 when rows were lost or a step failed (the reason on stderr).
int run_relay_bench(const relay_bench_options& options);

// `txmq-bench relay [options]` (argv[0] is "relay"): parses the flags, prints --help, runs.
// Returns 2 for a usage error.
int relay_command(int argc, char** argv);

}  // namespace txmq::bench
