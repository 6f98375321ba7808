#pragma once

// `txmq-bench storage`: appends through the store's group committer with N requests in flight
// and reports throughput and latency, beside the raw append+fdatasync rate of the same disk.

#include <cstddef>
#include <filesystem>
#include <vector>

namespace txmq::bench {

struct storage_bench_options {
  std::vector<int> writers{1, 16, 256};
  double seconds = 5;
  double warmup = 1;
  int runs = 3;
  std::size_t message_bytes = 256;
  std::size_t messages_per_append = 1;
  std::uint32_t partitions = 4;
  std::filesystem::path dir;
  bool json = false;
};

int run_storage_bench(const storage_bench_options& options);

}  // namespace txmq::bench
