#include "log_compression.h"

#include <lz4.h>

#include <algorithm>

namespace txmq::storage::detail {

double log_compression_sampler::lz4_ratio(std::string_view bytes, std::string& scratch) {
  if (bytes.empty()) return 1.0;
  const int in = static_cast<int>(bytes.size());
  scratch.resize(static_cast<std::size_t>(LZ4_compressBound(in)));
  const int out = LZ4_compress_default(bytes.data(), scratch.data(), in, static_cast<int>(scratch.size()));
  if (out <= 0) return 1.0;
  return std::min(1.0, static_cast<double>(out) / static_cast<double>(in));
}

std::optional<bool> log_compression_sampler::observe(std::string_view record, std::chrono::steady_clock::time_point now) {
  if (record.size() < s_.min_bytes) return std::nullopt;
  if (until_sample_ > 0) {
    --until_sample_;
    return std::nullopt;
  }
  until_sample_ = s_.every > 0 ? s_.every - 1 : 0;
  const double ratio = lz4_ratio(record.substr(0, s_.sample_bytes), scratch_);
  average_ = samples_ == 0 ? ratio : average_ + s_.weight * (ratio - average_);
  ++samples_;
  if (samples_ < s_.warmup_samples) return std::nullopt;
  const bool want = compressing_ ? average_ <= s_.off_above : average_ < s_.on_below;
  if (want == compressing_) return std::nullopt;
  if (last_switch_ && now - *last_switch_ < s_.min_interval) return std::nullopt;
  last_switch_ = now;
  compressing_ = want;
  return want;
}

}  // namespace txmq::storage::detail
