#pragma once

// Whether the log family's table files are worth compressing: decided from the messages
// themselves, by compressing a sample of the log records the writer stores.
//
// Why (issue #15, docs/BENCHMARKS.md "Eleventh round: publish 100 per request"): at publish
// 100 per request a quarter of the broker's CPU is RocksDB's flush and compaction threads, and
// in some minutes most of that is the kernel's copy of every table file into page-cache pages
// (on the 2 vCPU VM a fresh page can cost far more than the copy). LZ4 makes compressible
// messages (text, JSON, the bench's bodies) several times smaller in every table file, but on
// incompressible ones (encrypted, already compressed) each flush and compaction pays for the
// attempt and keeps the block as it was: +11 % broker CPU per message in an A/B with LZ4
// always on, up to +40 % in single runs. Neither fixed setting is
// right for every topic mix, so the store watches what it is given and switches the log
// family's compression (RocksDB applies it to the files written from then on; each block
// records its own compression, so files of both kinds are read alike, also by older builds).

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace txmq::storage::detail {

class log_compression_sampler {
 public:
  struct settings {
    // One record in `every` is sampled (the first bytes of it, at most `sample_bytes`).
    std::size_t every = 32;
    std::size_t sample_bytes = 16 << 10;
    // Records smaller than this are not sampled (headers would dominate).
    std::size_t min_bytes = 1024;
    // Compressed size ÷ raw size, averaged over the samples: compress below `on_below`, stop
    // above `off_above` (apart, so a mix near the threshold does not flip the option back and
    // forth).
    double on_below = 0.6;
    double off_above = 0.8;
    // Weight of a new sample in the average.
    double weight = 0.25;
    // Samples seen before the first decision.
    int warmup_samples = 4;
    // The least time between two switches (each writes an OPTIONS file).
    std::chrono::steady_clock::duration min_interval = std::chrono::seconds(5);
  };

  log_compression_sampler() : log_compression_sampler(settings{}) {}
  explicit log_compression_sampler(settings s) : s_(s) {}

  // A log record about to be written. Returns the compression the log family should use from
  // now on when that changed (true: LZ4), nothing otherwise.
  std::optional<bool> observe(std::string_view record,
                              std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

  bool compressing() const { return compressing_; }
  double average_ratio() const { return average_; }
  // The compressed ÷ raw size of `bytes` with LZ4 (1 when it does not shrink).
  static double lz4_ratio(std::string_view bytes, std::string& scratch);

 private:
  settings s_;
  std::size_t until_sample_ = 0;
  int samples_ = 0;
  double average_ = 1.0;
  bool compressing_ = false;
  std::optional<std::chrono::steady_clock::time_point> last_switch_;
  std::string scratch_;
};

}  // namespace txmq::storage::detail
