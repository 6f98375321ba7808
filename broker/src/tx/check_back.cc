// The check-back scheduler: which producer connections can be asked, the scans of the due
// index, the per-group backlogs under tx_checks_in_flight, CheckTx and its answers, and the
// undecided checks recorded on the schedule (ABANDONED after tx_max_checks).

#include "tx/tx_coordinator.h"

#include <algorithm>
#include <limits>
#include <set>

#include "broker_metrics.h"
#include "io_thread.h"
#include "txmq/common/log.h"

namespace txmq::broker {

namespace asio = boost::asio;
using storage::resolver;
using storage::tx_outcome;
using storage::tx_state;

// ---- connections ----------------------------------------------------------------------------

void tx_coordinator::connection_opened(const std::shared_ptr<responder>& c) {
  if (c->producer_group().empty()) return;
  producers_[c->id()] = c;
  pool_.join(c->producer_group(), c->id());
  if (auto o = orphaned_.find(c->producer_group()); o != orphaned_.end()) {
    auto& queue = returning_[c->producer_group()];
    queue.insert(queue.end(), o->second.begin(), o->second.end());
    common::log::info("producer group '", c->producer_group(), "' is back: asking about ", o->second.size(),
              " transactions whose checks found no producer");
    orphaned_.erase(o);
  }
  pump(c->producer_group());
}

void tx_coordinator::connection_closed(responder& c) {
  if (c.producer_group().empty()) return;
  pool_.leave(c.producer_group(), c.id());
  producers_.erase(c.id());
  std::vector<undecided_check> lost;
  for (auto it = open_.begin(); it != open_.end();) {
    if (it->second.connection != c.id()) {
      ++it;
      continue;
    }
    // No answer will come: the check did not decide, as if it had timed out.
    lost.push_back({it->second.id, it->second.checks_before, "lost"});
    pool_.release(it->second.group);
    it = open_.erase(it);
  }
  if (stopped_) {
    // Shutting down: they stay due in the store and are asked again after the restart.
    for (auto& l : lost) busy_.erase(l.id);
    return;
  }
  record(std::move(lost));
  // Not from here: this may run inside pump() (a send that overflowed the connection's queue).
  asio::post(io_, [this, group = c.producer_group()] { pump(group); });
}

// ---- check-back -----------------------------------------------------------------------------

void tx_coordinator::count_check(const char* result) {
  if (!metrics_) return;
  metrics_->registry.add_counter("txmq_tx_checks_total", "Check-backs, by what came of them", {{"result", result}}).inc();
}

void tx_coordinator::on_tick() {
  if (stopped_) return;
  const auto steady = std::chrono::steady_clock::now();
  std::vector<undecided_check> undecided;
  std::set<std::string> freed;
  for (auto it = open_.begin(); it != open_.end();) {
    if (it->second.deadline > steady) {
      ++it;
      continue;
    }
    common::log::debug("no answer to the check of tx ", it->second.id.to_string(), " within ",
               settings_.answer_timeout.count(), " ms");
    undecided.push_back({it->second.id, it->second.checks_before, "timeout"});
    pool_.release(it->second.group);
    freed.insert(it->second.group);
    it = open_.erase(it);
  }
  if (steady >= next_scan_) {
    scan(now_ms(), undecided);
  } else {
    for (auto& g : freed) pump(g);
  }
  record(std::move(undecided));
  retry_copies();
  timer_.expires_after(settings_.scan_interval);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) on_tick();
  });
}

void tx_coordinator::scan(std::int64_t now, std::vector<undecided_check>& undecided) {
  const auto started = std::chrono::steady_clock::now();
  const bool full = started >= next_full_scan_;
  // Index writes completed from here on are after this scan's read: the next scan covers them.
  const std::int64_t from = full ? 0 : std::min(scan_from_ms_, written_due_floor_);
  written_due_floor_ = std::numeric_limits<std::int64_t>::max();
  auto due = store_.due_checks(now, settings_.scan_limit, from);
  if (!due) {
    common::log::error("reading the due transaction checks failed: ", due.error().message);
    next_scan_ = started + std::chrono::seconds(1);
    written_due_floor_ = std::min(written_due_floor_, from);  // read again from there
    return;
  }
  // What was returned stays in the index until it is resolved or re-scheduled; nothing else
  // is due before now (a longer list than scan_limit continues after what it returned), and
  // what is written from now on lowers written_due_floor_.
  std::int64_t earliest = now;
  for (const auto& rec : due.value()) earliest = std::min(earliest, rec.next_check_ms);
  scan_from_ms_ = earliest;
  if (full) next_full_scan_ = started + std::chrono::minutes(1);
  // The backlog is rebuilt from each scan: what was resolved or recorded meanwhile drops out.
  backlog_.clear();
  for (auto& rec : due.value()) {
    if (busy_.count(rec.id)) continue;
    // Cluster mode: only the home partition's leader checks (its record is replicated).
    if (cluster_.owner && !rec.home_topic.empty() && cluster_.owner(rec.home_topic, rec.home_partition)) continue;
    if (!pool_.has_producer(rec.producer_group)) {
      undecided.push_back({rec.id, rec.check_count, "no_producer"});
      busy_.insert(rec.id);
      if (auto& o = orphaned_[rec.producer_group]; o.size() < k_max_orphans_per_group) o.insert(rec.id);
      continue;
    }
    backlog_[rec.producer_group].push_back(rec.id);
  }
  std::vector<std::string> groups;
  for (auto& [g, q] : backlog_) groups.push_back(g);
  for (auto& [g, q] : returning_) {
    if (!backlog_.contains(g)) groups.push_back(g);
  }
  for (auto& g : groups) pump(g);
  const auto took = std::chrono::steady_clock::now() - started;
  next_scan_ = std::chrono::steady_clock::now() +
               std::max<std::chrono::steady_clock::duration>(settings_.scan_interval, took * 10);
}

void tx_coordinator::pump(const std::string& group) {
  if (stopped_) return;
  const auto now = now_ms();
  // A returning producer's orphans first (they have waited longest), then the due backlog.
  for (auto* queues : {&returning_, &backlog_}) {
    auto it = queues->find(group);
    if (it == queues->end()) continue;
    const bool only_due = queues == &backlog_;
    auto& queue = it->second;
    bool no_room = false;
    std::size_t busy_in_a_row = 0;
    while (!queue.empty() && pool_.has_producer(group) && pool_.open(group) < pool_.cap()) {
      const auto id = queue.front();
      queue.pop_front();
      if (busy_.count(id)) {
        // A due one is in the next scan again; an orphan is not, so it waits its turn here
        // (its "no producer" record may still be on its way to the store).
        if (only_due) continue;
        queue.push_back(id);
        if (++busy_in_a_row >= queue.size()) break;  // all of them busy: later
        continue;
      }
      busy_in_a_row = 0;
      // The queue may be older than the last EndTx: ask only what is still prepared (and, from
      // the backlog, due).
      auto rec = store_.find_tx(id);
      if (!rec || !rec.value() || rec.value()->state != tx_state::prepared || rec.value()->next_check_ms == 0 ||
          (only_due && rec.value()->next_check_ms > now)) {
        continue;
      }
      auto pick = pool_.pick(group);
      if (!pick.connection) {
        queue.push_front(id);
        no_room = true;
        break;
      }
      auto p = producers_.find(*pick.connection);
      auto conn = p == producers_.end() ? nullptr : p->second.lock();
      // A connection whose principal lost transact on the group no longer takes its checks
      // (it would have to reconnect after a new grant).
      if (!conn || !conn->is_open() || (may_check_ && !may_check_(*conn, group))) {
        // Closed without telling us yet, or no longer allowed: forget it and try the next one.
        pool_.release(group);
        pool_.leave(group, *pick.connection);
        producers_.erase(*pick.connection);
        queue.push_front(id);
        continue;
      }
      send_check(*conn, *rec.value());
    }
    if (queue.empty()) queues->erase(it);
    if (no_room || !pool_.has_producer(group) || pool_.open(group) >= pool_.cap()) return;
  }
}

void tx_coordinator::send_check(responder& c, const storage::tx_record& rec) {
  const std::uint64_t corr = k_request_id_bit | ++next_request_id_;
  v1::Frame f;
  f.set_correlation_id(corr);
  auto* check = f.mutable_check_tx();
  check->set_txid(std::string(rec.id.raw()));
  check->set_producer_group(rec.producer_group);
  for (auto& m : rec.messages) *check->add_messages() = m;
  check->set_check_number(rec.check_count + 1);
  check->set_prepared_ms(rec.prepared_ms);
  // Registered first: sending may find the connection dead and close it, which settles its
  // open checks.
  open_[corr] = {rec.id, rec.producer_group, c.id(), rec.check_count,
                 std::chrono::steady_clock::now() + settings_.answer_timeout};
  busy_.insert(rec.id);
  c.send_request(f);
}

void tx_coordinator::handle_answer(const std::shared_ptr<responder>& c, v1::Frame&& frame) {
  auto it = open_.find(frame.correlation_id());
  if (it == open_.end() || it->second.connection != c->id()) {
    if (frame.has_error()) {
      common::log::info("connection ", c->id(), " (", c->peer(), ") sent an error that answers no open check (id ",
                frame.correlation_id(), "): ", frame.error().message());
    } else {
      common::log::debug("connection ", c->id(), " answered check ", frame.correlation_id(),
                 " after its answer timeout, or a check it was never sent; ignored");
    }
    return;
  }
  const open_check check = std::move(it->second);
  open_.erase(it);
  pool_.release(check.group);
  if (stopped_) {
    busy_.erase(check.id);
    return;
  }
  if (may_check_ && !may_check_(*c, check.group)) {
    // The grant was revoked while the check was out: the answer does not decide.
    common::log::warn("producer ", c->client_id(), " (", c->peer(), ") answered the check of tx ", check.id.to_string(),
                      " but its principal no longer holds transact on producer-group:", check.group,
                      "; counted as undecided");
    record({{check.id, check.checks_before, "error"}});
  } else if (frame.has_error()) {
    common::log::warn("producer ", c->client_id(), " (", c->peer(), ") of group '", check.group,
              "' answered the check of tx ", check.id.to_string(), " with an error: ", frame.error().message());
    record({{check.id, check.checks_before, "error"}});
  } else if (frame.check_tx_result().txid() != check.id.raw()) {
    common::log::warn("producer ", c->client_id(), " (", c->peer(), ") answered the check of tx ", check.id.to_string(),
              " naming another txid; counted as undecided");
    record({{check.id, check.checks_before, "error"}});
  } else {
    switch (frame.check_tx_result().outcome()) {
      case v1::COMMIT: resolve_by_check(check, tx_outcome::commit); break;
      case v1::ROLLBACK: resolve_by_check(check, tx_outcome::rollback); break;
      default: record({{check.id, check.checks_before, "unknown"}}); break;
    }
  }
  pump(check.group);
}

void tx_coordinator::resolve_by_check(const open_check& check, tx_outcome outcome) {
  count_check(outcome == tx_outcome::commit ? "commit" : "rollback");
  resolve_check_in_turn(check, outcome);
}

void tx_coordinator::resolve_check_in_turn(const open_check& check, tx_outcome outcome) {
  resolve_turn turn;
  if (cluster_.owner) {
    // One resolution of a transaction at a time (tx_coordinator.h, resolve_turn).
    turn = take_turn(check.id, [this, check, outcome] { resolve_check_in_turn(check, outcome); });
    if (!turn) return;
  }
  auto found = store_.find_tx(check.id);
  if (!found || !found.value()) {
    busy_.erase(check.id);
    return;
  }
  storage::resolve_request rr;
  rr.id = check.id;
  rr.outcome = outcome;
  rr.by = resolver::check;
  rr.sync = settings_.sync;
  const auto& rec = *found.value();
  if (cluster_.settle_acks && outcome == tx_outcome::commit && !rec.acks.empty()) {
    // Cluster read-process-write: the holds are taken again before the COMMIT is written; if
    // that cannot be done now, the transaction stays PREPARED and the next check asks again.
    auto before = std::make_shared<storage::tx_record>(rec);
    return claim_in_cluster(*before, [this, rr, before, turn](result<std::optional<std::string>> claim) mutable {
      if (!claim) {
        busy_.erase(before->id);
        common::log::warn("tx ", before->id.to_string(), ": its check-back said commit, but holding its acks' "
                          "deliveries failed (asked again at its next check): ", claim.error().message);
        return;
      }
      if (claim.value()) {
        common::log::info("tx ", before->id.to_string(), " rolled back instead of committed by its check-back: ",
                          *claim.value());
        rr.outcome = tx_outcome::rollback;
      }
      write_check_resolve(rr, false, std::move(*before), std::move(turn));
    });
  }
  bool claimed = false;
  if (!cluster_.settle_acks && outcome == tx_outcome::commit) {
    if (auto stale = claim_acks(*found.value())) {
      common::log::info("tx ", check.id.to_string(), " rolled back instead of committed by its check-back: ", *stale);
      rr.outcome = tx_outcome::rollback;
    } else {
      claimed = true;
    }
  }
  write_check_resolve(rr, claimed, std::move(*found.value()), std::move(turn));
}

void tx_coordinator::write_check_resolve(const storage::resolve_request& rr, bool claimed, storage::tx_record rec,
                                         resolve_turn turn) {
  store_.resolve(rr, on_io<storage::resolve_result>(io_, [this, claimed, before = std::move(rec), turn = std::move(turn)](
                                                        result<storage::resolve_result> r) mutable {
    const resolve_turn release = std::move(turn);
    if (claimed) release_acks(before);
    busy_.erase(before.id);
    if (!r) {
      // Still PREPARED and due: the next scan asks again.
      common::log::error("resolving tx ", before.id.to_string(), " after its check-back failed: ", r.error().message);
      return;
    }
    if (r.value().status == storage::resolve_status::applied) resolved(before, r.value(), resolver::check);
    if (r.value().change && cluster_.await && (r.value().state == tx_state::committed || !before.acks.empty())) {
      // Cluster mode: the messages are copied (the acks applied, or a rollback's holds
      // released) once the outcome is on the home ISR.
      const storage::txid id = before.id;
      const auto change = *r.value().change;
      cluster_.await({change}, [this, id, change](result<void> g) { confirmed_commit(id, change, g.has_value()); });
    }
  }));
}

void tx_coordinator::record(std::vector<undecided_check> undecided) {
  if (undecided.empty()) return;
  const auto now = now_ms();
  std::vector<storage::check_update> updates;
  std::vector<std::pair<storage::txid, std::uint32_t>> abandoned;
  for (auto& u : undecided) {
    count_check(u.why);
    const auto d = schedule_.undecided(u.checks_before, now);
    updates.push_back({u.id, d.check_count, d.next_check_ms, d.abandon});
    if (d.abandon) abandoned.emplace_back(u.id, d.check_count);
    busy_.insert(u.id);
  }
  std::vector<storage::txid> ids;
  for (auto& u : undecided) ids.push_back(u.id);
  std::int64_t earliest_due = std::numeric_limits<std::int64_t>::max();
  for (auto& u : updates) {
    if (!u.abandon) earliest_due = std::min(earliest_due, u.next_check_ms);
  }
  store_.record_checks(std::move(updates), on_io<void>(io_, [this, ids = std::move(ids), earliest_due,
                                                        abandoned = std::move(abandoned)](result<void> r) {
    // Written (or, after a failed write, perhaps written): the next scan starts no later.
    written_due_floor_ = std::min(written_due_floor_, earliest_due);
    for (auto& id : ids) busy_.erase(id);
    if (!r) {
      common::log::error("recording ", ids.size(), " undecided transaction checks failed: ", r.error().message);
      return;
    }
    for (auto& [id, checks] : abandoned) {
      // record_checks skips transactions resolved meanwhile: count only what it abandoned.
      auto rec = store_.find_tx(id);
      if (!rec || !rec.value() || rec.value()->state != tx_state::abandoned || rec.value()->check_count != checks) {
        continue;
      }
      common::log::warn("tx ", id.to_string(), " of producer group '", rec.value()->producer_group, "' abandoned after ",
                checks, " undecided checks; its messages are kept: commit or roll it back with 'txmq tx commit|rollback ",
                id.to_string(), "'");
      if (metrics_) {
        metrics_->tx_abandoned.inc();
        metrics_->tx_prepared.dec();
        metrics_->tx_abandoned_now.inc();
      }
    }
  }));
}

}  // namespace txmq::broker
