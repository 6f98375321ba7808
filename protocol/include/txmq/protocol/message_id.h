#pragma once

// Message ids and transaction ids: 16 bytes, written as canonical UUID text
// ("01890a5d-ac96-774b-bcce-b302099a8057") wherever a person or a database sees them.
// Message ids are UUIDv7 (RFC 9562): a 48-bit Unix millisecond timestamp first, so ids made
// later sort later and index keys stay time-ordered; the libraries make txids UUIDv7 too.

#include <array>
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "txmq/protocol/result.h"

namespace txmq::protocol {

class uuid {
 public:
  static constexpr std::size_t size = 16;
  using bytes_type = std::array<std::uint8_t, size>;

  constexpr uuid() noexcept = default;
  constexpr explicit uuid(const bytes_type& b) noexcept : bytes_(b) {}

  // A new UUIDv7. Thread-safe. Ids made by one process are strictly increasing, even within
  // one millisecond (the 12-bit rand_a field is a counter seeded at random each millisecond).
  [[nodiscard]] static uuid make_v7();
  // A new random UUIDv4 (other clients' txids; the libraries make UUIDv7 ones). Thread-safe.
  [[nodiscard]] static uuid make_v4();

  // Canonical 36-character text, case-insensitive on input. Error: errc::bad_message_id.
  [[nodiscard]] static result<uuid> parse(std::string_view text);
  // Exactly 16 raw bytes (as carried in protobuf `bytes`). Error: errc::bad_message_id.
  [[nodiscard]] static result<uuid> from_bytes(std::string_view raw);

  [[nodiscard]] std::string to_string() const;  // lower-case canonical text
  [[nodiscard]] std::string_view raw() const noexcept {
    return {reinterpret_cast<const char*>(bytes_.data()), bytes_.size()};
  }
  [[nodiscard]] const bytes_type& bytes() const noexcept { return bytes_; }
  [[nodiscard]] bool is_nil() const noexcept { return *this == uuid{}; }
  [[nodiscard]] int version() const noexcept { return bytes_[6] >> 4; }
  // For UUIDv7: the Unix millisecond it was made at.
  [[nodiscard]] std::int64_t unix_ms() const noexcept;

  friend constexpr auto operator<=>(const uuid&, const uuid&) noexcept = default;

 private:
  bytes_type bytes_{};
};

using message_id = uuid;
using txid = uuid;

struct uuid_hash {
  std::size_t operator()(const uuid& u) const noexcept;
};

}  // namespace txmq::protocol
