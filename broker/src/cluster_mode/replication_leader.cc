// Replication, the leader's side (replication.h): serving ReplicaFetch, the high watermark,
// acknowledgements that wait for the ISR, and the leader's ISR changes in etcd. It is one piece
// (over 600 lines since fetch sessions) because the fetch answer, the follower's report that
// moves the high watermark and the waiters it settles share the leader's per-partition state;
// the session answer's cut under the frame limit is apart (fetch_session.h).

#include <algorithm>
#include <future>

#include "cluster_mode/cluster_node.h"
#include "cluster_mode/fetch_session.h"
#include "cluster_mode/replication.h"
#include "io_thread.h"
#include "txmq/common/log.h"
#include "txmq/protocol/errc.h"

namespace txmq::broker::cluster_mode {

namespace asio = boost::asio;

void lose_tail_for_test(storage::store& store, std::uint64_t n) {
  for (const auto& t : store.topics()) {
    for (std::uint32_t p = 0; p < t.config.partitions; ++p) {
      storage::read_request r;
      r.topic = t.config.name;
      r.partition = p;
      r.max_messages = 0;
      auto end = store.read(r);
      if (!end || end.value().high_watermark <= end.value().start_offset) continue;
      const auto to = end.value().high_watermark - std::min(n, end.value().high_watermark - end.value().start_offset);
      std::promise<result<std::uint64_t>> done;
      store.truncate(t.config.name, p, to, [&done](result<std::uint64_t> x) { done.set_value(std::move(x)); });
      auto x = done.get_future().get();
      common::log::warn("TXMQ_TEST_LOSE_TAIL: ", t.config.name, "/", p, " truncated from ", end.value().high_watermark,
                        " to ", to, x ? "" : ": " + x.error().message, " (a test fault)");
    }
  }
}

replication::replication(asio::io_context& io, storage::store& store, cluster_node& node, replication_settings settings)
    : io_(io), store_(store), node_(node), settings_(settings) {}

replication::~replication() { stop(); }

const cluster::partition_entry* replication::entry_of(const key& k) const {
  if (!state_) return nullptr;
  auto it = state_->partitions.find(k);
  return it == state_->partitions.end() ? nullptr : &it->second;
}

std::int32_t replication::replicas_of(const std::string& topic) const {
  if (!state_) return 1;
  for (const auto& t : state_->topics) {
    if (t.name == topic) return t.replicas;
  }
  return 1;
}

std::size_t replication::min_insync_of(const std::string& topic) const {
  if (state_) {
    for (const auto& t : state_->topics) {
      if (t.name == topic) return cluster::min_insync_replicas(t);
    }
  }
  return 1;
}

namespace {
// The partition's fsynced end and written end in this node's store ({0, 0} when it has none).
std::pair<std::uint64_t, std::uint64_t> store_ends(const storage::store& store, const std::string& topic,
                                                   std::int32_t partition) {
  if (!store.has_topic(topic)) return {0, 0};
  storage::read_request r;
  r.topic = topic;
  r.partition = static_cast<std::uint32_t>(partition);
  r.max_messages = 0;
  auto out = store.read(r);
  if (!out) return {0, 0};
  return {out.value().high_watermark, out.value().written_end};
}
}  // namespace

std::uint64_t replication::local_end(const std::string& topic, std::int32_t partition) const {
  return store_ends(store_, topic, partition).first;
}

std::uint64_t replication::written_end(const std::string& topic, std::int32_t partition) const {
  return store_ends(store_, topic, partition).second;
}

bool replication::ready_to_lead(const std::string& topic, std::int32_t partition) const {
  if (drain_) return false;  // handing its leaderships over: no new writes
  const key k{topic, partition};
  const auto* e = entry_of(k);
  if (!e || e->state.leader != node_.id()) return false;
  auto it = leading_.find(k);
  return it != leading_.end() && it->second.epoch == e->state.leader_epoch && it->second.epoch_recorded;
}

std::optional<std::uint64_t> replication::high_watermark(const key& k) const {
  const auto* e = entry_of(k);
  if (!e || e->state.leader != node_.id()) return std::nullopt;
  auto it = leading_.find(k);
  if (it == leading_.end() || !it->second.epoch_recorded || it->second.epoch != e->state.leader_epoch) {
    return std::nullopt;
  }
  const auto& lp = it->second;
  std::uint64_t hw = local_end(k.first, k.second);
  if (settings_.ack_before_replicas) return hw;  // the deliberately broken build (replication.h)
  if (lp.newer_epoch_seen > lp.epoch) return std::nullopt;
  const auto& isr = e->state.isr;
  if (std::find(isr.begin(), isr.end(), node_.id()) == isr.end()) return std::nullopt;
  if (isr.size() < min_insync_of(k.first)) return std::nullopt;
  for (auto m : isr) {
    if (m == node_.id()) continue;
    auto f = lp.followers.find(m);
    hw = std::min(hw, f == lp.followers.end() || !f->second.reported ? 0 : f->second.durable);
  }
  return hw;
}

std::uint64_t replication::visible_end(const std::string& topic, std::uint32_t partition, std::uint64_t log_end) const {
  const key k{topic, static_cast<std::int32_t>(partition)};
  const auto* e = entry_of(k);
  if (!e || e->state.leader != node_.id()) return 0;
  if (replicas_of(topic) <= 1) return log_end;
  auto it = leading_.find(k);
  if (it == leading_.end() || it->second.epoch != e->state.leader_epoch) return 0;
  return std::min(log_end, it->second.visible);
}

void replication::advance_visible(const key& k) {
  auto it = leading_.find(k);
  if (it == leading_.end()) return;
  const auto hw = high_watermark(k);
  if (!hw || *hw <= it->second.visible) return;
  it->second.visible = *hw;
  if (on_visible_) on_visible_(k.first);
}

void replication::await_replicas(const std::string& topic, std::vector<std::pair<std::int32_t, std::uint64_t>> need,
                                 std::function<void(result<void>)> done) {
  std::set<std::int32_t> parts;
  for (auto& n : need) parts.insert(n.first);
  waiters_.push_back({topic, std::move(need), clock::now() + settings_.replication_timeout, std::move(done)});
  // The followers parked on these partitions take the new messages now.
  for (auto p : parts) wake_parked({topic, p}, true);
  // With an ISR of the leader alone (min_insync_replicas 1) its own fsync moves the HW.
  for (auto p : parts) advance_visible({topic, p});
  settle_waiters();
}

void replication::on_written(const std::string& topic, const std::vector<std::int32_t>& partitions) {
  // The followers parked on these partitions take the messages now, before the leader's fsync:
  // their fsyncs run beside it (the acknowledgement still waits for every one of them).
  if (partitions.empty()) {
    for (auto& [k, lp] : leading_) {
      if (k.first == topic && !lp.parked.empty()) wake_parked(k, true);
    }
    return;
  }
  for (auto p : partitions) wake_parked({topic, p}, true);
}

void replication::settle_waiters() {
  const auto now = clock::now();
  std::map<key, std::optional<std::uint64_t>> hw;  // computed once per partition per call
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    bool covered = true;
    for (auto& [p, offset] : it->need) {
      const key k{it->topic, p};
      auto h = hw.find(k);
      if (it->group) {
        const auto g = group_watermark(k);
        if (!g || *g < offset) covered = false;
        continue;
      }
      if (h == hw.end()) h = hw.emplace(k, high_watermark(k)).first;
      if (!h->second || *h->second < offset) covered = false;
    }
    if (covered) {
      auto done = std::move(it->done);
      it = waiters_.erase(it);
      done(outcome::success());
    } else if (now >= it->deadline) {
      auto done = std::move(it->done);
      std::string why = "not acknowledged: the in-sync replicas of '" + it->topic +
                        "' did not all fsync it (or fewer than min_insync_replicas are in sync) within "
                        "replication_timeout; retry with the same ids";
      it = waiters_.erase(it);
      done(error(protocol::errc::not_enough_replicas, std::move(why)));
    } else {
      ++it;
    }
  }
}

std::optional<std::pair<v1::ErrorCode, std::string>> replication::check_fetch(const v1::ReplicaFetchRequest& req) {
  const key k{req.topic(), static_cast<std::int32_t>(req.partition())};
  const auto* e = entry_of(k);
  if (!e || e->state.leader != node_.id()) {
    return std::pair{v1::NOT_LEADER, "node " + std::to_string(node_.id()) + " does not lead " + req.topic() + "/" +
                                         std::to_string(req.partition())};
  }
  if (req.leader_epoch() < e->state.leader_epoch) {
    return std::pair{v1::FENCED, "the follower's leader epoch " + std::to_string(req.leader_epoch()) +
                                     " is older than " + std::to_string(e->state.leader_epoch)};
  }
  auto it = leading_.find(k);
  if (req.leader_epoch() > e->state.leader_epoch) {
    // A follower knows a newer epoch: another leader may exist. Stop acknowledging here until
    // this node's own view moves on (it will read that it no longer leads).
    if (it != leading_.end()) it->second.newer_epoch_seen = std::max(it->second.newer_epoch_seen, req.leader_epoch());
    common::log::warn("partition ", req.topic(), "/", req.partition(), ": follower ", req.node_id(),
                      " knows leader epoch ", req.leader_epoch(), ", newer than this leader's ",
                      e->state.leader_epoch, ": acknowledgements stop");
    return std::pair{v1::FENCED, "this leader's epoch " + std::to_string(e->state.leader_epoch) +
                                     " is older than the follower's " + std::to_string(req.leader_epoch())};
  }
  if (it == leading_.end() || !it->second.epoch_recorded || it->second.epoch != e->state.leader_epoch) {
    return std::pair{v1::NOT_LEADER,
                     "node " + std::to_string(node_.id()) + " is becoming the leader of this partition; retry"};
  }
  return std::nullopt;
}

bool replication::take_report(const key& k, const v1::ReplicaFetchRequest& req) {
  const auto* e = entry_of(k);
  auto& lp = leading_.at(k);
  auto& f = lp.followers[req.node_id()];
  if (req.groups()) {
    f.group_durable = req.group_seq();
    f.group_reported = true;
  }
  const auto now = clock::now();
  const bool first = !f.reported;
  f.durable = req.durable_offset();
  f.reported = true;
  const std::uint64_t end = local_end(k.first, k.second);
  if (req.durable_offset() >= end) {
    f.caught_up_at = now;
  } else if (!first && req.durable_offset() >= f.prev_fetch_end) {
    f.caught_up_at = std::max(f.caught_up_at, f.prev_fetch_at);
  }
  f.prev_fetch_end = end;
  f.prev_fetch_at = now;
  const auto& isr = e->state.isr;
  const auto& replicas = e->state.replicas;
  // Kafka's rule for joining the ISR: the follower holds everything the ISR holds (its end
  // reaches the minimum over the ISR), so the high watermark does not move back with it.
  std::uint64_t isr_min = end;
  for (auto m : isr) {
    if (m == node_.id()) continue;
    auto o = lp.followers.find(m);
    isr_min = std::min(isr_min, o == lp.followers.end() || !o->second.reported ? 0 : o->second.durable);
  }
  // And it holds every group change the ISR holds: a new leader comes from the ISR, so a
  // member must never lack an acknowledged ack.
  std::uint64_t group_isr_min = local_group_end(k.first, k.second);
  for (auto m : isr) {
    if (m == node_.id()) continue;
    auto o = lp.followers.find(m);
    group_isr_min = std::min(group_isr_min, o == lp.followers.end() || !o->second.group_reported ? 0 : o->second.group_durable);
  }
  const bool groups_caught_up = req.groups() && req.group_seq() >= group_isr_min;
  if (req.durable_offset() >= isr_min && groups_caught_up && std::find(isr.begin(), isr.end(), req.node_id()) == isr.end() &&
      std::find(replicas.begin(), replicas.end(), req.node_id()) != replicas.end()) {
    auto bigger = isr;
    bigger.push_back(req.node_id());
    change_isr(k, std::move(bigger), "caught up");
  }
  advance_visible(k);
  settle_waiters();
  // Nothing new (messages or group changes): the fetch may be held until an append or
  // fetch_wait (a long poll). Not a fetch from a follower that is still fsyncing what it fetched
  // before (durable below fetch offset, the pipelined follower): it is answered "nothing new" at
  // once, so that it reports its fsync in its next fetch instead of after this one's wait.
  return req.fetch_offset() >= written_end(k.first, k.second) && req.durable_offset() >= req.fetch_offset() &&
         (!req.groups() || req.group_seq() >= local_group_end(k.first, k.second));
}

void replication::replica_fetch(const std::shared_ptr<responder>& c, std::uint64_t corr,
                                const v1::ReplicaFetchRequest& req) {
  state_ = node_.snapshot();
  if (req.partition_fetches_size() > 0) return session_fetch_request(c, corr, req);
  const key k{req.topic(), static_cast<std::int32_t>(req.partition())};
  if (auto refused = check_fetch(req)) return c->respond_error(corr, refused->first, refused->second);
  if (req.group_snapshot()) {
    if (req.group_snapshot_from() == 0) return start_group_snapshot(c, corr, req);
    return answer_fetch(c, corr, req);
  }
  if (!req.epoch_query() && take_report(k, req)) {
    leading_.at(k).parked.push_back({c, corr, req, clock::now() + settings_.fetch_wait, nullptr});
    return;
  }
  answer_fetch(c, corr, req);
}

void replication::session_fetch_request(const std::shared_ptr<responder>& c, std::uint64_t corr,
                                        const v1::ReplicaFetchRequest& req) {
  // Every partition's report is taken now; the request is held only when none of the partitions
  // served here has anything new (refused ones are answered with the rest: holding them costs the
  // follower at most fetch_wait, as its pause after a refusal did).
  std::vector<key> held;
  bool hold = true;
  for (const auto& sub : req.partition_fetches()) {
    if (sub.epoch_query() || sub.group_snapshot() || sub.node_id() != req.node_id()) {
      return c->respond_error(corr, v1::INVALID_ARGUMENT,
                              "a fetch session carries plain fetches of the asking node only (epoch queries and "
                              "group snapshots are single-partition ReplicaFetch requests)");
    }
    if (check_fetch(sub)) continue;
    const key k{sub.topic(), static_cast<std::int32_t>(sub.partition())};
    if (take_report(k, sub)) {
      held.push_back(k);
    } else {
      hold = false;
    }
  }
  auto s = std::make_shared<session_fetch>(session_fetch{c, corr, req, clock::now() + settings_.fetch_wait, false});
  if (!hold || held.empty()) return answer_session(s);
  for (const auto& k : held) leading_.at(k).parked.push_back({{}, 0, {}, s->until, s});
}

void replication::answer_session_later(std::shared_ptr<session_fetch> s) {
  // After the caller's change of leading_ is complete: each partition is answered from the new
  // state (FENCED or NOT_LEADER for the one that changed).
  std::weak_ptr<bool> alive = alive_;
  asio::post(io_, [this, alive, s = std::move(s)] {
    if (alive.expired() || !*alive.lock()) return;
    state_ = node_.snapshot();
    answer_session(s);
  });
}

void replication::answer_session(const std::shared_ptr<session_fetch>& s) {
  if (s->answered) return;
  s->answered = true;
  auto c = s->c.lock();
  if (!c) return;
  const auto n = static_cast<std::size_t>(s->req.partition_fetches_size());
  auto answers = pack_partition_answers(
      n, next_session_start_++ % n, settings_.max_answer_bytes,
      [&](std::size_t i, std::size_t left) {
        return session_partition_answer(s->req.partition_fetches(static_cast<int>(i)), left, false);
      },
      [&](std::size_t i) { return session_partition_answer(s->req.partition_fetches(static_cast<int>(i)), 0, true); });
  v1::Frame out;
  out.set_correlation_id(s->corr);
  auto* resp = out.mutable_replica_fetch_response();
  for (auto& a : answers) resp->add_partition_answers(std::move(a));
  c->respond(std::move(out));
}

std::string replication::session_partition_answer(const v1::ReplicaFetchRequest& req, std::size_t budget, bool skip) {
  v1::ReplicaFetchResponse fresh;
  fresh.set_topic(req.topic());
  fresh.set_partition(req.partition());
  if (auto refused = check_fetch(req)) {
    fresh.set_error_code(refused->first);
    fresh.set_error_message(std::move(refused->second));
    return fresh.SerializeAsString();
  }
  const key k{req.topic(), static_cast<std::int32_t>(req.partition())};
  auto& lp = leading_.at(k);
  const auto* e = entry_of(k);
  fresh.set_leader_epoch(e->state.leader_epoch);
  fresh.set_log_end(local_end(k.first, k.second));
  fresh.set_high_watermark(high_watermark(k).value_or(0));
  if (auto t = store_.topic(req.topic())) fresh.set_partitions(t->config.partitions);
  if (skip) return fresh.SerializeAsString();  // no room left: no batches, no group changes
  if (!lp.epochs) {
    auto loaded = store_.leader_epochs(req.topic(), req.partition());
    if (!loaded) {
      fresh.set_error_code(v1::STORAGE_ERROR);
      fresh.set_error_message(loaded.error().message);
      return fresh.SerializeAsString();
    }
    lp.epochs = std::move(loaded).value();
  }
  if (req.groups()) add_group_part(req, fresh, budget);
  // The batches part: an earlier answer's from the same offset (another follower fetched it),
  // or read now.
  for (const auto& cached : lp.encoded) {
    if (cached.encoded.empty() || cached.from != req.fetch_offset() || cached.max_messages != req.max_messages()) continue;
    fresh.set_log_start(cached.log_start);
    return cached.encoded + fresh.SerializeAsString();
  }
  // The stored records as they are (no parse, no encoding of a message: the leader's read and
  // encoding were ~7 % of a replicated publish's CPU, docs/BENCHMARKS.md "Replication's CPU").
  auto read = store_.read_raw(session_read(req, settings_.max_fetch_messages, budget));
  std::string encoded;
  if (read && !(req.fetch_offset() < read.value().start_offset) &&
      !encode_raw_batches(read.value().runs, *lp.epochs, encoded)) {
    read = error(protocol::errc::internal, "a stored batch of " + req.topic() + "/" + std::to_string(req.partition()) +
                                               " is malformed");
  }
  if (!read) {
    fresh.set_error_code(v1::STORAGE_ERROR);
    fresh.set_error_message(read.error().message);
    fresh.clear_group_changes();
    return fresh.SerializeAsString();
  }
  fresh.set_log_start(read.value().start_offset);
  // Below the leader's log start (retention): no batches, log_start tells the follower where to
  // restart its log (docs/cluster.md "Retention").
  if (req.fetch_offset() < read.value().start_offset || encoded.empty()) return fresh.SerializeAsString();
  auto& slot = lp.encoded[lp.next_encoded];
  lp.next_encoded = (lp.next_encoded + 1) % lp.encoded.size();
  slot.encoded = std::move(encoded);
  slot.from = req.fetch_offset();
  slot.max_messages = req.max_messages();
  slot.log_start = read.value().start_offset;
  return slot.encoded + fresh.SerializeAsString();
}

void replication::answer_fetch(const std::shared_ptr<responder>& c, std::uint64_t corr,
                               const v1::ReplicaFetchRequest& req) {
  const key k{req.topic(), static_cast<std::int32_t>(req.partition())};
  auto lp = leading_.find(k);
  if (lp == leading_.end()) return c->respond_error(corr, v1::NOT_LEADER, "this node no longer leads the partition");
  if (!lp->second.epochs) {
    auto loaded = store_.leader_epochs(req.topic(), req.partition());
    if (!loaded) return c->respond_error(corr, v1::STORAGE_ERROR, loaded.error().message);
    lp->second.epochs = std::move(loaded).value();
  }
  const auto& epochs = *lp->second.epochs;
  const std::uint64_t end = local_end(k.first, k.second);
  if (!req.epoch_query()) {
    for (auto& a : lp->second.answers) {
      if (!a.frame || a.from != req.fetch_offset() || a.max_messages != req.max_messages()) continue;
      a.frame->set_correlation_id(corr);
      auto* resp = a.frame->mutable_replica_fetch_response();
      resp->set_log_end(end);
      resp->set_high_watermark(high_watermark(k).value_or(0));
      // The group part is the asking follower's own (from its group_seq), never the cached one.
      resp->clear_group_changes();
      resp->clear_group_end();
      resp->clear_group_snapshot_needed();
      if (req.groups()) add_group_part(req, *resp, settings_.max_answer_bytes);
      return c->respond_with(*a.frame);
    }
  }
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* resp = out.mutable_replica_fetch_response();
  const auto* e = entry_of(k);
  resp->set_leader_epoch(e ? e->state.leader_epoch : -1);
  resp->set_log_end(end);
  resp->set_high_watermark(high_watermark(k).value_or(0));
  if (auto t = store_.topic(req.topic())) resp->set_partitions(t->config.partitions);
  if ((req.groups() || req.group_snapshot()) && !req.epoch_query()) {
    add_group_part(req, *resp, settings_.max_answer_bytes);
    if (req.group_snapshot()) return c->respond(std::move(out));
  }
  if (req.epoch_query()) {
    if (req.last_epoch() < 0) {
      resp->set_epoch_end_epoch(-1);
      resp->set_epoch_end_offset(0);
    } else {
      // Up to the written end: a follower may hold (fsynced) what this leader wrote and sent it
      // before its own fsync; if this leader loses that by a crash, it restarts under a new
      // epoch (lead_tick) and the epoch it had ends at its shorter log.
      auto ee = storage::end_offset_for_epoch(epochs, static_cast<std::uint32_t>(req.last_epoch()),
                                              written_end(k.first, k.second));
      resp->set_epoch_end_epoch(ee.epoch ? static_cast<std::int64_t>(*ee.epoch) : -1);
      resp->set_epoch_end_offset(ee.end_offset);
    }
    return c->respond(std::move(out));
  }
  storage::read_request r;
  r.topic = req.topic();
  r.partition = req.partition();
  r.from_offset = req.fetch_offset();
  r.max_messages = req.max_messages() ? std::min(req.max_messages(), settings_.max_fetch_messages)
                                      : settings_.max_fetch_messages;
  // Written but maybe not yet fsynced here: the follower's fsync overlaps the leader's
  // (docs/cluster.md "Replication": why that stays safe).
  r.unsynced = true;
  // Half an answer: the other half is for the group changes (replication_groups.cc).
  r.max_bytes = std::min<std::size_t>(4u << 20, settings_.max_answer_bytes / 2);
  auto read = store_.read(r);
  if (!read) return c->respond_error(corr, v1::STORAGE_ERROR, read.error().message);
  resp->set_log_start(read.value().start_offset);
  if (req.fetch_offset() < read.value().start_offset) {
    // Retention removed what the follower needs next: no batches, and log_start tells it where
    // to restart its log (it discards what it holds; docs/cluster.md "Retention").
    return c->respond(std::move(out));
  }
  *resp->mutable_batches() = std::move(*batches_of(std::move(read.value().messages), epochs).mutable_batches());
  if (resp->batches_size() == 0) return c->respond(std::move(out));
  auto& slot = lp->second.answers[lp->second.next_answer];
  lp->second.next_answer = (lp->second.next_answer + 1) % lp->second.answers.size();
  slot.frame = std::make_unique<v1::Frame>(std::move(out));
  slot.from = req.fetch_offset();
  slot.max_messages = req.max_messages();
  c->respond_with(*slot.frame);
}

void replication::wake_parked(const key& k, bool all) {
  auto it = leading_.find(k);
  if (it == leading_.end() || it->second.parked.empty()) return;
  const auto now = clock::now();
  auto parked = std::move(it->second.parked);
  it->second.parked.clear();
  for (auto& f : parked) {
    if (f.session && f.session->answered) continue;  // woken through another of its partitions
    if (!all && now < f.until) {
      it->second.parked.push_back(std::move(f));
      continue;
    }
    if (f.session) {
      answer_session(f.session);
    } else if (auto c = f.c.lock()) {
      answer_fetch(c, f.corr, f.req);
    }
  }
}

void replication::change_isr(const key& k, std::vector<cluster::node_id> isr, const char* why) {
  const auto* e = entry_of(k);
  if (!e) return;
  auto state = e->state;
  state.isr = std::move(isr);
  write_state(k, std::move(state), why);
}

void replication::write_state(const key& k, cluster::partition_state state, const char* why) {
  auto it = leading_.find(k);
  const auto* e = entry_of(k);
  if (it == leading_.end() || !e || it->second.isr_write_pending || clock::now() < it->second.isr_retry_after) return;
  it->second.isr_write_pending = true;
  const char* what = state.leader_epoch == e->state.leader_epoch ? "ISR change" : "new leader epoch";
  std::weak_ptr<bool> alive = alive_;
  node_.write_isr(k.first, k.second, state, e->mod_revision,
                  [this, alive, k, what, why, revision = e->mod_revision,
                   epoch = it->second.epoch](result<void> r) {  // on the cluster thread
    asio::post(io_, [this, alive, k, what, why, revision, epoch, r = std::move(r)] {
      if (alive.expired() || !*alive.lock()) return;
      auto it = leading_.find(k);
      const bool current = it != leading_.end() && it->second.epoch == epoch;
      if (current) it->second.isr_write_pending = false;
      if (r) {
        if (current) it->second.isr_retry_delay = std::chrono::milliseconds(0);
        common::log::info("partition ", k.first, "/", k.second, ": ", what, " (", why, ") written to etcd over revision ",
                          revision);
        return;
      }
      std::string retry;
      if (current) {
        auto& d = it->second.isr_retry_delay;
        d = std::clamp(d * 2, std::chrono::milliseconds(100), std::chrono::milliseconds(2000));
        it->second.isr_retry_after = clock::now() + d;
        retry = "; tried again in " + std::to_string(d.count()) + " ms at the earliest";
      }
      common::log::info("partition ", k.first, "/", k.second, ": ", what, " not written (", why, "): ", r.error().message,
                        retry);
    });
  });
}

void replication::lead_tick(const cluster::cluster_state& state) {
  const auto now = clock::now();
  std::set<key> led;
  for (const auto& [k, e] : state.partitions) {
    if (e.state.leader != node_.id() || replicas_of(k.first) <= 1) continue;
    led.insert(k);
    auto& lp = leading_[k];
    if (lp.epoch != e.state.leader_epoch) {
      auto parked = std::move(lp.parked);
      lp = leader_part{};
      lp.epoch = e.state.leader_epoch;
      lp.since = now;
      for (auto& f : parked) {
        if (f.session) {
          answer_session_later(f.session);
        } else if (auto c = f.c.lock()) {
          c->respond_error(f.corr, v1::FENCED, "the partition's leader epoch changed");
        }
      }
    }
    // Record the epoch in the log before appending under it; not while the follower task of
    // the previous epoch may still append (it ends itself on the next state it reads).
    if (!lp.epoch_recorded && !lp.recording && !lp.isr_write_pending && !following_.contains(k) &&
        store_.has_topic(k.first)) {
      // This log holds the epoch already, yet this process never led under it: the node led
      // it before a restart. Its followers may hold messages it wrote then and sent before
      // their fsync, which a crash of the machine may have taken from this log: leading on
      // under the same epoch would write other messages at those offsets. It asks for the next
      // epoch instead (same leader, same ISR), and the followers then truncate to where its
      // log ends (docs/cluster.md "Replication").
      auto logged = store_.leader_epochs(k.first, static_cast<std::uint32_t>(k.second));
      if (logged && !logged.value().empty() && logged.value().back().epoch == static_cast<std::uint32_t>(lp.epoch) &&
          !led_here_.contains({k, lp.epoch})) {
        auto next = e.state;
        next.leader_epoch = lp.epoch + 1;
        write_state(k, std::move(next), "restarted leader takes a new epoch");
        continue;
      }
      led_here_.insert({k, lp.epoch});
      lp.recording = true;
      std::weak_ptr<bool> alive = alive_;
      store_.begin_epoch(k.first, static_cast<std::uint32_t>(k.second), static_cast<std::uint32_t>(lp.epoch),
                         on_io<std::uint64_t>(io_, [this, alive, k = k, epoch = lp.epoch](result<std::uint64_t> r) {
        if (alive.expired() || !*alive.lock()) return;
        auto it = leading_.find(k);
        if (it == leading_.end() || it->second.epoch != epoch) return;
        it->second.recording = false;
        if (!r) {
          common::log::error("partition ", k.first, "/", k.second, ": cannot record leader epoch ", epoch, ": ",
                             r.error().message);
          return;
        }
        it->second.epoch_recorded = true;
        common::log::info("partition ", k.first, "/", k.second, ": leading at epoch ", epoch, " from offset ",
                          r.value());
        group_leadership(k, true);
      }));
    }
    if (!lp.epoch_recorded || lp.isr_write_pending || now < lp.isr_retry_after) continue;
    // A follower that has not caught up for replica_lag_max leaves the ISR (in etcd first).
    for (auto m : e.state.isr) {
      if (m == node_.id()) continue;
      auto f = lp.followers.find(m);
      const auto caught = std::max(lp.since, f == lp.followers.end() ? lp.since : f->second.caught_up_at);
      if (now - caught > settings_.replica_lag_max) {
        std::vector<cluster::node_id> smaller;
        for (auto x : e.state.isr) {
          if (x != m) smaller.push_back(x);
        }
        common::log::warn("partition ", k.first, "/", k.second, ": follower ", m, " has not caught up for ",
                          std::chrono::duration_cast<std::chrono::milliseconds>(now - caught).count(),
                          " ms: removing it from the ISR");
        change_isr(k, std::move(smaller), "follower lagging");
        break;
      }
    }
  }
  for (auto it = leading_.begin(); it != leading_.end();) {
    if (led.contains(it->first)) {
      ++it;
      continue;
    }
    for (auto& f : it->second.parked) {
      if (f.session) {
        answer_session_later(f.session);
      } else if (auto c = f.c.lock()) {
        c->respond_error(f.corr, v1::NOT_LEADER, "this node no longer leads the partition");
      }
    }
    const key gone = it->first;
    it = leading_.erase(it);
    group_leadership(gone, false);
  }
}

void replication::publish_lag(const cluster::cluster_state& state) {
  const auto now = clock::now();
  if (now - lag_published_ < std::chrono::milliseconds(500)) return;
  lag_published_ = now;
  std::vector<replica_lag_sample> lag;
  for (const auto& [k, lp] : leading_) {
    auto e = state.partitions.find(k);
    if (e == state.partitions.end() || e->second.state.leader != node_.id() || !lp.epoch_recorded) continue;
    const std::uint64_t end = local_end(k.first, k.second);
    for (auto m : e->second.state.replicas) {
      if (m == node_.id()) continue;
      // A follower that has not reported under this epoch (dead, or not fetching yet) lags by
      // the whole log.
      auto f = lp.followers.find(m);
      const std::uint64_t durable = f == lp.followers.end() || !f->second.reported ? 0 : f->second.durable;
      lag.push_back({k.first, k.second, m, end > durable ? end - durable : 0});
    }
  }
  node_.set_replica_lag(std::move(lag));
}

void replication::tick() {
  state_ = node_.snapshot();
  if (!state_) return;
  lead_tick(*state_);
  publish_lag(*state_);
  follow_tick(*state_);
  // An ISR change read from etcd (a follower out) can move the HW without any report.
  for (auto& [k, lp] : leading_) {
    (void)lp;
    advance_visible(k);
  }
  settle_waiters();
  for (auto& [k, lp] : leading_) {
    (void)lp;
    wake_parked(k, false);
  }
  if (drain_) drain_step();
}

}  // namespace txmq::broker::cluster_mode
