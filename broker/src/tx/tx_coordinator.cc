// Transactions: the coordinator's lifecycle, Prepare, EndTx and TxResolve, and what a
// resolution changes in the consumer groups (read-process-write). The check-back is in
// check_back.cc, TxList and TxShow in tx_admin.cc.

#include "tx/tx_coordinator.h"

#include <algorithm>

#include "broker_metrics.h"
#include "io_thread.h"
#include "txmq/common/log.h"
#include "request_checks.h"
#include "tx/tx_names.h"

namespace txmq::broker {

namespace asio = boost::asio;
using detail::wire_state;
using detail::state_text;
using detail::resolver_label;
using detail::resolver_text;
using storage::errc;
using storage::resolver;
using storage::tx_outcome;
using storage::tx_state;

namespace {

constexpr std::size_t k_max_acks = 10'000;

}  // namespace

tx_coordinator::tx_coordinator(asio::io_context& io, storage::store& store, admin_reads& reads, tx_settings settings,
                               broker_metrics* metrics, group_access groups)
    : io_(io),
      store_(store),
      reads_(reads),
      settings_(std::move(settings)),
      metrics_(metrics),
      groups_(std::move(groups)),
      schedule_(settings_.check_schedule, settings_.max_checks),
      pool_(settings_.checks_in_flight),
      timer_(io) {}

result<void> tx_coordinator::start() {
  if (metrics_) {
    // From the index of unresolved transactions: a start never reads the resolved records kept
    // for dedupe_window (a day of them at 1,000 tx/s is 86 million; issue #15).
    TXMQ_TRY(auto counts, store_.count_unresolved_txs());
    metrics_->tx_prepared.set(static_cast<double>(counts.prepared));
    metrics_->tx_abandoned_now.set(static_cast<double>(counts.abandoned));
    metrics_->registry.add_gauge_callback("txmq_tx_checks_open", "Check-backs sent and waiting for an answer", {},
                                          [this] { return static_cast<double>(open_.size()); });
  }
  timer_.expires_after(settings_.scan_interval);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) on_tick();
  });
  return outcome::success();
}

void tx_coordinator::stop() {
  stopped_ = true;
  timer_.cancel();
}

// ---- Prepare / EndTx / operator -------------------------------------------------------------

void tx_coordinator::prepare(const std::shared_ptr<responder>& c, std::uint64_t corr, v1::PrepareRequest& req) {
  auto id = protocol::uuid::from_bytes(req.txid());
  if (!id || id.value().is_nil()) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT,
                            "Prepare needs a txid of 16 bytes, not all zero (a random UUIDv4 made by the client); got " +
                                std::to_string(req.txid().size()) + " bytes");
  }
  // The txid's text only for what names it (errors, the cluster's holds), not on every Prepare.
  auto tx_text_of = [&id] { return id.value().to_string(); };
  if (auto bad = bad_name("producer group", req.producer_group())) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT,
                            "transaction " + tx_text_of() + ": " + *bad + "; check-backs go to this group's producers");
  }
  auto checked = check_messages({.messages = req.messages(), .tx = &id.value()},
                                 {settings_.max_message_bytes, settings_.auto_create_topics, settings_.max_topics}, store_);
  if (!checked) return c->respond_error(corr, wire_code(checked.error()), std::move(checked.error().message));

  std::vector<storage::ack_ref> acks;
  if (!req.acks().empty()) {
    if (auto bad = bad_name("ack group", req.ack_group())) {
      return c->respond_error(corr, v1::INVALID_ARGUMENT, "transaction " + tx_text_of() + " carries acks: " + *bad);
    }
    if (static_cast<std::size_t>(req.acks_size()) > k_max_acks) {
      return c->respond_error(corr, v1::INVALID_ARGUMENT,
                              "at most " + std::to_string(k_max_acks) + " acks per transaction");
    }
    if (cluster_.settle_acks) {
      // Cluster mode: the input partitions' leaders hold the deliveries (below), whichever
      // node they are; each ack keeps its attempt.
      for (auto& a : req.acks()) acks.push_back({req.ack_group(), a.topic(), a.partition(), a.offset(), a.attempt()});
    } else {
      auto* tracker = groups_.find_group ? groups_.find_group(req.ack_group()) : nullptr;
      if (!tracker) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no consumer group '" + req.ack_group() + "'");
      for (auto& a : req.acks()) {
        if (!tracker->outstanding(a.topic(), a.partition(), a.offset())) {
          return c->respond_error(corr, v1::UNKNOWN_DELIVERY,
                                  "transaction " + tx_text_of() + " acks " + a.topic() + "/" + std::to_string(a.partition()) +
                                      "@" + std::to_string(a.offset()) + ", which group '" + req.ack_group() +
                                      "' has not delivered or has already settled (acked or dead-lettered)");
        }
        acks.push_back({req.ack_group(), a.topic(), a.partition(), a.offset()});
      }
    }
  }

  storage::prepare_request pr;
  pr.id = id.value();
  pr.producer_group = req.producer_group();
  pr.acks = std::move(acks);
  for (auto& m : *req.mutable_messages()) {
    // Fields the broker owns are set when the transaction commits.
    m.clear_publish_time_ms();
    m.clear_partition();
    m.clear_offset();
    m.clear_attempt();
    m.clear_txid();
    pr.messages.push_back(std::move(m));
  }
  const std::chrono::milliseconds timeout =
      req.tx_timeout_ms() ? std::chrono::milliseconds(req.tx_timeout_ms()) : settings_.tx_timeout;
  pr.first_check_ms = now_ms() + timeout.count();
  if (settings_.auto_create_topics) pr.auto_create_partitions = settings_.default_partitions;
  pr.sync = settings_.sync;
  if (cluster_.place) {
    pr.auto_create_partitions.reset();  // the cluster's topics are made in etcd
    pr.sync = true;                     // a follower's report is of fsynced changes: so is the leader's
    if (auto refused = cluster_.place(pr)) return respond_with(*c, corr, std::move(*refused));
  }
  if (!cluster_.settle_acks || pr.acks.empty()) return write_prepare(c, corr, std::move(pr));
  // Cluster read-process-write: the input deliveries are held for this transaction (each input
  // partition's leader, answered once its ISR holds the hold) before the record is written, so
  // an answered Prepare means no input is redelivered while the transaction is undecided. A
  // retried Prepare takes the holds again (the same transaction may); one of a transaction
  // already resolved goes straight to the store, which answers it.
  auto existing = store_.find_tx(pr.id);
  const bool known = existing && existing.value();
  if (known && existing.value()->state != tx_state::prepared) return write_prepare(c, corr, std::move(pr));
  auto keep = std::make_shared<storage::prepare_request>(std::move(pr));
  std::weak_ptr<responder> weak = c;
  cluster_.settle_acks(settle_step::hold, keep->id, keep->acks,
                       [this, weak, corr, keep, known, tx_text = tx_text_of()](result<std::vector<bool>> held) {
    auto c = weak.lock();
    std::vector<storage::ack_ref> taken, refused;
    if (held) {
      for (std::size_t i = 0; i < keep->acks.size(); ++i) (held.value()[i] ? taken : refused).push_back(keep->acks[i]);
    }
    if (held && refused.empty() && c) return write_prepare(c, corr, std::move(*keep));
    // Not prepared after all: what was held for it is let go (unless the transaction exists,
    // from an earlier Prepare whose answer was lost: its holds stay until it is resolved).
    if (!known && !taken.empty()) {
      cluster_.settle_acks(settle_step::release, keep->id, taken, [tx_text](result<std::vector<bool>> r) {
        if (!r) common::log::warn("tx ", tx_text, ": releasing the holds of a refused Prepare failed: ", r.error().message);
      });
    }
    if (!c) return;
    if (!held) {
      return c->respond_error(corr, wire_code(held.error()),
                              "transaction " + tx_text + ": holding its acks' deliveries failed: " + held.error().message);
    }
    const auto& a = refused.front();
    c->respond_error(corr, v1::UNKNOWN_DELIVERY,
                     "transaction " + tx_text + " acks " + a.topic + "/" + std::to_string(a.partition) + "@" +
                         std::to_string(a.offset) + " (attempt " + std::to_string(a.attempt) + "), which group '" +
                         a.group + "' does not have in flight in that attempt (settled, its deadline passed, or "
                         "another transaction holds it)");
  });
}

void tx_coordinator::write_prepare(const std::shared_ptr<responder>& c, std::uint64_t corr,
                                   storage::prepare_request pr) {
  const std::int64_t first_check = pr.first_check_ms;
  const bool plain = pr.acks.empty();
  std::weak_ptr<responder> weak = c;
  const storage::txid txid_value = pr.id;
  store_.prepare(std::move(pr), on_io<storage::prepare_result>(io_, [this, weak, corr, txid = txid_value, first_check,
                                                                     plain](result<storage::prepare_result> r) {
    // Its first check is in the due index (or, after a failed write, perhaps): the next scan of
    // the index starts no later (check_back.cc).
    if (first_check != 0) written_due_floor_ = std::min(written_due_floor_, first_check);
    if (r && !r.value().duplicate) {
      if (metrics_) {
        metrics_->tx_prepares.inc();
        metrics_->tx_prepared.inc();
      }
      // Only a new transaction: a retried Prepare may carry other acks than the stored one.
      if (plain && no_acks_.size() < k_max_no_acks) no_acks_.insert(txid);
    }
    auto c = weak.lock();
    if (!c) return;
    // The txid's text only for what names it (errors, the cluster's wait), not on every answer.
    auto tx_text_of = [&txid] { return txid.to_string(); };
    bool duplicate = r && r.value().duplicate;
    std::int64_t due = first_check;
    if (!r && r.error() == errc::tx_not_prepared) {
      // A retry of a Prepare whose transaction was abandoned meanwhile is still the same
      // transaction; one that was resolved means the txid is being reused.
      auto rec = store_.find_tx(txid);
      if (rec && rec.value() && rec.value()->state == tx_state::abandoned) {
        duplicate = true;
      } else {
        const std::string state = rec && rec.value() ? state_text(rec.value()->state) : "resolved";
        return c->respond_error(corr, v1::TX_ALREADY_RESOLVED,
                                "transaction " + tx_text_of() + " was already " + state +
                                    "; a txid is never reused: make a new one for a new transaction");
      }
    } else if (!r) {
      return c->respond_error(corr, wire_code(r.error()),
                              "preparing transaction " + tx_text_of() + " failed: " + r.error().message);
    }
    if (duplicate) {
      if (auto rec = store_.find_tx(txid); rec && rec.value()) due = rec.value()->next_check_ms;
    }
    v1::Frame out;
    out.set_correlation_id(corr);
    out.mutable_prepare_response()->set_duplicate(duplicate);
    out.mutable_prepare_response()->set_first_check_ms(due);
    if (r && r.value().change && cluster_.await) {
      // Cluster mode: answered once the home partition's ISR holds the prepared record.
      return cluster_.await({*r.value().change}, [weak, corr, tx_text = tx_text_of(), out = std::move(out)](result<void> g) mutable {
        auto c = weak.lock();
        if (!c) return;
        if (!g) return c->respond_error(corr, wire_code(g.error()), "transaction " + tx_text + ": " + g.error().message);
        c->respond(std::move(out));
      });
    }
    c->respond(std::move(out));
  }));
}

std::string tx_coordinator::unknown_tx_text(const std::string& tx_text) {
  return "no transaction " + tx_text + " (never prepared on this broker, or resolved longer than dedupe_window ago)";
}

void tx_coordinator::end_tx(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::EndTxRequest& req) {
  resolve(c, corr, "EndTx", req.txid(), req.outcome(), resolver::producer);
}

void tx_coordinator::operator_resolve(const std::shared_ptr<responder>& c, std::uint64_t corr,
                                      const v1::TxResolveRequest& req) {
  resolve(c, corr, "TxResolve", req.txid(), req.outcome(), resolver::operator_);
}

void tx_coordinator::resolve(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& what,
                             const std::string& txid_bytes, v1::TxOutcome outcome, resolver by) {
  auto id = protocol::uuid::from_bytes(txid_bytes);
  if (!id) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT,
                            what + " needs a 16-byte txid; got " + std::to_string(txid_bytes.size()) + " bytes");
  }
  if (outcome != v1::COMMIT && outcome != v1::ROLLBACK) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT, what + " needs outcome COMMIT or ROLLBACK");
  }
  resolve_turn turn;
  if (cluster_.owner) {
    std::weak_ptr<responder> weak = c;
    turn = take_turn(id.value(), [this, weak, corr, what, txid_bytes, outcome, by] {
      if (auto c = weak.lock()) return resolve(c, corr, what, txid_bytes, outcome, by);
    });
    if (!turn) return;  // runs when the resolution under way has been written
  }
  resolve_in_turn(c, corr, what, id.value(), outcome, by, std::move(turn));
}

tx_coordinator::resolve_turn tx_coordinator::take_turn(const storage::txid& id, std::function<void()> retry) {
  auto [it, first] = resolving_.try_emplace(id);
  if (!first) {
    it->second.push_back(std::move(retry));
    return nullptr;
  }
  // Released when the last holder lets go of it: the next waiting request runs then (posted:
  // not inside the completion that released the turn). The pointer only makes the turn non-null;
  // a turn dropped with a handler after the coordinator is gone (shutdown) does nothing.
  return std::shared_ptr<void>(static_cast<void*>(this), [this, id, alive = std::weak_ptr<char>(alive_)](void*) {
    if (alive.expired()) return;
    auto it = resolving_.find(id);
    if (it == resolving_.end()) return;
    if (it->second.empty()) {
      resolving_.erase(it);
      return;
    }
    auto next = std::move(it->second.front());
    it->second.pop_front();
    auto rest = std::move(it->second);
    resolving_.erase(it);
    // The next one takes the turn again itself; the others queue behind it.
    asio::post(io_, [this, id, next = std::move(next), rest = std::move(rest)]() mutable {
      next();
      auto it2 = resolving_.find(id);
      for (auto& r : rest) {
        if (it2 == resolving_.end()) {
          // The next one finished at once (answered from memory): this one starts a turn.
          r();
          it2 = resolving_.find(id);
          continue;
        }
        it2->second.push_back(std::move(r));
      }
    });
  });
}

void tx_coordinator::resolve_in_turn(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& what,
                                     const storage::txid& txid, v1::TxOutcome outcome, resolver by,
                                     resolve_turn turn) {
  (void)what;  // only the checks made before the turn name the request
  const std::optional<storage::txid> id(txid);
  auto tx_text_of = [&txid] { return txid.to_string(); };  // for what names it, not every EndTx
  // A transaction this broker prepared without acks needs no look-up before it is resolved:
  // there is nothing to claim, and the store hands back the record it resolved
  // (resolve_result::before). Any other goes through find_tx() and claim_acks() first.
  std::optional<storage::tx_record> found_before;
  if (no_acks_.erase(id.value()) == 0 || cluster_.owner) {
    auto found = store_.find_tx(id.value());
    if (!found) {
      return c->respond_error(corr, wire_code(found.error()),
                              "reading transaction " + tx_text_of() + " failed: " + found.error().message);
    }
    if (!found.value()) {
      return c->respond_error(corr, v1::UNKNOWN_TX, unknown_tx_text(tx_text_of()));
    }
    found_before = std::move(*found.value());
    if (cluster_.owner && !found_before->home_topic.empty()) {
      if (auto refused = cluster_.owner(found_before->home_topic, found_before->home_partition)) {
        return respond_with(*c, corr, std::move(*refused));
      }
    }
  }
  storage::resolve_request rr;
  rr.id = id.value();
  rr.outcome = outcome == v1::COMMIT ? tx_outcome::commit : tx_outcome::rollback;
  rr.by = by;
  rr.sync = settings_.sync;
  if (cluster_.settle_acks && rr.outcome == tx_outcome::commit && found_before && !found_before->acks.empty() &&
      (found_before->state == tx_state::prepared || found_before->state == tx_state::abandoned)) {
    // Cluster read-process-write: the holds are taken again before the COMMIT is written.
    std::weak_ptr<responder> weak = c;
    auto rec = std::make_shared<storage::tx_record>(std::move(*found_before));
    return claim_in_cluster(*rec, [this, weak, corr, rr, outcome, rec, tx_text = tx_text_of(), turn](
                                      result<std::optional<std::string>> claim) mutable {
      auto c = weak.lock();
      if (!c) return;  // nothing written: the producer's retry or a check-back decides
      if (!claim) {
        return c->respond_error(corr, wire_code(claim.error()),
                                "transaction " + tx_text + ": holding its acks' deliveries failed: " + claim.error().message);
      }
      if (claim.value()) rr.outcome = tx_outcome::rollback;
      write_resolve(c, corr, rr, outcome, claim.value(), std::move(*rec), std::move(turn));
    });
  }
  std::optional<std::string> stale;
  if (!cluster_.settle_acks && rr.outcome == tx_outcome::commit && found_before) {
    stale = claim_acks(*found_before);
    if (stale) rr.outcome = tx_outcome::rollback;
  }
  write_resolve(c, corr, std::move(rr), outcome, std::move(stale), std::move(found_before), std::move(turn));
}

void tx_coordinator::write_resolve(const std::shared_ptr<responder>& c, std::uint64_t corr,
                                   storage::resolve_request rr, v1::TxOutcome outcome,
                                   std::optional<std::string> stale, std::optional<storage::tx_record> found_before,
                                   resolve_turn turn) {
  const storage::resolver by = rr.by;
  const storage::txid txid = rr.id;  // its text only for what names it, not on every answer
  std::weak_ptr<responder> weak = c;
  store_.resolve(rr, on_io<storage::resolve_result>(io_, [this, weak, corr, by, outcome, txid, stale,
                                                     found_before = std::move(found_before), turn = std::move(turn)](
                                                        result<storage::resolve_result> r) mutable {
    // The outcome is in the store now: a resolution of the same transaction waiting for its
    // turn runs after this one and reads it.
    const resolve_turn release = std::move(turn);
    auto tx_text_of = [&txid] { return txid.to_string(); };
    if (outcome == v1::COMMIT && found_before) release_acks(*found_before);
    const storage::tx_record* before = found_before ? &*found_before : r ? &r.value().before : nullptr;
    if (r && r.value().status == storage::resolve_status::applied) resolved(*before, r.value(), by);
    if (r && r.value().change && cluster_.await && r.value().status != storage::resolve_status::conflict) {
      // Cluster mode: answered once the home ISR holds the outcome; a COMMIT's copies start
      // then, whether or not the client is still there (confirm_commit).
      auto res = std::move(r.value());
      const auto change = *res.change;
      res.change.reset();
      const storage::txid id = before->id;
      const bool follow_up = res.state == tx_state::committed || !before->acks.empty();
      return cluster_.await({change}, [this, weak, corr, tx_text = tx_text_of(), id, change, follow_up, stale,
                                    res = std::move(res)](result<void> g) {
        if (follow_up) confirmed_commit(id, change, g.has_value());
        auto c = weak.lock();
        if (!c) return;
        if (!g) return c->respond_error(corr, wire_code(g.error()), "transaction " + tx_text + ": " + g.error().message);
        if (stale && res.status == storage::resolve_status::applied) {
          common::log::info("tx ", tx_text, " rolled back instead of committed: ", *stale);
          return c->respond_error(corr, v1::UNKNOWN_DELIVERY, "transaction " + tx_text + " was rolled back: " + *stale);
        }
        answer_end_tx(*c, corr, res);
      });
    }
    auto c = weak.lock();
    if (!c) return;
    if (r && stale && r.value().status == storage::resolve_status::applied) {
      common::log::info("tx ", tx_text_of(), " rolled back instead of committed: ", *stale);
      return c->respond_error(corr, v1::UNKNOWN_DELIVERY, "transaction " + tx_text_of() + " was rolled back: " + *stale);
    }
    if (!r && r.error() == errc::unknown_tx) return c->respond_error(corr, v1::UNKNOWN_TX, unknown_tx_text(tx_text_of()));
    if (!r) {
      std::string text = r.error() == errc::unknown_topic
                             ? "transaction " + tx_text_of() + " cannot commit: a topic of its messages no longer exists"
                             : "resolving transaction " + tx_text_of() + " failed: " + r.error().message;
      return c->respond_error(corr, wire_code(r.error()), text);
    }
    auto& res = r.value();
    if (res.status == storage::resolve_status::conflict) {
      std::string text = "transaction " + tx_text_of() + " was already " + state_text(res.state);
      if (before->resolved_by && (before->state == tx_state::committed || before->state == tx_state::rolled_back)) {
        text += std::string(" ") + resolver_text(*before->resolved_by);
      }
      text += std::string("; ") + (outcome == v1::COMMIT ? "COMMIT" : "ROLLBACK") + " changes nothing";
      return c->respond_error(corr, v1::TX_ALREADY_RESOLVED, text);
    }
    answer_end_tx(*c, corr, res);
  }));
}

void tx_coordinator::answer_end_tx(responder& c, std::uint64_t corr, const storage::resolve_result& res) {
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* resp = out.mutable_end_tx_response();
  resp->set_state(wire_state(res.state));
  resp->set_already_resolved(res.status == storage::resolve_status::repeated);
  for (auto& p : res.positions) {
    auto* pos = resp->add_positions();
    pos->set_partition(p.partition);
    pos->set_offset(p.offset);
    pos->set_duplicate(p.duplicate);
  }
  c.respond(std::move(out));
}

void tx_coordinator::resolved(const storage::tx_record& before, const storage::resolve_result& r, resolver by) {
  const bool committed = r.state == tx_state::committed;
  if (metrics_) {
    // Looked up once per (outcome, resolver): add_counter() builds and locks on every call.
    auto& series = resolved_counters_[{committed, static_cast<int>(by)}];
    if (!series) {
      series = &metrics_->registry.add_counter(
          committed ? "txmq_tx_committed_total" : "txmq_tx_rolled_back_total",
          committed ? "Transactions committed, by who decided" : "Transactions rolled back, by who decided",
          {{"by", resolver_label(by)}});
    }
    series->inc();
    if (before.state == tx_state::abandoned) {
      metrics_->tx_abandoned_now.dec();
    } else if (before.state == tx_state::prepared) {
      metrics_->tx_prepared.dec();
    }
    metrics_->tx_resolution_latency.observe(
        std::chrono::milliseconds(std::max<std::int64_t>(0, now_ms() - before.prepared_ms)));
  }
  if (by == resolver::operator_) {
    common::log::info("operator ", committed ? "committed" : "rolled back", " tx ", before.id.to_string(), " (producer group '",
              before.producer_group, "', ", before.messages.size(), " messages, was ", state_text(before.state), ")");
  } else if (by == resolver::check) {
    common::log::debug("check-back ", committed ? "committed" : "rolled back", " tx ", before.id.to_string(), " of producer group '",
              before.producer_group, "'");
  }
  if (!committed) return;
  // The store applied the acks in the commit write; the in-memory trackers must not hand those
  // messages out again. (Cluster mode: the input partitions' leaders apply them, start_copy.)
  std::map<std::string, std::vector<storage::message_ref>> acks;
  for (auto& a : cluster_.settle_acks ? std::vector<storage::ack_ref>{} : before.acks) {
    acks[a.group].push_back({a.topic, a.partition, a.offset});
  }
  std::vector<std::string> groups;
  for (auto& [group, refs] : acks) {
    if (auto* t = groups_.find_group ? groups_.find_group(group) : nullptr) t->acked_elsewhere(refs);
    groups.push_back(group);
  }
  std::vector<std::string> topics;
  for (auto& m : before.messages) {
    if (std::find(topics.begin(), topics.end(), m.topic()) == topics.end()) topics.push_back(m.topic());
  }
  if (groups_.wake) groups_.wake(topics, groups);
}

std::optional<std::string> tx_coordinator::claim_acks(const storage::tx_record& rec) {
  if (rec.acks.empty() || (rec.state != tx_state::prepared && rec.state != tx_state::abandoned)) return std::nullopt;
  for (const auto& a : rec.acks) {
    auto* tracker = groups_.find_group ? groups_.find_group(a.group) : nullptr;
    const bool in_flight = tracker && tracker->outstanding(a.topic, a.partition, a.offset);
    auto claim = claimed_.find({a.group, a.topic, a.partition, a.offset});
    if (!in_flight || (claim != claimed_.end() && claim->second != rec.id)) {
      return "it acks " + a.topic + "/" + std::to_string(a.partition) + "@" + std::to_string(a.offset) +
             ", which consumer group '" + a.group +
             "' no longer has in flight for it (acked by another consumer or transaction after its ack deadline "
             "passed, or the broker restarted since it was delivered); committing would publish its result twice";
    }
  }
  for (const auto& a : rec.acks) claimed_.emplace(std::make_tuple(a.group, a.topic, a.partition, a.offset), rec.id);
  return std::nullopt;
}

void tx_coordinator::release_acks(const storage::tx_record& rec) {
  for (const auto& a : rec.acks) {
    auto it = claimed_.find({a.group, a.topic, a.partition, a.offset});
    if (it != claimed_.end() && it->second == rec.id) claimed_.erase(it);
  }
}

}  // namespace txmq::broker
