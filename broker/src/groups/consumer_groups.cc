// Consumer-group delivery: Fetch with its long polls, Ack, Nack and Extend, and the tick that
// expires deadlines.

#include "groups/consumer_groups.h"

#include <algorithm>

#include "broker_metrics.h"
#include "io_thread.h"
#include "txmq/common/log.h"
#include "request_checks.h"
#include "webhooks/webhook_notifier.h"

namespace txmq::broker {

namespace {

constexpr std::size_t k_max_refs = 10'000;
// Longest long poll (docs/protocol.md §12): a larger max_wait_ms is clamped, so a parked fetch
// never holds its in-flight slot and its client's state for days.
constexpr std::chrono::milliseconds k_max_fetch_wait = std::chrono::minutes(5);
// Frame{correlation_id, fetch_response{...}} around the deliveries: tags, lengths, the id.
constexpr std::size_t k_fetch_envelope_bytes = 64;
// The encoding buffer of Fetch answers stays allocated up to this size (a 1,000-message fetch
// of 256-byte bodies takes about 330 KB), so answers do not allocate and fault in fresh pages.
constexpr std::size_t k_max_kept_scratch = 4u << 20;

}  // namespace

consumer_groups::consumer_groups(boost::asio::io_context& io, storage::store& store, admin_reads& reads,
                                 consumer_group_settings settings, broker_metrics* metrics)
    : io_(io), store_(store), reads_(reads), settings_(std::move(settings)), metrics_(metrics) {
  register_group_metrics();
}

consumer_groups::~consumer_groups() {
  if (!metrics_) return;
  (void)metrics_->registry.remove_collector("txmq_group_lag");
  (void)metrics_->registry.remove_collector("txmq_group_in_flight");
}

std::string consumer_groups::reserved_group(const std::string& name) {
  return "group name '" + name + "' is reserved for webhook subscriptions (see txmq webhook list)";
}

result<void> consumer_groups::load() {
  for (auto& info : store_.groups()) {
    // Served by the webhook notifier, with each subscription's own schedule.
    if (is_webhook_group(info.name)) continue;
    auto state = store_.load_group(info.name);
    if (!state) return state.error();
    auto& g = groups_[info.name];
    g.tracker = std::make_unique<group_tracker>(info.name, settings_.delivery, store_, &visible_end_);
    TXMQ_TRY(g.tracker->load(state.value(), now_ms()));
  }
  return outcome::success();
}

void consumer_groups::stop() {
  for (auto& [name, g] : groups_) {
    for (auto& w : g.waiters) {
      if (auto c = w.conn.lock()) c->respond_error(w.correlation_id, v1::SHUTTING_DOWN, "broker is shutting down");
    }
    g.waiters.clear();
  }
}

void consumer_groups::connection_closed(const responder& c) {
  for (auto& [name, g] : groups_) {
    g.waiters.remove_if([&](const waiter& w) {
      auto p = w.conn.lock();
      return !p || p.get() == &c;
    });
  }
}

group_tracker* consumer_groups::find(const std::string& name) {
  auto it = groups_.find(name);
  return it == groups_.end() ? nullptr : it->second.tracker.get();
}

void consumer_groups::wake(const std::vector<std::string>& topics, const std::vector<std::string>& groups) {
  for (auto& [name, g] : groups_) {
    if (g.waiters.empty()) continue;
    const bool named = std::find(groups.begin(), groups.end(), name) != groups.end();
    // The tracker by name, not the binding `g` itself: clang 14 (the fuzz build) cannot capture
    // a structured binding.
    const auto& tracker = *g.tracker;
    if (named || std::any_of(topics.begin(), topics.end(), [&](const std::string& t) { return tracker.subscribes(t); })) {
      serve_waiters(g);
    }
  }
}

void consumer_groups::wake_topic(const std::string& topic) {
  for (auto& [name, g] : groups_) {
    if (!g.waiters.empty() && g.tracker->subscribes(topic)) serve_waiters(g);
  }
}

void consumer_groups::register_group_metrics() {
  if (!metrics_) return;
  // Read at scrape time on the io thread, where the admin server runs: every group in one pass,
  // with one read of the topics' end offsets, so a scrape is O(topics × partitions + groups ×
  // partitions). (One callback per group, each reading the store's topic once per partition and
  // walking the group's deliveries, made 1,000 groups cost milliseconds of the io thread.)
  metrics_->registry.add_gauge_collector("txmq_group_lag", "Messages of the group's topics not yet acknowledged", [this] {
    const auto ends = read_end_offsets(store_, &visible_end_);
    common::metrics_registry::collected_series out;
    out.reserve(groups_.size());
    for (auto& [name, g] : groups_) out.push_back({{{"group", name}}, static_cast<double>(g.tracker->lag(ends))});
    return out;
  });
  metrics_->registry.add_gauge_collector("txmq_group_in_flight", "Deliveries awaiting their ack", [this] {
    common::metrics_registry::collected_series out;
    out.reserve(groups_.size());
    for (auto& [name, g] : groups_) out.push_back({{{"group", name}}, static_cast<double>(g.tracker->in_flight())});
    return out;
  });
}

// ---- delivery -------------------------------------------------------------------------------

void consumer_groups::with_group(const std::string& name, const std::vector<std::string>& topics, storage::group_start start,
                         std::function<void(result<group_entry*>)> fn) {
  auto it = groups_.find(name);
  if (it != groups_.end() &&
      std::all_of(topics.begin(), topics.end(), [&](const std::string& t) { return it->second.tracker->subscribes(t); })) {
    return fn(&it->second);
  }
  if (it == groups_.end() && groups_.size() >= settings_.max_groups) {
    return fn(make_error_code(protocol::errc::limit_exceeded));
  }
  storage::group_info info;
  info.name = name;
  info.topics = topics;
  store_.ensure_group(std::move(info), start, on_io<storage::group_state>(io_, [this, name, fn = std::move(fn)](result<storage::group_state> r) {
    if (!r) return fn(r.error());
    auto& g = groups_[name];
    if (!g.tracker) {
      g.tracker = std::make_unique<group_tracker>(name, settings_.delivery, store_, &visible_end_);
    }
    if (auto l = g.tracker->load(r.value(), now_ms()); !l) return fn(l.error());
    fn(&g);
  }));
}

bool consumer_groups::try_fetch(group_entry& g, responder& c, std::uint64_t corr, const std::vector<std::string>& topics,
                        std::size_t max, std::chrono::milliseconds ack_deadline, bool answer_empty) {
  // The answer must fit in one frame: the deliveries, and the envelope around them.
  const std::size_t max_bytes = settings_.max_frame_bytes - std::min<std::size_t>(settings_.max_frame_bytes / 2, k_fetch_envelope_bytes);
  auto r = g.tracker->fetch(c.id(), topics, max, max_bytes, ack_deadline, now_ms(), true);
  if (!r) {
    c.respond_error(corr, wire_code(r.error()), "fetch for group '" + g.tracker->name() + "' failed: " + r.error().message);
    return true;
  }
  persist(std::move(r.value().update));
  if (r.value().messages.empty() && !answer_empty) return false;
  const auto now = now_ms();
  if (metrics_) {
    std::uint64_t body_bytes = 0, redelivered = 0;
    for (auto& d : r.value().messages) {
      body_bytes += d.body_bytes;
      if (d.attempt > 1) {
        ++redelivered;
      } else {
        const auto from = std::max(d.publish_time_ms, d.deliver_at_ms);
        metrics_->end_to_end_latency.observe(std::chrono::milliseconds(std::max<std::int64_t>(0, now - from)));
      }
    }
    metrics_->messages_out.inc(r.value().messages.size());
    metrics_->bytes_out.inc(body_bytes);
    if (redelivered) metrics_->redeliveries.inc(redelivered);
  }
  encode_fetch_response(corr, r.value(), fetch_scratch_);
  c.respond_encoded(corr, fetch_scratch_);
  // A large answer's buffer is not kept between fetches.
  if (fetch_scratch_.capacity() > k_max_kept_scratch) std::string().swap(fetch_scratch_);
  return true;
}

void consumer_groups::fetch(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::FetchRequest& req) {
  if (auto bad = bad_name("group", req.group())) return c->respond_error(corr, v1::INVALID_ARGUMENT, *bad);
  if (is_webhook_group(req.group())) return c->respond_error(corr, v1::INVALID_ARGUMENT, reserved_group(req.group()));
  if (req.topics().empty()) return c->respond_error(corr, v1::INVALID_ARGUMENT, "fetch names no topic");
  std::vector<std::string> topics(req.topics().begin(), req.topics().end());
  for (auto& t : topics) {
    if (!store_.has_topic(t)) return c->respond_error(corr, v1::UNKNOWN_TOPIC, "no topic '" + t + "'");
  }
  std::size_t max = req.max_messages() ? req.max_messages() : settings_.default_fetch_messages;
  max = std::min<std::size_t>(max, settings_.max_fetch_messages);
  const auto wait = std::min(std::chrono::milliseconds(req.max_wait_ms()), k_max_fetch_wait);
  const std::chrono::milliseconds ack_deadline{req.ack_deadline_ms()};
  std::weak_ptr<responder> weak = c;
  with_group(req.group(), topics, storage::group_start::earliest,
             [this, weak, corr, topics, max, wait, ack_deadline, group = req.group()](result<group_entry*> g) {
    auto c = weak.lock();
    if (!c || !c->is_open()) return;
    if (!g) return c->respond_error(corr, wire_code(g.error()), "group '" + group + "': " + g.error().message);
    const bool answer_now = wait.count() == 0;
    // Older long polls first: a new fetch must not overtake parked ones.
    if (!g.value()->waiters.empty() && !answer_now) {
      g.value()->waiters.push_back({weak, corr, topics, max, ack_deadline, std::chrono::steady_clock::now() + wait});
      return serve_waiters(*g.value());
    }
    if (try_fetch(*g.value(), *c, corr, topics, max, ack_deadline, answer_now)) return;
    g.value()->waiters.push_back({weak, corr, topics, max, ack_deadline, std::chrono::steady_clock::now() + wait});
  });
}

void consumer_groups::serve_waiters(group_entry& g) {
  const auto now = now_ms();
  while (!g.waiters.empty() && g.tracker->has_deliverable(now)) {
    auto w = std::move(g.waiters.front());
    g.waiters.pop_front();
    auto c = w.conn.lock();
    if (!c || !c->is_open()) continue;
    if (!try_fetch(g, *c, w.correlation_id, w.topics, w.max, w.ack_deadline, false)) {
      // Deliverable, but not for this waiter's topics: keep it and stop here.
      g.waiters.push_front(std::move(w));
      break;
    }
  }
}

void consumer_groups::settle(const std::shared_ptr<responder>& c, std::uint64_t corr, settle_kind kind,
                             const std::string& group, const google::protobuf::RepeatedPtrField<v1::DeliveryRef>& refs, std::uint32_t ms,
                             std::string_view tx) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no consumer group '" + group + "'");
  if (refs.empty() || static_cast<std::size_t>(refs.size()) > k_max_refs) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT,
                            "between 1 and " + std::to_string(k_max_refs) + " deliveries per request");
  }
  if (kind == settle_kind::extend && ms == 0) return c->respond_error(corr, v1::INVALID_ARGUMENT, "extend_ms must be positive");
  std::vector<delivery_ref> mrefs;
  mrefs.reserve(static_cast<std::size_t>(refs.size()));
  for (auto& r : refs) mrefs.push_back({r.topic(), r.partition(), r.offset(), r.attempt()});
  auto& g = it->second;
  const auto now = now_ms();
  auto res = kind == settle_kind::ack    ? g.tracker->ack(mrefs, now, tx)
             : kind == settle_kind::nack ? g.tracker->nack(mrefs, std::chrono::milliseconds(ms), now, tx)
                                         : g.tracker->extend(mrefs, std::chrono::milliseconds(ms), now, tx);
  if (metrics_) {
    std::uint64_t ok = 0;
    for (auto e : res.results) ok += e == protocol::errc{} ? 1 : 0;
    if (kind == settle_kind::ack) metrics_->acks.inc(ok);
    if (kind == settle_kind::nack) metrics_->nacks.inc(ok);
  }
  auto answer = [results = res.results](responder& to, std::uint64_t id) {
    v1::Frame out;
    out.set_correlation_id(id);
    auto* dr = out.mutable_delivery_results();
    for (auto e : results) dr->add_results(e == protocol::errc{} ? v1::ERROR_CODE_UNSPECIFIED : v1::UNKNOWN_DELIVERY);
    to.respond(std::move(out));
  };
  // Cluster read-process-write: a transaction's Ack or Nack (its home leader's retry) of a
  // delivery no longer in flight is taken by the home leader as "an earlier try of this step
  // settled it". That is only true once the earlier try's change is on this partition's ISR: an
  // earlier try answered NOT_ENOUGH_REPLICAS left the change here, perhaps on no follower, and a
  // failover would lose it. So such an answer waits for the ISR to hold everything this node
  // wrote of the partition's group changes (the earlier try's included), and fails retriably
  // when it does not (docs/cluster.md "Read-process-write").
  std::vector<storage::group_change_ref> settled_before;
  if (gate_ && !tx.empty() && kind != settle_kind::extend) {
    for (std::size_t i = 0; i < res.results.size() && i < mrefs.size(); ++i) {
      if (res.results[i] == protocol::errc{}) continue;
      const auto& r = mrefs[i];
      auto read = store_.group_changes(r.topic, r.partition, 0, 0);
      if (!read) continue;  // the topic is gone: nothing to wait for
      settled_before.push_back({r.topic, r.partition, read.value().end});
    }
  }
  if (gate_ && (!is_empty(res.update) || !settled_before.empty())) {
    // Cluster mode: answered once the ISR holds the change (an acknowledged ack is never lost).
    if (metrics_) metrics_->dead_letters.inc(res.update.dead.size());
    std::weak_ptr<responder> weak = c;
    auto reply = [weak, corr, group, answer](result<void> g) {
      auto to = weak.lock();
      if (!to || !to->is_open()) return;
      if (!g) return to->respond_error(corr, wire_code(g.error()), "group '" + group + "': " + g.error().message);
      answer(*to, corr);
    };
    if (is_empty(res.update)) {
      gate_(std::move(settled_before), reply);
    } else {
      res.update.sync = true;
      store_.update_group(std::move(res.update), on_io<storage::group_update_result>(
          io_, [this, reply, settled_before = std::move(settled_before)](result<storage::group_update_result> r) mutable {
        if (!r) return reply(r.error());
        auto changes = std::move(r.value().changes);
        changes.insert(changes.end(), settled_before.begin(), settled_before.end());
        gate_(std::move(changes), reply);
      }));
    }
  } else {
    persist(std::move(res.update));
    answer(*c, corr);
  }
  // An ack may unblock the next message of a key.
  if (kind == settle_kind::ack && !g.waiters.empty()) serve_waiters(g);
}

void consumer_groups::persist(storage::group_update update, bool sync) {
  if (is_empty(update)) return;
  if (metrics_) metrics_->dead_letters.inc(update.dead.size());
  update.sync = sync;
  const std::string group = update.group;
  store_.update_group(std::move(update), [group](result<storage::group_update_result> r) {
    // A lost group write only means a redelivery; the store refuses all later writes anyway.
    if (!r) common::log::error("storing the state of group '", group, "' failed: ", r.error().message);
  });
}

void consumer_groups::partition_leadership(const std::string& topic, std::int32_t partition, bool leading) {
  const auto p = static_cast<std::uint32_t>(partition);
  if (!leading) {
    for (auto& [name, g] : groups_) g.tracker->drop_partition(topic, p);
    return;
  }
  std::size_t loaded = 0;
  for (auto& info : store_.groups()) {
    if (is_webhook_group(info.name)) continue;
    if (std::find(info.topics.begin(), info.topics.end(), topic) == info.topics.end()) continue;
    auto state = load_for_leadership(store_, info.name, topic, p);
    if (!state) {
      common::log::error("group '", info.name, "': cannot load its state of ", topic, "/", partition, ": ",
                         state.error().message);
      continue;
    }
    const bool has_cursor = std::any_of(state.value().cursors.begin(), state.value().cursors.end(),
                                        [&](const storage::group_cursor& c) { return c.topic == topic && c.partition == p; });
    if (!has_cursor) {
      // The group learned the topic here while this node followed the partition, and no state
      // of it came from the leader: its cursor starts now (ensure_group gives a known topic's
      // missing cursor of an owned partition), then the partition loads.
      storage::group_info gi;
      gi.name = info.name;
      gi.topics = {topic};
      store_.ensure_group(std::move(gi), storage::group_start::earliest,
                          on_io<storage::group_state>(io_, [this, name = info.name, topic, p](result<storage::group_state> r) {
        auto it = groups_.find(name);
        if (!r || it == groups_.end()) return;
        if (auto l = it->second.tracker->reload_partition(r.value(), topic, p, now_ms()); !l) {
          common::log::error("group '", name, "': cannot take its state of ", topic, "/", p, ": ", l.error().message);
          return;
        }
        if (!it->second.waiters.empty()) serve_waiters(it->second);
      }));
    }
    auto& g = groups_[info.name];
    if (!g.tracker) g.tracker = std::make_unique<group_tracker>(info.name, settings_.delivery, store_, &visible_end_);
    if (auto r = g.tracker->reload_partition(state.value(), topic, p, now_ms()); !r) {
      common::log::error("group '", info.name, "': cannot take its state of ", topic, "/", partition, ": ",
                         r.error().message);
      continue;
    }
    ++loaded;
    if (!g.waiters.empty()) serve_waiters(g);
  }
  if (loaded) common::log::info("partition ", topic, "/", partition, ": state of ", loaded, " consumer group(s) loaded (leading)");
}

void consumer_groups::tick() {
  const auto now = now_ms();
  const auto steady_now = std::chrono::steady_clock::now();
  for (auto& [name, g] : groups_) {
    persist(g.tracker->expire(now));
    if (!g.waiters.empty()) {
      serve_waiters(g);
      // Long polls whose time is up get an empty answer.
      for (auto it = g.waiters.begin(); it != g.waiters.end();) {
        if (it->deadline <= steady_now) {
          if (auto c = it->conn.lock()) try_fetch(g, *c, it->correlation_id, it->topics, it->max, it->ack_deadline, true);
          it = g.waiters.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
}

}  // namespace txmq::broker
