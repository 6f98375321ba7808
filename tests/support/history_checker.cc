// The history checker (history_checker.h).

#include "history_checker.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <utility>

namespace txmq::test {

namespace {
std::string hex_tail(const std::string& id) {
  // Ids are often 16 raw bytes: print the last 6 as hex, enough to tell them apart in a report.
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::size_t i = id.size() > 6 ? id.size() - 6 : 0; i < id.size(); ++i) {
    const auto c = static_cast<unsigned char>(id[i]);
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}
}  // namespace

history::history(const history& other) {
  std::lock_guard lk(other.mu_);
  attempts_ = other.attempts_;
  reads_ = other.reads_;
  ack_positions_ = other.ack_positions_;
  retained_from_ = other.retained_from_;
}

void history::attempt(const std::string& id, const std::string& key, const std::string& body, std::uint64_t seq) {
  std::lock_guard lk(mu_);
  auto& a = attempts_[id];
  a.key = key;
  a.body = body;
  a.seq = seq;
}

void history::resolve(const std::string& id, attempt_outcome outcome) {
  std::lock_guard lk(mu_);
  auto& a = attempts_[id];
  if (a.outcome == attempt_outcome::acknowledged) return;
  if (outcome == attempt_outcome::unknown && a.outcome == attempt_outcome::failed) return;
  a.outcome = outcome;
}

std::optional<std::uint64_t> history::lowest_read(std::uint32_t partition) const {
  std::lock_guard lk(mu_);
  std::optional<std::uint64_t> low;
  for (const auto& r : reads_) {
    if (r.partition == partition && (!low || r.offset < *low)) low = r.offset;
  }
  return low;
}

void history::retained_from(std::uint32_t partition, std::uint64_t start) {
  std::lock_guard lk(mu_);
  retained_from_[partition] = start;
}

void history::acknowledged_at(const std::string& id, std::uint32_t partition, std::uint64_t offset) {
  std::lock_guard lk(mu_);
  auto& ids = ack_positions_[{partition, offset}];
  if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
}

void history::consumed(const std::string& id, const std::string& key, const std::string& body,
                       std::uint32_t partition, std::uint64_t offset) {
  std::lock_guard lk(mu_);
  reads_.push_back({id, key, body, partition, offset});
}

history_verdict history::check() const {
  std::lock_guard lk(mu_);
  history_verdict v;
  v.attempts = attempts_.size();
  for (auto& [id, a] : attempts_) {
    if (a.outcome == attempt_outcome::acknowledged) ++v.acknowledged;
    if (a.outcome == attempt_outcome::failed) ++v.failed;
    if (a.outcome == attempt_outcome::unknown) ++v.unknown;
  }
  v.consumed = reads_.size();
  // id → the distinct positions it was read at.
  std::map<std::string, std::set<std::pair<std::uint32_t, std::uint64_t>>> positions;
  std::set<std::string> invented;
  for (auto& r : reads_) {
    positions[r.id].insert({r.partition, r.offset});
    auto it = attempts_.find(r.id);
    std::string why;
    if (it == attempts_.end()) {
      why = "never produced";
    } else if (it->second.key != r.key || it->second.body != r.body) {
      why = "read with another key or body than produced";
    } else if (it->second.outcome == attempt_outcome::failed) {
      why = "its produce was refused";
    }
    if (!why.empty() && invented.insert(r.id).second) v.invented.push_back(hex_tail(r.id) + " (" + why + ")");
  }
  v.distinct_consumed = positions.size();
  for (auto& [id, at] : positions) {
    if (at.size() > 1) {
      std::ostringstream s;
      s << hex_tail(id) << " at";
      for (auto& [p, o] : at) s << " " << p << "@" << o;
      v.duplicated.push_back(s.str());
    }
  }
  // Acknowledged at a position retention removed since (retained_from): gone by design.
  std::set<std::string> retained_away;
  for (auto& [pos, ids] : ack_positions_) {
    auto r = retained_from_.find(pos.first);
    if (r != retained_from_.end() && pos.second < r->second) retained_away.insert(ids.begin(), ids.end());
  }
  v.retained_away = retained_away.size();
  for (auto& [id, a] : attempts_) {
    if (a.outcome == attempt_outcome::acknowledged && !positions.contains(id) && !retained_away.contains(id)) {
      v.lost.push_back(hex_tail(id) + " (key " + a.key + ", seq " + std::to_string(a.seq) + ")");
    }
  }
  // Acknowledged positions: one id each, and that id read there.
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::string> stored;  // position → id read there
  for (auto& r : reads_) stored.emplace(std::pair{r.partition, r.offset}, r.id);
  for (auto& [pos, ids] : ack_positions_) {
    const std::string where = std::to_string(pos.first) + "@" + std::to_string(pos.second);
    if (ids.size() > 1) {
      std::string s = where + " acknowledged for " + std::to_string(ids.size()) + " ids:";
      for (auto& id : ids) s += " " + hex_tail(id);
      v.misplaced.push_back(s);
      continue;
    }
    auto r = retained_from_.find(pos.first);
    if (r != retained_from_.end() && pos.second < r->second) continue;
    auto it = stored.find(pos);
    if (it != stored.end() && it->second != ids.front()) {
      v.misplaced.push_back(hex_tail(ids.front()) + " acknowledged at " + where + ", which holds " + hex_tail(it->second));
    } else if (it == stored.end() && positions.contains(ids.front())) {
      v.misplaced.push_back(hex_tail(ids.front()) + " acknowledged at " + where + ", read elsewhere");
    }
  }
  // Per key: acknowledged messages by their first stored position must have increasing seq.
  std::map<std::string, std::vector<std::pair<std::pair<std::uint32_t, std::uint64_t>, std::uint64_t>>> by_key;
  for (auto& [id, at] : positions) {
    auto it = attempts_.find(id);
    if (it == attempts_.end() || it->second.outcome != attempt_outcome::acknowledged) continue;
    by_key[it->second.key].push_back({*at.begin(), it->second.seq});
  }
  for (auto& [key, list] : by_key) {
    std::sort(list.begin(), list.end());
    for (std::size_t i = 1; i < list.size(); ++i) {
      if (list[i].second < list[i - 1].second) {
        v.order.push_back("key " + key + ": seq " + std::to_string(list[i - 1].second) + " stored before seq " +
                          std::to_string(list[i].second));
        break;
      }
    }
  }
  return v;
}

std::size_t history::times_consumed(const std::string& id) const {
  std::lock_guard lk(mu_);
  return static_cast<std::size_t>(std::count_if(reads_.begin(), reads_.end(), [&](const read_rec& r) { return r.id == id; }));
}

std::string history_verdict::summary() const {
  std::ostringstream s;
  s << "HISTORY attempts=" << attempts << " acknowledged=" << acknowledged << " failed=" << failed
    << " unknown=" << unknown << " consumed=" << consumed << " distinct=" << distinct_consumed << " retained_away=" << retained_away
    << " lost=" << lost.size() << " invented=" << invented.size() << " duplicated=" << duplicated.size()
    << " order_broken=" << order.size() << " misplaced=" << misplaced.size();
  auto examples = [&](const char* what, const std::vector<std::string>& list) {
    for (std::size_t i = 0; i < list.size() && i < 5; ++i) s << "\n  " << what << ": " << list[i];
  };
  examples("lost", lost);
  examples("invented", invented);
  examples("duplicated", duplicated);
  examples("order", order);
  examples("misplaced", misplaced);
  return s.str();
}

}  // namespace txmq::test
