#include "txmq/protocol/message_id.h"

#include <chrono>
#include <cstring>
#include <mutex>
#include <random>

#include "txmq/protocol/errc.h"

namespace txmq::protocol {
namespace {

constexpr std::uint16_t k_counter_max = 0x0FFF;
// A fresh millisecond starts the counter in its lower half, so at least 2048 ids fit in a
// millisecond before we have to borrow the next one (RFC 9562 §6.2, counter rollover guard).
constexpr std::uint16_t k_counter_seed_mask = 0x07FF;

std::mt19937_64& thread_rng() {
  thread_local std::mt19937_64 rng = [] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }();
  return rng;
}

void fill_random(std::uint8_t* out, std::size_t n) {
  auto& rng = thread_rng();
  while (n > 0) {
    const std::uint64_t word = rng();
    const std::size_t take = n < sizeof(word) ? n : sizeof(word);
    std::memcpy(out, &word, take);
    out += take;
    n -= take;
  }
}

std::int64_t now_unix_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// The (millisecond, counter) pair that makes a process's v7 ids strictly increasing. The clock
// may stand still or step back; we then keep counting on the last millisecond we used.
class v7_sequence {
 public:
  struct stamp {
    std::int64_t ms;
    std::uint16_t counter;
  };

  stamp next(std::int64_t now_ms) {
    std::lock_guard lock(mutex_);
    if (now_ms > last_ms_) {
      last_ms_ = now_ms;
      counter_ = seed();
    } else if (counter_ < k_counter_max) {
      ++counter_;
    } else {
      ++last_ms_;
      counter_ = seed();
    }
    return {last_ms_, counter_};
  }

 private:
  static std::uint16_t seed() { return static_cast<std::uint16_t>(thread_rng()() & k_counter_seed_mask); }

  std::mutex mutex_;
  std::int64_t last_ms_ = -1;
  std::uint16_t counter_ = 0;
};

v7_sequence& process_sequence() {
  static v7_sequence seq;
  return seq;
}

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

constexpr bool is_dash_position(std::size_t i) noexcept { return i == 8 || i == 13 || i == 18 || i == 23; }

}  // namespace

uuid uuid::make_v7() {
  const auto [ms, counter] = process_sequence().next(now_unix_ms());
  bytes_type b{};
  fill_random(b.data() + 8, 8);
  const auto ts = static_cast<std::uint64_t>(ms);
  for (int i = 0; i < 6; ++i) {
    b[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(ts >> (8 * (5 - i)));
  }
  b[6] = static_cast<std::uint8_t>(0x70 | (counter >> 8));
  b[7] = static_cast<std::uint8_t>(counter & 0xFF);
  b[8] = static_cast<std::uint8_t>(0x80 | (b[8] & 0x3F));
  return uuid(b);
}

uuid uuid::make_v4() {
  bytes_type b{};
  fill_random(b.data(), b.size());
  b[6] = static_cast<std::uint8_t>(0x40 | (b[6] & 0x0F));
  b[8] = static_cast<std::uint8_t>(0x80 | (b[8] & 0x3F));
  return uuid(b);
}

result<uuid> uuid::parse(std::string_view text) {
  if (text.size() != 36) return errc::bad_message_id;
  bytes_type b{};
  std::size_t out = 0;
  for (std::size_t i = 0; i < text.size();) {
    if (is_dash_position(i)) {
      if (text[i] != '-') return errc::bad_message_id;
      ++i;
      continue;
    }
    // Dash positions are 8, 13, 18, 23: hex digits always come in pairs between them.
    const int hi = hex_value(text[i]);
    const int lo = hex_value(text[i + 1]);
    if (hi < 0 || lo < 0) return errc::bad_message_id;
    b[out++] = static_cast<std::uint8_t>((hi << 4) | lo);
    i += 2;
  }
  return uuid(b);
}

result<uuid> uuid::from_bytes(std::string_view raw) {
  if (raw.size() != size) return errc::bad_message_id;
  bytes_type b{};
  std::memcpy(b.data(), raw.data(), size);
  return uuid(b);
}

std::string uuid::to_string() const {
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string s;
  s.reserve(36);
  for (std::size_t i = 0; i < size; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s.push_back('-');
    s.push_back(k_hex[bytes_[i] >> 4]);
    s.push_back(k_hex[bytes_[i] & 0x0F]);
  }
  return s;
}

std::int64_t uuid::unix_ms() const noexcept {
  std::uint64_t ts = 0;
  for (std::size_t i = 0; i < 6; ++i) ts = (ts << 8) | bytes_[i];
  return static_cast<std::int64_t>(ts);
}

std::size_t uuid_hash::operator()(const uuid& u) const noexcept {
  std::uint64_t hi = 0;
  std::uint64_t lo = 0;
  std::memcpy(&hi, u.bytes().data(), 8);
  std::memcpy(&lo, u.bytes().data() + 8, 8);
  // v7 ids share their leading timestamp bytes; mixing both halves keeps buckets spread.
  return static_cast<std::size_t>(hi * 0x9E3779B97F4A7C15ULL ^ lo);
}

}  // namespace txmq::protocol
