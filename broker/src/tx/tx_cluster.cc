// Transactions in cluster mode (docs/cluster.md "Transactions"): the parts of the coordinator
// that only run with cluster hooks set. A transaction's record lives in its home partition's
// change sequence (replicated with the ISR gate, storage/src/rocksdb_store_tx_replica.cc); a
// COMMIT writes no message locally, and the home partition's leader copies each message into
// its partition once the outcome is on the home ISR, with the same ids (a copy replayed after
// a failover is deduplicated), then marks the record copied.

#include "tx/tx_coordinator.h"

#include <cstdlib>

#include "io_thread.h"
#include "txmq/common/log.h"

namespace txmq::broker {

using storage::tx_state;

namespace {
// A copy that failed (its partition's leader moved, replicas missing) is tried again after this.
constexpr auto k_copy_retry = std::chrono::milliseconds(500);
}  // namespace

std::chrono::milliseconds tx_coordinator::ack_hold() {
  static const std::chrono::milliseconds hold = [] {
    std::chrono::milliseconds h = k_ack_hold;
#ifdef TXMQ_FAULT_HOOKS
    // Lets a test see a hold run out (and be renewed) within seconds.
    if (const char* v = std::getenv("TXMQ_TEST_ACK_HOLD_MS"); v && std::atoll(v) > 0) {
      h = std::chrono::milliseconds(std::atoll(v));
      common::log::warn("TXMQ_TEST_ACK_HOLD_MS: transactions hold their input deliveries for ", h.count(), " ms");
    }
#endif
    return h;
  }();
  return hold;
}

void tx_coordinator::renew_holds() {
  if (!cluster_.settle_acks || !cluster_.owner) return;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_hold_renew_) return;
  next_hold_renew_ = now + ack_hold() / 4;
  std::vector<storage::tx_record> renew;
  auto led_here = [this](const storage::tx_record& rec) {
    return !rec.home_topic.empty() && !cluster_.owner(rec.home_topic, rec.home_partition);
  };
  // PREPARED ones, a page at a time from the store's index of unresolved transactions (no
  // resolved record is read).
  std::optional<storage::txid> after;
  for (;;) {
    auto page = store_.list_txs(tx_state::prepared, 1000, after);
    if (!page) {
      common::log::warn("renewing the holds of prepared transactions: reading them failed: ", page.error().message);
      break;
    }
    for (auto& rec : page.value()) {
      if (!rec.acks.empty() && led_here(rec)) renew.push_back(std::move(rec));
    }
    if (page.value().size() < 1000) break;
    after = page.value().back().id;
  }
  // COMMITs whose follow-up waits for a retry or for the outcome's gate: their acks are not
  // applied yet.
  for (auto& [id, rec] : uncopied_) {
    if (rec.state == tx_state::committed && !rec.acks.empty() && led_here(rec)) renew.push_back(rec);
  }
  for (auto& [id, change] : unconfirmed_) {
    auto rec = store_.find_tx(id);
    if (rec && rec.value() && rec.value()->state == tx_state::committed && !rec.value()->acks.empty() &&
        !rec.value()->copied && led_here(*rec.value())) {
      renew.push_back(std::move(*rec.value()));
    }
  }
  for (auto& rec : renew) {
    auto acks = std::make_shared<std::vector<storage::ack_ref>>(rec.acks);
    cluster_.settle_acks(settle_step::hold, rec.id, *acks, [id = rec.id, acks](result<std::vector<bool>> r) {
      // A failed renewal is tried again at the next one; a delivery no longer held by it was
      // settled (acked, released) or its hold ran out: the claim before a COMMIT decides then.
      if (!r) common::log::debug("tx ", id.to_string(), ": renewing its holds failed: ", r.error().message);
    });
  }
  if (!renew.empty()) common::log::debug("renewed the holds of ", renew.size(), " transaction(s)");
}

void tx_coordinator::respond_with(responder& c, std::uint64_t corr, v1::Error e) {
  v1::Frame out;
  out.set_correlation_id(corr);
  *out.mutable_error() = std::move(e);
  c.respond(std::move(out));
}

void tx_coordinator::start_copy(storage::tx_record rec) {
  if (!cluster_.copy || rec.copied) return;
  const bool committed = rec.state == storage::tx_state::committed;
  // A rolled-back record has something to do only when it holds deliveries (read-process-write).
  if (!committed && (rec.state != storage::tx_state::rolled_back || rec.acks.empty() || !cluster_.settle_acks)) return;
  if (!copying_.insert(rec.id).second) return;
  uncopied_.erase(rec.id);
  const storage::txid id = rec.id;
  auto keep = std::make_shared<storage::tx_record>(std::move(rec));
  auto finish = [this, id, keep](result<void> r) {
    copying_.erase(id);
    if (!r) {
      common::log::debug("tx ", id.to_string(), ": its follow-up (copies, acks, releases) failed (tried again): ",
                         r.error().message);
      uncopied_.emplace(id, std::move(*keep));
      return;
    }
    store_.mark_copied(id, on_io<std::optional<storage::group_change_ref>>(
                                   io_, [id](result<std::optional<storage::group_change_ref>> m) {
      // A lost mark only means the follow-up runs again (copies deduplicated by id, acks and
      // releases of the same attempt refused once done) under the next leader.
      if (!m) common::log::warn("tx ", id.to_string(), ": marking it copied failed: ", m.error().message);
    }));
    std::vector<std::string> topics;
    for (auto& m : keep->messages) {
      if (std::find(topics.begin(), topics.end(), m.topic()) == topics.end()) topics.push_back(m.topic());
    }
    if (groups_.wake && !topics.empty()) groups_.wake(topics, {});
  };
  // Read-process-write: the acks (COMMIT) or the releases (ROLLBACK), after the copies. A
  // delivery that is no longer in flight in its attempt was settled by an earlier try of this
  // same step (the hold kept it from anyone else): done.
  auto settle = [this, id, keep, committed, finish](result<void> r) {
    if (!r || keep->acks.empty() || !cluster_.settle_acks) return finish(std::move(r));
    cluster_.settle_acks(committed ? settle_step::ack : settle_step::release, id, keep->acks,
                         [id, keep, committed, finish](result<std::vector<bool>> s) {
      if (!s) return finish(s.error());
      for (std::size_t i = 0; i < keep->acks.size(); ++i) {
        if (s.value()[i]) continue;
        const auto& a = keep->acks[i];
        common::log::info("tx ", id.to_string(), ": ", committed ? "ack" : "release", " of ", a.topic, "/",
                          a.partition, "@", a.offset, " (attempt ", a.attempt, ") found it settled already");
      }
      finish(outcome::success());
    });
  };
  if (committed) return cluster_.copy(*keep, settle);
  settle(outcome::success());
}

void tx_coordinator::claim_in_cluster(const storage::tx_record& rec,
                                      std::function<void(result<std::optional<std::string>>)> then) {
  auto acks = std::make_shared<std::vector<storage::ack_ref>>(rec.acks);
  cluster_.settle_acks(settle_step::hold, rec.id, *acks, [acks, then = std::move(then)](result<std::vector<bool>> r) {
    if (!r) return then(r.error());
    for (std::size_t i = 0; i < acks->size(); ++i) {
      if (r.value()[i]) continue;
      const auto& a = (*acks)[i];
      return then(std::optional<std::string>(
          "it acks " + a.topic + "/" + std::to_string(a.partition) + "@" + std::to_string(a.offset) + " (attempt " +
          std::to_string(a.attempt) + "), which consumer group '" + a.group +
          "' no longer has in flight for it (its hold ran out, or it was settled); committing would publish its "
          "result twice"));
    }
    then(std::optional<std::string>{});
  });
}

void tx_coordinator::confirmed_commit(const storage::txid& id, const storage::group_change_ref& change, bool on_isr) {
  confirming_.erase(id);
  if (!on_isr) {
    unconfirmed_[id] = change;
    return;
  }
  unconfirmed_.erase(id);
  if (auto rec = store_.find_tx(id); rec && rec.value() && !rec.value()->copied) start_copy(*rec.value());
}

void tx_coordinator::retry_copies() {
  renew_holds();
  if ((uncopied_.empty() && unconfirmed_.empty()) || std::chrono::steady_clock::now() < next_copy_retry_) return;
  next_copy_retry_ = std::chrono::steady_clock::now() + k_copy_retry;
  // Commits whose outcome was not yet on the home ISR: the gate is asked again (taken out of
  // the map first: an answer may come at once and put one back).
  std::vector<std::pair<storage::txid, storage::group_change_ref>> recheck(unconfirmed_.begin(), unconfirmed_.end());
  unconfirmed_.clear();
  for (auto& [id, change] : recheck) {
    if (cluster_.owner && cluster_.owner(change.topic, change.partition)) continue;  // the new home leader copies it
    if (!cluster_.await || !confirming_.insert(id).second) continue;
    cluster_.await({change}, [this, id = id, change = change](result<void> g) { confirmed_commit(id, change, g.has_value()); });
  }
  std::vector<storage::tx_record> again;
  for (auto it = uncopied_.begin(); it != uncopied_.end();) {
    if (cluster_.owner && cluster_.owner(it->second.home_topic, it->second.home_partition)) {
      it = uncopied_.erase(it);  // no longer led here: the home's new leader copies it
      continue;
    }
    again.push_back(it->second);
    it = uncopied_.erase(it);
  }
  for (auto& rec : again) start_copy(std::move(rec));
}

void tx_coordinator::home_leadership(const std::string& topic, std::uint32_t partition, bool leading) {
  if (!leading) return;
  // Replicated due entries were not written by this coordinator: scan the whole index next.
  written_due_floor_ = 0;
  // Committed transactions of the partition whose copies may not have finished under the
  // previous leader, and rolled-back ones when read-process-write may have left holds to
  // release. Every resolved record is read (no index by home partition; resolved records go
  // after dedupe_window): tens of thousands of records, so on the admin-read worker, not the io
  // thread (docs/cluster.md "Leadership changes on the io thread"). What it finds joins
  // uncopied_ and is resumed by retry_copies, which first checks that this node still leads the
  // home partition. A record read here before a copy made meanwhile finished is copied again:
  // copies are deduplicated by message id, and acks or releases of a settled attempt are refused.
  const bool with_rolled_back = static_cast<bool>(cluster_.settle_acks);
  reads_.run<std::vector<storage::tx_record>>(
      [&store = store_, &reads = reads_, topic, partition, with_rolled_back]() -> result<std::vector<storage::tx_record>> {
        std::vector<storage::tx_record> found;
        for (auto state : {storage::tx_state::committed, storage::tx_state::rolled_back}) {
          if (state == storage::tx_state::rolled_back && !with_rolled_back) break;
          std::optional<storage::txid> after;
          for (;;) {
            if (reads.stopping()) return found;
            auto page = store.list_txs(state, 1000, after);
            if (!page) return page.error();
            for (auto& rec : page.value()) {
              if (rec.home_topic != topic || rec.home_partition != partition || rec.copied) continue;
              if (state == storage::tx_state::rolled_back && rec.acks.empty()) continue;
              found.push_back(std::move(rec));
            }
            if (page.value().size() < 1000) break;
            after = page.value().back().id;
          }
        }
        return found;
      },
      [this, topic, partition](result<std::vector<storage::tx_record>> r) {
        if (stopped_) return;
        if (!r) {
          common::log::error("reading resolved transactions of ", topic, "/", partition, " failed: ", r.error().message);
          return;
        }
        for (auto& rec : r.value()) uncopied_.emplace(rec.id, std::move(rec));
        next_copy_retry_ = {};
      });
}

}  // namespace txmq::broker
