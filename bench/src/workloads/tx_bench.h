#pragma once

// `txmq-bench tx`: transactional messages (docs/BENCHMARKS.md "Transactions"):
//   noop      Prepare (one message) + an empty local step + EndTx COMMIT, `in_flight`
//             transactions at a time over the wire: tx/s and Prepare-to-commit latency.
//   pg        the same with a real PostgreSQL local transaction per tx (a business row and the
//             barrier row of pg_transaction_checker), `threads` at a time through
//             producer-lib; beside it pgbench running the same two INSERTs per transaction.
//   recovery  `orphans` transactions prepared by a producer that went away (their first
//             checks found nobody); then a producer of the group connects: time until the
//             broker has settled all of them through check-backs.
//   rpw       read-process-write: `inputs` messages filled into an input topic, then `workers`
//             threads each fetch up to `batch` deliveries and commit one transaction of an output
//             per input plus the deliveries' acks: tx/s, inputs/s, Prepare-to-COMMIT latency.
//             Against a single broker or a cluster (bootstrap list; topics of `replicas`).

#include <cstddef>
#include <cstdint>
#include <string>

namespace txmq::bench {

struct tx_bench_options {
  std::string mode = "noop";
  std::string broker = "127.0.0.1:7878";
  std::string auth_token;          // --token, --token-file, TXMQ_TOKEN (a broker with auth)
  std::string pg;                  // pg mode: libpq connection string
  std::string pgbench = "/usr/lib/postgresql/15/bin/pgbench";
  std::size_t message_bytes = 256;
  std::size_t in_flight = 1000;    // noop
  std::size_t connections = 4;     // noop
  std::size_t threads = 32;        // pg
  std::size_t orphans = 10'000;    // recovery
  std::size_t workers = 4;         // rpw
  std::uint32_t batch = 10;        // rpw
  std::size_t inputs = 30'000;     // rpw
  std::size_t partitions = 3;      // rpw
  std::size_t replicas = 0;        // rpw
  // noop: the kind of txid the bench makes, "v7" (time-ordered, what the txmq libraries make) or
  // "v4" (random, what they made before issue #15's seventh round; other clients may still).
  std::string txid = "v7";
  double seconds = 5;
  double warmup = 1;
  int runs = 3;
  int broker_pid = 0;
  bool json = false;
  std::string latency_log;         // noop: per-transaction latencies of the last run, to a file
};

int run_tx_bench(const tx_bench_options& options);

// `txmq-bench tx [options]` (argv[0] is "tx"). Returns 2 for a usage error.
int tx_command(int argc, char** argv);

}  // namespace txmq::bench
