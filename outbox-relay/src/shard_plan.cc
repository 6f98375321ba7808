#include "txmq/relay/shard_plan.h"

#include <functional>
#include <string>

namespace txmq::relay {

int fair_share(int shards, int live_relays) noexcept {
  if (shards <= 0) return 0;
  if (live_relays <= 1) return shards;
  return (shards + live_relays - 1) / live_relays;
}

shard_moves plan_moves(const std::set<int>& owned, const std::set<int>& held_by_anyone, int shards, int share,
                       std::string_view relay_id) {
  shard_moves moves;
  const int have = static_cast<int>(owned.size());
  if (have > share) {
    for (auto it = owned.rbegin(); it != owned.rend() && static_cast<int>(moves.release.size()) < have - share; ++it) {
      moves.release.push_back(*it);
    }
    return moves;
  }
  if (have == share || shards <= 0) return moves;
  const int start = static_cast<int>(std::hash<std::string_view>{}(relay_id) % static_cast<std::size_t>(shards));
  for (int i = 0; i < shards; ++i) {
    const int s = (start + i) % shards;
    if (!owned.contains(s) && !held_by_anyone.contains(s)) moves.acquire.push_back(s);
  }
  return moves;
}

}  // namespace txmq::relay
