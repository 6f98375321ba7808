#include "tx/tx_coordinator.h"

#include <algorithm>
#include <set>

#include "broker_metrics.h"
#include "io_thread.h"
#include "log.h"
#include "request_checks.h"

namespace txmq::broker {

namespace asio = boost::asio;
using storage::errc;
using storage::resolver;
using storage::tx_outcome;
using storage::tx_state;

namespace {

constexpr std::size_t k_max_acks = 10'000;
constexpr std::uint32_t k_default_list = 100;
constexpr std::uint32_t k_max_list = 10'000;
// TxList reads at most this many records per request; the answer says where to continue.
constexpr std::size_t k_list_scan_budget = 100'000;



v1::TxState wire_state(tx_state s) {
  switch (s) {
    case tx_state::prepared: return v1::PREPARED;
    case tx_state::committed: return v1::COMMITTED;
    case tx_state::rolled_back: return v1::ROLLED_BACK;
    case tx_state::abandoned: return v1::ABANDONED;
  }
  return v1::TX_STATE_UNSPECIFIED;
}

v1::TxResolver wire_resolver(std::optional<resolver> r) {
  if (!r) return v1::TX_RESOLVER_UNSPECIFIED;
  switch (*r) {
    case resolver::producer: return v1::RESOLVED_BY_PRODUCER;
    case resolver::check: return v1::RESOLVED_BY_CHECK;
    case resolver::operator_: return v1::RESOLVED_BY_OPERATOR;
  }
  return v1::TX_RESOLVER_UNSPECIFIED;
}

const char* state_text(tx_state s) {
  switch (s) {
    case tx_state::prepared: return "prepared";
    case tx_state::committed: return "committed";
    case tx_state::rolled_back: return "rolled back";
    case tx_state::abandoned: return "abandoned";
  }
  return "?";
}

const char* resolver_label(resolver r) {
  switch (r) {
    case resolver::producer: return "producer";
    case resolver::check: return "check";
    case resolver::operator_: return "operator";
  }
  return "?";
}

const char* resolver_text(resolver r) {
  switch (r) {
    case resolver::producer: return "by its producer (EndTx)";
    case resolver::check: return "by a check-back answer";
    case resolver::operator_: return "by an operator";
  }
  return "";
}

}  // namespace

tx_coordinator::tx_coordinator(asio::io_context& io, storage::store& store, tx_settings settings,
                               broker_metrics* metrics, group_access groups)
    : io_(io),
      store_(store),
      settings_(std::move(settings)),
      metrics_(metrics),
      groups_(std::move(groups)),
      schedule_(settings_.check_schedule, settings_.max_checks),
      pool_(settings_.checks_in_flight),
      timer_(io) {}

result<void> tx_coordinator::start() {
  if (metrics_) {
    for (auto state : {tx_state::prepared, tx_state::abandoned}) {
      std::uint64_t n = 0;
      std::optional<storage::txid> after;
      for (;;) {
        TXMQ_TRY(auto page, store_.list_txs(state, 1000, after));
        n += page.size();
        if (page.size() < 1000) break;
        after = page.back().id;
      }
      (state == tx_state::prepared ? metrics_->tx_prepared : metrics_->tx_abandoned_now).set(static_cast<double>(n));
    }
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

// ---- connections ----------------------------------------------------------------------------

void tx_coordinator::connection_opened(const std::shared_ptr<responder>& c) {
  if (c->producer_group().empty()) return;
  producers_[c->id()] = c;
  pool_.join(c->producer_group(), c->id());
  if (auto o = orphaned_.find(c->producer_group()); o != orphaned_.end()) {
    auto& queue = returning_[c->producer_group()];
    queue.insert(queue.end(), o->second.begin(), o->second.end());
    log::info("producer group '", c->producer_group(), "' is back: asking about ", o->second.size(),
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

// ---- Prepare / EndTx / operator -------------------------------------------------------------

void tx_coordinator::prepare(const std::shared_ptr<responder>& c, std::uint64_t corr, v1::PrepareRequest& req) {
  auto id = protocol::uuid::from_bytes(req.txid());
  if (!id || id.value().is_nil()) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT,
                            "Prepare needs a txid of 16 bytes, not all zero (a random UUIDv4 made by the client); got " +
                                std::to_string(req.txid().size()) + " bytes");
  }
  const std::string tx_text = id.value().to_string();
  if (auto bad = bad_name("producer group", req.producer_group())) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT,
                            "transaction " + tx_text + ": " + *bad + "; check-backs go to this group's producers");
  }
  auto checked = check_messages({.messages = req.messages(),
                                  .request = "transaction " + tx_text,
                                  .message_prefix = "transaction " + tx_text + ", "},
                                 {settings_.max_message_bytes, settings_.auto_create_topics, settings_.max_topics}, store_);
  if (!checked) return c->respond_error(corr, wire_code(checked.error()), std::move(checked.error().message));

  std::vector<storage::ack_ref> acks;
  if (!req.acks().empty()) {
    if (auto bad = bad_name("ack group", req.ack_group())) {
      return c->respond_error(corr, v1::INVALID_ARGUMENT, "transaction " + tx_text + " carries acks: " + *bad);
    }
    if (static_cast<std::size_t>(req.acks_size()) > k_max_acks) {
      return c->respond_error(corr, v1::INVALID_ARGUMENT,
                              "at most " + std::to_string(k_max_acks) + " acks per transaction");
    }
    auto* tracker = groups_.find_group ? groups_.find_group(req.ack_group()) : nullptr;
    if (!tracker) {
      return c->respond_error(corr, v1::UNKNOWN_GROUP, "no consumer group '" + req.ack_group() + "'");
    }
    for (auto& a : req.acks()) {
      if (!tracker->outstanding(a.topic(), a.partition(), a.offset())) {
        return c->respond_error(corr, v1::UNKNOWN_DELIVERY,
                                "transaction " + tx_text + " acks " + a.topic() + "/" + std::to_string(a.partition()) +
                                    "@" + std::to_string(a.offset()) + ", which group '" + req.ack_group() +
                                    "' has not delivered or has already settled (acked or dead-lettered)");
      }
      acks.push_back({req.ack_group(), a.topic(), a.partition(), a.offset()});
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
  const std::int64_t first_check = pr.first_check_ms;
  std::weak_ptr<responder> weak = c;
  store_.prepare(std::move(pr), on_io<storage::prepare_result>(io_, [this, weak, corr, txid = id.value(), first_check](
                                                                   result<storage::prepare_result> r) {
    if (r && !r.value().duplicate && metrics_) {
      metrics_->tx_prepares.inc();
      metrics_->tx_prepared.inc();
    }
    auto c = weak.lock();
    if (!c) return;
    const std::string tx_text = txid.to_string();
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
                                "transaction " + tx_text + " was already " + state +
                                    "; a txid is never reused: make a new one for a new transaction");
      }
    } else if (!r) {
      return c->respond_error(corr, wire_code(r.error()),
                              "preparing transaction " + tx_text + " failed: " + r.error().message);
    }
    if (duplicate) {
      if (auto rec = store_.find_tx(txid); rec && rec.value()) due = rec.value()->next_check_ms;
    }
    v1::Frame out;
    out.set_correlation_id(corr);
    out.mutable_prepare_response()->set_duplicate(duplicate);
    out.mutable_prepare_response()->set_first_check_ms(due);
    c->respond(std::move(out));
  }));
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
  const std::string tx_text = id.value().to_string();
  auto found = store_.find_tx(id.value());
  if (!found) {
    return c->respond_error(corr, wire_code(found.error()),
                            "reading transaction " + tx_text + " failed: " + found.error().message);
  }
  if (!found.value()) {
    return c->respond_error(corr, v1::UNKNOWN_TX,
                            "no transaction " + tx_text +
                                " (never prepared on this broker, or resolved longer than dedupe_window ago)");
  }
  storage::resolve_request rr;
  rr.id = id.value();
  rr.outcome = outcome == v1::COMMIT ? tx_outcome::commit : tx_outcome::rollback;
  rr.by = by;
  rr.sync = settings_.sync;
  std::optional<std::string> stale;
  if (rr.outcome == tx_outcome::commit) {
    stale = claim_acks(*found.value());
    if (stale) rr.outcome = tx_outcome::rollback;
  }
  std::weak_ptr<responder> weak = c;
  store_.resolve(rr, on_io<storage::resolve_result>(io_, [this, weak, corr, by, outcome, tx_text, stale,
                                                     before = std::move(*found.value())](
                                                        result<storage::resolve_result> r) {
    if (outcome == v1::COMMIT) release_acks(before);
    if (r && r.value().status == storage::resolve_status::applied) resolved(before, r.value(), by);
    auto c = weak.lock();
    if (!c) return;
    if (r && stale && r.value().status == storage::resolve_status::applied) {
      log::info("tx ", tx_text, " rolled back instead of committed: ", *stale);
      return c->respond_error(corr, v1::UNKNOWN_DELIVERY, "transaction " + tx_text + " was rolled back: " + *stale);
    }
    if (!r) {
      std::string text = r.error() == errc::unknown_topic
                             ? "transaction " + tx_text + " cannot commit: a topic of its messages no longer exists"
                             : "resolving transaction " + tx_text + " failed: " + r.error().message;
      return c->respond_error(corr, wire_code(r.error()), text);
    }
    const auto& res = r.value();
    if (res.status == storage::resolve_status::conflict) {
      std::string text = "transaction " + tx_text + " was already " + state_text(res.state);
      if (before.resolved_by && (before.state == tx_state::committed || before.state == tx_state::rolled_back)) {
        text += std::string(" ") + resolver_text(*before.resolved_by);
      }
      text += std::string("; ") + (outcome == v1::COMMIT ? "COMMIT" : "ROLLBACK") + " changes nothing";
      return c->respond_error(corr, v1::TX_ALREADY_RESOLVED, text);
    }
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
    c->respond(std::move(out));
  }));
}

void tx_coordinator::resolved(const storage::tx_record& before, const storage::resolve_result& r, resolver by) {
  const bool committed = r.state == tx_state::committed;
  const std::string tx_text = before.id.to_string();
  if (metrics_) {
    metrics_->registry
        .add_counter(committed ? "txmq_tx_committed_total" : "txmq_tx_rolled_back_total",
                     committed ? "Transactions committed, by who decided" : "Transactions rolled back, by who decided",
                     {{"by", resolver_label(by)}})
        .inc();
    if (before.state == tx_state::abandoned) {
      metrics_->tx_abandoned_now.dec();
    } else if (before.state == tx_state::prepared) {
      metrics_->tx_prepared.dec();
    }
    metrics_->tx_resolution_latency.observe(
        std::chrono::milliseconds(std::max<std::int64_t>(0, now_ms() - before.prepared_ms)));
  }
  if (by == resolver::operator_) {
    log::info("operator ", committed ? "committed" : "rolled back", " tx ", tx_text, " (producer group '",
              before.producer_group, "', ", before.messages.size(), " messages, was ", state_text(before.state), ")");
  } else if (by == resolver::check) {
    log::debug("check-back ", committed ? "committed" : "rolled back", " tx ", tx_text, " of producer group '",
              before.producer_group, "'");
  }
  if (!committed) return;
  // The store applied the acks in the commit write; the in-memory trackers must not hand those
  // messages out again.
  std::map<std::string, std::vector<storage::message_ref>> acks;
  for (auto& a : before.acks) acks[a.group].push_back({a.topic, a.partition, a.offset});
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

// ---- administration -------------------------------------------------------------------------

std::unordered_set<storage::txid, protocol::uuid_hash> tx_coordinator::open_txids() const {
  std::unordered_set<storage::txid, protocol::uuid_hash> out;
  for (auto& [corr, o] : open_) out.insert(o.id);
  return out;
}

void tx_coordinator::fill_info(const storage::tx_record& rec, v1::TxInfo& out, bool with_messages,
                               const std::unordered_set<storage::txid, protocol::uuid_hash>& open) const {
  out.set_txid(std::string(rec.id.raw()));
  out.set_producer_group(rec.producer_group);
  out.set_state(wire_state(rec.state));
  std::vector<std::string> topics, keys;
  for (auto& m : rec.messages) {
    if (std::find(topics.begin(), topics.end(), m.topic()) == topics.end()) topics.push_back(m.topic());
    if (m.has_key() && std::find(keys.begin(), keys.end(), m.key()) == keys.end()) keys.push_back(m.key());
  }
  for (auto& t : topics) out.add_topics(t);
  for (auto& k : keys) out.add_keys(k);
  out.set_messages(static_cast<std::uint32_t>(rec.messages.size()));
  out.set_prepared_ms(rec.prepared_ms);
  out.set_check_count(rec.check_count);
  out.set_next_check_ms(rec.next_check_ms);
  out.set_resolved_ms(rec.resolved_ms);
  out.set_resolved_by(wire_resolver(rec.resolved_by));
  out.set_acks(static_cast<std::uint32_t>(rec.acks.size()));
  out.set_check_open(open.count(rec.id) > 0);
  if (with_messages) {
    for (auto& m : rec.messages) *out.add_message_list() = m;
  }
}

void tx_coordinator::list(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::TxListRequest& req) {
  const std::uint32_t limit = req.limit() ? std::min(req.limit(), k_max_list) : k_default_list;
  std::optional<storage::txid> after;
  if (!req.after_txid().empty()) {
    auto a = protocol::uuid::from_bytes(req.after_txid());
    if (!a) return c->respond_error(corr, v1::INVALID_ARGUMENT, "after_txid must be 16 bytes");
    after = a.value();
  }
  std::optional<tx_state> state;
  bool unresolved_only = false;
  if (!req.all_states()) {
    switch (req.state()) {
      case v1::TX_STATE_UNSPECIFIED: unresolved_only = true; break;
      case v1::PREPARED: state = tx_state::prepared; break;
      case v1::COMMITTED: state = tx_state::committed; break;
      case v1::ROLLED_BACK: state = tx_state::rolled_back; break;
      case v1::ABANDONED: state = tx_state::abandoned; break;
      default: return c->respond_error(corr, v1::INVALID_ARGUMENT, "unknown transaction state in TxList");
    }
  }
  const auto open = open_txids();
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* resp = out.mutable_tx_list_response();
  std::size_t scanned = 0;
  constexpr std::size_t page_size = 1000;
  for (;;) {
    auto page = store_.list_txs(state, page_size, after);
    if (!page) {
      return c->respond_error(corr, wire_code(page.error()), "listing transactions failed: " + page.error().message);
    }
    for (auto& rec : page.value()) {
      after = rec.id;
      ++scanned;
      if (unresolved_only && rec.state != tx_state::prepared && rec.state != tx_state::abandoned) continue;
      if (!req.topic().empty() && std::none_of(rec.messages.begin(), rec.messages.end(),
                                               [&](const v1::Message& m) { return m.topic() == req.topic(); })) {
        continue;
      }
      fill_info(rec, *resp->add_txs(), false, open);
      if (static_cast<std::uint32_t>(resp->txs_size()) >= limit) break;
    }
    if (static_cast<std::uint32_t>(resp->txs_size()) >= limit || scanned >= k_list_scan_budget) {
      if (after) resp->set_next_after_txid(std::string(after->raw()));
      break;
    }
    if (page.value().size() < page_size) break;
  }
  c->respond(std::move(out));
}

void tx_coordinator::show(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::TxShowRequest& req) {
  auto id = protocol::uuid::from_bytes(req.txid());
  if (!id) return c->respond_error(corr, v1::INVALID_ARGUMENT, "TxShow needs a 16-byte txid");
  auto rec = store_.find_tx(id.value());
  if (!rec) {
    return c->respond_error(corr, wire_code(rec.error()), "reading transaction failed: " + rec.error().message);
  }
  if (!rec.value()) {
    return c->respond_error(corr, v1::UNKNOWN_TX,
                            "no transaction " + id.value().to_string() +
                                " (never prepared on this broker, or resolved longer than dedupe_window ago)");
  }
  v1::Frame out;
  out.set_correlation_id(corr);
  fill_info(*rec.value(), *out.mutable_tx_info(), true, open_txids());
  c->respond(std::move(out));
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
    log::debug("no answer to the check of tx ", it->second.id.to_string(), " within ",
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
  timer_.expires_after(settings_.scan_interval);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) on_tick();
  });
}

void tx_coordinator::scan(std::int64_t now, std::vector<undecided_check>& undecided) {
  const auto started = std::chrono::steady_clock::now();
  const bool full = started >= next_full_scan_;
  auto due = store_.due_checks(now, settings_.scan_limit, full ? 0 : scan_from_ms_);
  if (!due) {
    log::error("reading the due transaction checks failed: ", due.error().message);
    next_scan_ = started + std::chrono::seconds(1);
    return;
  }
  // What was returned stays in the index until it is resolved or re-scheduled; everything
  // written from now on is due after now.
  std::int64_t earliest = now;
  for (const auto& rec : due.value()) earliest = std::min(earliest, rec.next_check_ms);
  scan_from_ms_ = earliest - 1000;
  if (full) next_full_scan_ = started + std::chrono::minutes(1);
  // The backlog is rebuilt from each scan: what was resolved or recorded meanwhile drops out.
  backlog_.clear();
  for (auto& rec : due.value()) {
    if (busy_.count(rec.id)) continue;
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
      if (!conn || !conn->is_open()) {
        // Closed without telling us yet: forget it and try the next one.
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
      log::info("connection ", c->id(), " (", c->peer(), ") sent an error that answers no open check (id ",
                frame.correlation_id(), "): ", frame.error().message());
    } else {
      log::debug("connection ", c->id(), " answered check ", frame.correlation_id(),
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
  if (frame.has_error()) {
    log::warn("producer ", c->client_id(), " (", c->peer(), ") of group '", check.group,
              "' answered the check of tx ", check.id.to_string(), " with an error: ", frame.error().message());
    record({{check.id, check.checks_before, "error"}});
  } else if (frame.check_tx_result().txid() != check.id.raw()) {
    log::warn("producer ", c->client_id(), " (", c->peer(), ") answered the check of tx ", check.id.to_string(),
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
  bool claimed = false;
  if (outcome == tx_outcome::commit) {
    if (auto stale = claim_acks(*found.value())) {
      log::info("tx ", check.id.to_string(), " rolled back instead of committed by its check-back: ", *stale);
      rr.outcome = tx_outcome::rollback;
    } else {
      claimed = true;
    }
  }
  store_.resolve(rr, on_io<storage::resolve_result>(io_, [this, claimed, before = std::move(*found.value())](
                                                        result<storage::resolve_result> r) {
    if (claimed) release_acks(before);
    busy_.erase(before.id);
    if (!r) {
      // Still PREPARED and due: the next scan asks again.
      log::error("resolving tx ", before.id.to_string(), " after its check-back failed: ", r.error().message);
      return;
    }
    if (r.value().status == storage::resolve_status::applied) resolved(before, r.value(), resolver::check);
  }));
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
  store_.record_checks(std::move(updates), on_io<void>(io_, [this, ids = std::move(ids),
                                                        abandoned = std::move(abandoned)](result<void> r) {
    for (auto& id : ids) busy_.erase(id);
    if (!r) {
      log::error("recording ", ids.size(), " undecided transaction checks failed: ", r.error().message);
      return;
    }
    for (auto& [id, checks] : abandoned) {
      // record_checks skips transactions resolved meanwhile: count only what it abandoned.
      auto rec = store_.find_tx(id);
      if (!rec || !rec.value() || rec.value()->state != tx_state::abandoned || rec.value()->check_count != checks) {
        continue;
      }
      log::warn("tx ", id.to_string(), " of producer group '", rec.value()->producer_group, "' abandoned after ",
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
