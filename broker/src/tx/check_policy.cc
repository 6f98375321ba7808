#include "tx/check_policy.h"

#include <algorithm>

namespace txmq::broker {

check_schedule::check_schedule(std::vector<std::chrono::milliseconds> gaps, std::uint32_t max_checks)
    : gaps_(std::move(gaps)), max_checks_(std::max<std::uint32_t>(max_checks, 1)) {
  if (gaps_.empty()) gaps_.push_back(std::chrono::seconds(10));
}

std::chrono::milliseconds check_schedule::gap_after(std::uint32_t n) const {
  const std::size_t i = n == 0 ? 0 : std::min<std::size_t>(n - 1, gaps_.size() - 1);
  return gaps_[i];
}

check_schedule::decision check_schedule::undecided(std::uint32_t checks_before, std::int64_t now_ms) const {
  decision d;
  d.check_count = checks_before + 1;
  d.abandon = d.check_count >= max_checks_;
  if (!d.abandon) d.next_check_ms = now_ms + gap_after(d.check_count).count();
  return d;
}

producer_pool::producer_pool(std::uint32_t cap) : cap_(std::max<std::uint32_t>(cap, 1)) {}

void producer_pool::join(const std::string& group, std::uint64_t connection) {
  auto& g = groups_[group];
  if (std::find(g.members.begin(), g.members.end(), connection) == g.members.end()) g.members.push_back(connection);
}

void producer_pool::leave(const std::string& group, std::uint64_t connection) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return;
  auto& m = it->second.members;
  auto pos = std::find(m.begin(), m.end(), connection);
  if (pos == m.end()) return;
  const auto index = static_cast<std::size_t>(pos - m.begin());
  m.erase(pos);
  // Keep the rotation where it was: the member after the one that left is next.
  if (index < it->second.next) --it->second.next;
  if (it->second.next >= m.size()) it->second.next = 0;
  if (m.empty() && it->second.open == 0) groups_.erase(it);
}

bool producer_pool::has_producer(const std::string& group) const {
  auto it = groups_.find(group);
  return it != groups_.end() && !it->second.members.empty();
}

producer_pool::pick_result producer_pool::pick(const std::string& group) {
  auto it = groups_.find(group);
  if (it == groups_.end() || it->second.members.empty()) return {std::nullopt, refusal::no_producer};
  auto& g = it->second;
  if (g.open >= cap_) return {std::nullopt, refusal::at_cap};
  const auto c = g.members[g.next % g.members.size()];
  g.next = (g.next + 1) % g.members.size();
  ++g.open;
  return {c, refusal::none};
}

void producer_pool::release(const std::string& group) {
  auto it = groups_.find(group);
  if (it == groups_.end() || it->second.open == 0) return;
  --it->second.open;
  if (it->second.members.empty() && it->second.open == 0) groups_.erase(it);
}

std::uint32_t producer_pool::open(const std::string& group) const {
  auto it = groups_.find(group);
  return it == groups_.end() ? 0 : it->second.open;
}

}  // namespace txmq::broker
