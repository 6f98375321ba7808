#pragma once

// The wire framing: each frame is a 4-byte big-endian length, then that many bytes of a
// serialized txmq.v1.Frame. Lengths are checked against the limit before any allocation.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "txmq/protocol/result.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::protocol {

inline constexpr std::size_t frame_header_bytes = 4;
// Before Hello succeeds a peer may send at most this much in one frame.
inline constexpr std::uint32_t pre_hello_max_frame_bytes = 64 * 1024;
inline constexpr std::uint32_t default_max_frame_bytes = 8 * 1024 * 1024;

// Decodes a length prefix. Errors: errc::frame_empty for 0, errc::frame_too_large when above
// max_frame_bytes. Never allocates.
[[nodiscard]] result<std::uint32_t> decode_frame_length(std::span<const std::byte, frame_header_bytes> header,
                                                        std::uint32_t max_frame_bytes) noexcept;

// Parses a frame body (without its length prefix). Error: errc::frame_malformed for bytes that
// are not a txmq.v1.Frame.
[[nodiscard]] result<v1::Frame> decode_frame_body(std::span<const std::byte> body);

// Appends length prefix + serialized frame to out. Errors (nothing is appended then):
// errc::frame_too_large when the serialized frame exceeds max_frame_bytes; errc::frame_empty
// for an all-default Frame, which serializes to zero bytes and so cannot be framed.
[[nodiscard]] result<void> encode_frame(const v1::Frame& frame, std::string& out,
                                        std::uint32_t max_frame_bytes = default_max_frame_bytes);

// Incremental decoder for a byte stream (tests, the CLI, and clients that read in chunks).
// Not thread-safe. After an error it stays failed: a stream with a bad frame cannot be resynced.
class frame_reader {
 public:
  explicit frame_reader(std::uint32_t max_frame_bytes = default_max_frame_bytes) noexcept
      : max_frame_bytes_(max_frame_bytes) {}

  void set_max_frame_bytes(std::uint32_t limit) noexcept { max_frame_bytes_ = limit; }
  // Appends received bytes. The buffer only ever holds one frame beyond what was consumed, as
  // next() validates the length before the body arrives.
  void feed(std::span<const std::byte> bytes);
  // The next complete frame, std::nullopt when more bytes are needed, or an error.
  [[nodiscard]] result<std::optional<v1::Frame>> next();
  // Call at end of stream: errc::frame_truncated if a partial frame is buffered.
  [[nodiscard]] result<void> finish() const;
  [[nodiscard]] std::size_t buffered() const noexcept { return buffer_.size() - consumed_; }

 private:
  std::uint32_t max_frame_bytes_;
  std::string buffer_;
  std::size_t consumed_ = 0;
  std::optional<error> failed_;
};

}  // namespace txmq::protocol
