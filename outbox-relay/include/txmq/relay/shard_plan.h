#pragma once

// Which outbox shards a relay should hold: the pure part of shard ownership, unit-tested on its
// own. The relay holds a shard by a session-level advisory lock (txmq_shard_lock_class, shard)
// and announces itself by a shared one (txmq_member_lock_class, 0); PostgreSQL drops both with
// the relay's connection, so a dead relay's shards are free at once and it stops being counted.

#include <cstdint>
#include <set>
#include <string_view>
#include <vector>

namespace txmq::relay {

// The two 32-bit keys of pg_advisory_lock(int, int); "txmq" and "txmr" in ASCII, unlikely to
// collide with an application's own advisory locks.
inline constexpr std::int32_t shard_lock_class = 0x74786d71;
inline constexpr std::int32_t member_lock_class = 0x74786d72;

// The most shards one of `live_relays` relays should hold: ceil(shards / live). With ceil the
// shares always cover every shard, and a relay above it gives shards up for a newcomer.
[[nodiscard]] int fair_share(int shards, int live_relays) noexcept;

struct shard_moves {
  std::vector<int> release;  // held shards to give up (the highest numbers)
  std::vector<int> acquire;  // free shards to try, in order, until the share is reached
};

// From what this relay holds, what every relay holds (held_by_anyone, from pg_locks) and the
// share, what to do. Free shards are tried starting at an offset made from relay_id, so that
// relays starting together do not all race for shard 0 first.
[[nodiscard]] shard_moves plan_moves(const std::set<int>& owned, const std::set<int>& held_by_anyone, int shards,
                                     int share, std::string_view relay_id);

}  // namespace txmq::relay
