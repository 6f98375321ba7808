#include "txmq/protocol/frame_codec.h"

#include <algorithm>
#include <climits>

#include "txmq/protocol/errc.h"

namespace txmq::protocol {
namespace {

// Consumed bytes are dropped from the front of the buffer once they are at least this many and
// at least half of it, so compaction costs O(1) amortized per byte.
constexpr std::size_t k_compact_min_bytes = 4096;

std::uint32_t load_be32(const std::byte* p) noexcept {
  return (std::to_integer<std::uint32_t>(p[0]) << 24) | (std::to_integer<std::uint32_t>(p[1]) << 16) |
         (std::to_integer<std::uint32_t>(p[2]) << 8) | std::to_integer<std::uint32_t>(p[3]);
}

void store_be32(char* p, std::uint32_t v) noexcept {
  p[0] = static_cast<char>(v >> 24);
  p[1] = static_cast<char>(v >> 16);
  p[2] = static_cast<char>(v >> 8);
  p[3] = static_cast<char>(v);
}

std::span<const std::byte, frame_header_bytes> header_at(const std::byte* p) noexcept {
  return std::span<const std::byte, frame_header_bytes>(p, frame_header_bytes);
}

}  // namespace

result<std::uint32_t> decode_frame_length(std::span<const std::byte, frame_header_bytes> header,
                                          std::uint32_t max_frame_bytes) noexcept {
  const std::uint32_t length = load_be32(header.data());
  if (length == 0) return errc::frame_empty;
  if (length > max_frame_bytes) return errc::frame_too_large;
  return length;
}

result<v1::Frame> decode_frame_body(std::span<const std::byte> body) {
  if (body.size() > static_cast<std::size_t>(INT_MAX)) return errc::frame_malformed;
  v1::Frame frame;
  if (!frame.ParseFromArray(body.data(), static_cast<int>(body.size()))) return errc::frame_malformed;
  return frame;
}

result<void> encode_frame(const v1::Frame& frame, std::string& out, std::uint32_t max_frame_bytes) {
  const std::size_t length = frame.ByteSizeLong();
  if (length > max_frame_bytes) return errc::frame_too_large;
  // An all-default Frame serializes to nothing, and a zero length is not a valid frame.
  if (length == 0) return errc::frame_empty;
  const std::size_t start = out.size();
  out.resize(start + frame_header_bytes + length);
  store_be32(out.data() + start, static_cast<std::uint32_t>(length));
  // ByteSizeLong() above cached the sizes, and nothing can change the frame in between.
  auto* begin = reinterpret_cast<std::uint8_t*>(out.data() + start + frame_header_bytes);
  const std::uint8_t* end = frame.SerializeWithCachedSizesToArray(begin);
  if (static_cast<std::size_t>(end - begin) != length) {
    out.resize(start);
    return errc::internal;
  }
  return outcome::success();
}

void frame_reader::feed(std::span<const std::byte> bytes) {
  if (failed_) return;
  if (consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  } else if (consumed_ >= k_compact_min_bytes && consumed_ * 2 >= buffer_.size()) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  // Complete the pending frame's header first, so that a bad length fails before its body
  // is copied into the buffer.
  if (buffered() < frame_header_bytes) {
    const std::size_t take = std::min(frame_header_bytes - buffered(), bytes.size());
    buffer_.append(reinterpret_cast<const char*>(bytes.data()), take);
    bytes = bytes.subspan(take);
    if (buffered() == frame_header_bytes) {
      auto length = decode_frame_length(header_at(reinterpret_cast<const std::byte*>(buffer_.data() + consumed_)),
                                        max_frame_bytes_);
      if (!length) {
        failed_ = length.error();
        buffer_ = std::string();
        consumed_ = 0;
        return;
      }
    }
  }
  buffer_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

result<std::optional<v1::Frame>> frame_reader::next() {
  if (failed_) return *failed_;
  if (buffered() < frame_header_bytes) return std::optional<v1::Frame>{};
  const auto* head = reinterpret_cast<const std::byte*>(buffer_.data() + consumed_);
  auto length = decode_frame_length(header_at(head), max_frame_bytes_);
  if (length) {
    if (buffered() - frame_header_bytes < length.value()) return std::optional<v1::Frame>{};
    auto frame = decode_frame_body({head + frame_header_bytes, length.value()});
    if (frame) {
      consumed_ += frame_header_bytes + length.value();
      if (consumed_ == buffer_.size()) {
        buffer_.clear();
        consumed_ = 0;
      }
      return std::optional<v1::Frame>(std::move(frame).value());
    }
    failed_ = frame.error();
  } else {
    failed_ = length.error();
  }
  buffer_ = std::string();
  consumed_ = 0;
  return *failed_;
}

result<void> frame_reader::finish() const {
  if (failed_) return *failed_;
  // Complete frames not yet taken by next() are fine; a partial one at the end is not.
  std::size_t pos = consumed_;
  while (pos < buffer_.size()) {
    const std::size_t left = buffer_.size() - pos;
    if (left < frame_header_bytes) return errc::frame_truncated;
    auto length =
        decode_frame_length(header_at(reinterpret_cast<const std::byte*>(buffer_.data() + pos)), max_frame_bytes_);
    if (!length) return length.error();
    if (left - frame_header_bytes < length.value()) return errc::frame_truncated;
    pos += frame_header_bytes + length.value();
  }
  return outcome::success();
}

}  // namespace txmq::protocol
