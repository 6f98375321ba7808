#include "open_transactions.h"

#include <algorithm>
#include <charconv>

namespace txmq::relay::detail {
namespace {

// Epochs kept at most. One is added per read; they are dropped once the snapshot's xmin passes
// them, so only a transaction open for thousands of reads makes them pile up.
constexpr std::size_t k_max_epochs = 1024;

bool parse_xid(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::optional<pg_snapshot> parse_snapshot(std::string_view text) {
  const auto first = text.find(':');
  if (first == std::string_view::npos) return std::nullopt;
  const auto second = text.find(':', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  pg_snapshot s;
  if (!parse_xid(text.substr(0, first), s.xmin) || !parse_xid(text.substr(first + 1, second - first - 1), s.xmax)) {
    return std::nullopt;
  }
  if (s.xmin > s.xmax) return std::nullopt;
  std::string_view list = text.substr(second + 1);
  while (!list.empty()) {
    const auto comma = list.find(',');
    std::uint64_t x = 0;
    if (!parse_xid(list.substr(0, comma), x) || x < s.xmin || x >= s.xmax) return std::nullopt;
    s.xip.push_back(x);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
    if (list.empty()) return std::nullopt;  // a trailing comma
  }
  std::sort(s.xip.begin(), s.xip.end());
  return s;
}

bool in_progress(const pg_snapshot& s, std::uint64_t xid) {
  return xid >= s.xmax || std::binary_search(s.xip.begin(), s.xip.end(), xid);
}

std::int64_t open_transactions::bound_of(std::uint64_t xid) const {
  for (const auto& e : epochs_) {
    if (xid < e.end) return e.above;
  }
  return 0;  // not tracked: nothing known, so from the start
}

std::optional<std::int64_t> open_transactions::observe(const pg_snapshot& s, std::uint64_t assigned_after,
                                                       std::int64_t seq_before_xid) {
  // An xid assigned after the snapshot is at least its xmax; anything else is not one.
  assigned_after = std::max(assigned_after, s.xmax);
  std::optional<std::int64_t> floor;
  if (last_) {
    // The smallest xid that was running at the previous snapshot and is not now: its epoch's
    // bound is the lowest of all completed ones (bounds grow with the xid).
    std::optional<std::uint64_t> done;
    for (const std::uint64_t x : last_->xip) {
      if (!in_progress(s, x)) {
        done = x;
        break;
      }
    }
    // [xmax, assigned_after) of the previous snapshot: every xid there is running now unless it
    // is below the new xmax and not listed. At most |xip| + 1 steps.
    for (std::uint64_t x = last_->xmax; x < last_assigned_after_ && x < s.xmax && (!done || x < *done); ++x) {
      if (!std::binary_search(s.xip.begin(), s.xip.end(), x)) {
        done = x;
        break;
      }
    }
    if (done) floor = bound_of(*done);
  }
  // Xids first seen now (at or above the previous read's assigned_after) took their seqs after
  // it was assigned, so above the sequence's value read before; on the first read, anywhere.
  const std::int64_t above = last_ ? last_seq_before_xid_ : 0;
  if (epochs_.empty() || assigned_after > epochs_.back().end) epochs_.push_back({assigned_after, above});
  // Xids below xmin completed before this snapshot and are never looked up again.
  while (epochs_.size() > 1 && epochs_.front().end <= s.xmin) epochs_.pop_front();
  while (epochs_.size() > k_max_epochs) {
    // Merge the two oldest under the older (lower) bound: cautious, never wrong.
    epochs_[1].above = epochs_[0].above;
    epochs_.pop_front();
  }
  last_ = s;
  last_assigned_after_ = assigned_after;
  last_seq_before_xid_ = seq_before_xid;
  return floor;
}

}  // namespace txmq::relay::detail
