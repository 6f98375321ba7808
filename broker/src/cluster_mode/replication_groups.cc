// Replication of consumer-group state, the leader's side (replication.h, docs/cluster.md
// "Consumer groups"): a partition's group changes travel in its own ReplicaFetch stream (same
// leader, ISR and epochs as its messages); an ack is answered once every ISR member reports
// the partition's group change sequence past it.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "cluster_mode/cluster_node.h"
#include "cluster_mode/replication.h"
#include "txmq/common/log.h"
#include "txmq/protocol/errc.h"

namespace txmq::broker::cluster_mode {

namespace {
// Changes per ReplicaFetch answer: each is small (one group's part of one update).
constexpr std::size_t k_max_group_changes = 2000;
}  // namespace

std::uint64_t replication::local_group_end(const std::string& topic, std::int32_t partition) const {
  if (!store_.has_topic(topic)) return 0;
  auto r = store_.group_changes(topic, static_cast<std::uint32_t>(partition), 0, 0);
  return r ? r.value().end : 0;
}

std::optional<std::uint64_t> replication::group_watermark(const key& k) const {
  // The same leadership, epoch and ISR conditions as the messages' high watermark.
  if (!high_watermark(k)) return std::nullopt;
  std::uint64_t hw = local_group_end(k.first, k.second);
  if (settings_.ack_before_replicas) return hw;
  const auto* e = entry_of(k);
  const auto& lp = leading_.at(k);
  for (auto m : e->state.isr) {
    if (m == node_.id()) continue;
    auto f = lp.followers.find(m);
    hw = std::min(hw, f == lp.followers.end() || !f->second.group_reported ? 0 : f->second.group_durable);
  }
  return hw;
}

void replication::await_group(std::vector<storage::group_change_ref> changes, std::function<void(result<void>)> done) {
  state_ = node_.snapshot();
  // One waiter per topic (waiters hold one topic each).
  std::map<std::string, std::vector<std::pair<std::int32_t, std::uint64_t>>> by_topic;
  for (auto& c : changes) {
    if (replicas_of(c.topic) <= 1) continue;  // nothing to replicate: the local fsync was all
    const key k{c.topic, static_cast<std::int32_t>(c.partition)};
    const auto* e = entry_of(k);
    if (!e || e->state.leader != node_.id()) {
      return done(error(protocol::errc::not_leader, "node " + std::to_string(node_.id()) + " no longer leads " + c.topic +
                                                        "/" + std::to_string(c.partition) +
                                                        ": the ack may be lost (the message is then redelivered)"));
    }
    by_topic[c.topic].emplace_back(k.second, c.end_seq);
  }
  if (by_topic.empty()) return done(outcome::success());
  // All topics' waits must pass: count them down.
  auto left = std::make_shared<std::size_t>(by_topic.size());
  auto first_error = std::make_shared<std::optional<error>>();
  auto shared_done = std::make_shared<std::function<void(result<void>)>>(std::move(done));
  for (auto& [topic, need] : by_topic) {
    std::set<std::int32_t> parts;
    for (auto& n : need) parts.insert(n.first);
    waiters_.push_back({topic, std::move(need), clock::now() + settings_.replication_timeout,
                        [left, first_error, shared_done](result<void> r) {
                          if (!r && !*first_error) *first_error = r.error();
                          if (--*left > 0) return;
                          if (*first_error) return (*shared_done)(**first_error);
                          (*shared_done)(outcome::success());
                        },
                        true});
    // Followers parked on these partitions take the change now.
    for (auto p : parts) wake_parked({topic, p}, true);
  }
  settle_waiters();
}

void replication::add_group_part(const v1::ReplicaFetchRequest& req, v1::ReplicaFetchResponse& resp,
                                 std::size_t budget) {
  if (req.group_snapshot()) return add_snapshot_page(req, resp);
  auto r = store_.group_changes(req.topic(), req.partition(), req.group_seq(), k_max_group_changes);
  if (!r) {
    common::log::warn("partition ", req.topic(), "/", req.partition(), ": reading group changes failed: ",
                      r.error().message);
    return;
  }
  resp.set_group_end(r.value().end);
  resp.set_group_snapshot_needed(r.value().snapshot_needed);
  // Half of an answer at most (the other half is the messages'; `budget` is the whole answer's,
  // less in a fetch session, fetch_session.h): changes past it come with the next fetch.
  const std::size_t half = std::max<std::size_t>(budget / 2, 2048);
  std::size_t bytes = 0;
  for (auto& c : r.value().changes) {
    bytes += c.ByteSizeLong() + 4;
    if (bytes > half && resp.group_changes_size() > 0) break;
    *resp.add_group_changes() = std::move(c);
  }
}

namespace {
#ifdef TXMQ_FAULT_HOOKS
// Test builds: TXMQ_TEST_GROUP_SNAPSHOT_DELAY_MS=N makes every group snapshot read take N ms
// longer (as a partition with a very large group state would), for cluster_retention_test.
void slow_snapshot_read_for_test() {
  static const long delay_ms = [] {
    const char* v = std::getenv("TXMQ_TEST_GROUP_SNAPSHOT_DELAY_MS");
    return v ? std::atol(v) : 0L;
  }();
  if (delay_ms <= 0) return;
  common::log::warn("TXMQ_TEST_GROUP_SNAPSHOT_DELAY_MS: reading a group snapshot ", delay_ms, " ms longer");
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
}
#endif
}  // namespace

void replication::start_group_snapshot(const std::shared_ptr<responder>& c, std::uint64_t corr,
                                       const v1::ReplicaFetchRequest& req) {
  const key k{req.topic(), static_cast<std::int32_t>(req.partition())};
  const auto* e = entry_of(k);
  if (!leading_.contains(k) || !e) return answer_fetch(c, corr, req);  // answers NOT_LEADER
  const std::int64_t epoch = e->state.leader_epoch;
  snapshot_reads_.run<v1::GroupSnapshot>(
      [&store = store_, topic = req.topic(), partition = req.partition()] {
#ifdef TXMQ_FAULT_HOOKS
        slow_snapshot_read_for_test();
#endif
        return store.group_snapshot(topic, partition);
      },
      [this, alive = alive_, c, corr, req, k, epoch](result<v1::GroupSnapshot> snap) {
        if (!*alive) return;
        const auto* now = entry_of(k);
        auto lp = leading_.find(k);
        if (lp == leading_.end() || !now || now->state.leader_epoch != epoch) {
          // Led no longer, or led again under another epoch since the read: its change
          // sequence may have been replaced meanwhile, so the follower starts over.
          return answer_fetch(c, corr, req);
        }
        if (!snap) {
          common::log::warn("partition ", k.first, "/", k.second, ": group snapshot failed: ", snap.error().message);
          lp->second.snapshots[req.node_id()].taken.reset();
        } else {
          lp->second.snapshots[req.node_id()].taken = std::make_shared<const v1::GroupSnapshot>(std::move(snap).value());
        }
        answer_fetch(c, corr, req);
      });
}

void replication::add_snapshot_page(const v1::ReplicaFetchRequest& req, v1::ReplicaFetchResponse& resp) {
  auto lp = leading_.find({req.topic(), static_cast<std::int32_t>(req.partition())});
  if (lp == leading_.end()) {
    resp.set_group_snapshot_needed(true);
    return;
  }
  auto& pages = lp->second.snapshots[req.node_id()];
  if (req.group_snapshot_from() == 0) {
    if (!pages.taken) {
      // A first page always comes through start_group_snapshot, which read it: a follower
      // asking again meanwhile finds it gone and starts over.
      resp.set_group_snapshot_needed(true);
      return;
    }
    pages.id = next_snapshot_id_++;
    pages.snapshot = std::move(pages.taken);
  } else if (!pages.snapshot || req.group_snapshot_id() != pages.id) {
    // Not the snapshot this node pages (a new leadership, or another follower task): from 0.
    resp.set_group_snapshot_needed(true);
    return;
  }
  const auto& snap = *pages.snapshot;
  resp.set_group_end(snap.next_seq());
  resp.set_group_snapshot_id(pages.id);
  auto* out = resp.mutable_group_snapshot();
  out->set_next_seq(snap.next_seq());
  // Items in order: per group its head (record, cursor), its deliveries, its dead letters, then
  // each transaction record;
  // group_snapshot_from counts the items already sent. A page takes items until the next one
  // would pass max_answer_bytes (at least one item: a single item is small).
  const std::size_t budget = std::max<std::size_t>(settings_.max_answer_bytes, 4096);
  std::size_t bytes = 64;
  std::uint64_t item = 0;
  const std::uint64_t from = req.group_snapshot_from();
  bool full = false;
  for (const auto& g : snap.groups()) {
    const std::uint64_t items = 1 + static_cast<std::uint64_t>(g.deliveries_size()) + static_cast<std::uint64_t>(g.dead_size());
    if (item + items <= from) {
      item += items;
      continue;
    }
    v1::GroupPartitionState* part = nullptr;
    auto take = [&](std::size_t size) {
      if (bytes + size > budget && bytes > 64) {
        full = true;
        return false;
      }
      bytes += size;
      if (!part) {
        // Every page's part of a group carries its record and cursor (installed once).
        part = out->add_groups();
        part->set_group(g.group());
        *part->mutable_topics() = g.topics();
        part->set_created_ms(g.created_ms());
        part->set_has_cursor(g.has_cursor());
        part->set_cursor_floor(g.cursor_floor());
        part->set_cursor_next(g.cursor_next());
      }
      return true;
    };
    if (item >= from && !take(64 + g.group().size())) break;
    ++item;
    for (const auto& d : g.deliveries()) {
      if (item++ < from) continue;
      if (!take(d.ByteSizeLong() + 4)) break;
      *part->add_deliveries() = d;
    }
    if (full) {
      --item;
      break;
    }
    for (const auto& d : g.dead()) {
      if (item++ < from) continue;
      if (!take(d.ByteSizeLong() + 4)) break;
      *part->add_dead() = d;
    }
    if (full) {
      --item;
      break;
    }
  }
  // Then the transactions homed in the partition (docs/cluster.md "Transactions"), one item
  // each, after every group's items.
  for (int i = 0; !full && i < snap.txs_size(); ++i) {
    if (item < from) {
      ++item;
      continue;
    }
    const auto size = snap.txs(i).size() + 4;
    if (bytes + size > budget && bytes > 64) {
      full = true;
      break;
    }
    bytes += size;
    out->add_txs(snap.txs(i));
    ++item;
  }
  resp.set_group_snapshot_next(full ? item : 0);
  if (!full) pages.snapshot.reset();  // the last page: the follower installs it now
}

}  // namespace txmq::broker::cluster_mode
