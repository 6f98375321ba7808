// Webhook delivery: the subscriptions' lifecycle, the pump that starts attempts under each
// subscription's concurrency and rate, the attempt itself (sign, POST, classify the answer), its
// outcome in the group and the attempt log (merged per io-loop turn), and the tick. The admin
// requests are in webhook_admin.cc, the reconciliation API in webhook_reconcile.cc.

#include "webhooks/webhook_notifier.h"

#include <algorithm>

#include <boost/beast/http.hpp>

#include "broker_metrics.h"
#include "io_thread.h"
#include "txmq/common/log.h"
#include "webhooks/webhook_payload.h"
#include "webhooks/webhook_subscription.h"

namespace txmq::broker {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using std::chrono::milliseconds;

namespace {

// The tracker's ack deadline only matters when an attempt never completes (it always does,
// within its timeout); the margin keeps a slow completion from racing the deadline.
constexpr milliseconds k_deadline_margin = std::chrono::seconds(30);
constexpr std::size_t k_expiry_batch = 10'000;
constexpr std::uint32_t k_max_retry_after_ms = 24u * 3600 * 1000;

// "WEBHOOK_TIMED_OUT" -> "timed_out": the metric label (the CLI prints the same words).
std::string outcome_name(v1::WebhookOutcome o) {
  std::string name = v1::WebhookOutcome_Name(o).substr(std::string_view("WEBHOOK_").size());
  for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return name;
}

}  // namespace

webhook_notifier::webhook_notifier(asio::io_context& io, storage::store& store, admin_reads& reads,
                                   webhook_settings settings, broker_metrics* metrics)
    : io_(io),
      store_(store),
      reads_(reads),
      settings_(std::move(settings)),
      metrics_(metrics),
      tls_(asio::ssl::context::tls_client),
      tick_(io) {
  if (!metrics_) return;
  // Read at scrape time on the io thread, where the admin server runs: every subscription in
  // one pass over one read of the topics' end offsets, as txmq_group_lag is. (One callback per
  // subscription, each copying its topic per partition and walking its deliveries, made a
  // scrape with a thousand subscriptions cost the io thread tens of milliseconds.)
  metrics_->registry.add_gauge_collector("txmq_webhook_backlog", "Messages of the subscription not yet settled", [this] {
    const auto ends = read_end_offsets(store_);
    common::metrics_registry::collected_series out;
    out.reserve(subs_.size());
    for (auto& [id, s] : subs_) out.push_back({{{"webhook", id}}, static_cast<double>(s->tracker->lag(ends))});
    return out;
  });
}

webhook_notifier::~webhook_notifier() {
  if (metrics_) (void)metrics_->registry.remove_collector("txmq_webhook_backlog");
}

result<void> webhook_notifier::start() {
  boost::system::error_code ec;
  tls_.set_default_verify_paths(ec);
  if (!ec && !settings_.ca_file.empty()) tls_.load_verify_file(settings_.ca_file, ec);
  if (ec) {
    common::log::error("webhooks: cannot load trusted certificates", settings_.ca_file.empty() ? "" : " from ",
               settings_.ca_file, ": ", ec.message());
    return std::make_error_code(std::errc::invalid_argument);
  }
  tls_.set_verify_mode(asio::ssl::verify_peer);
  auto recs = store_.webhooks();
  if (!recs) return recs.error();
  for (auto& rec : recs.value()) {
    const std::string group = std::string(k_webhook_group_prefix) + rec.id();
    auto state = store_.load_group(group);
    if (!state) {
      // Created durably, but the broker stopped before its group was: create it now.
      storage::group_info info{group, {rec.topic()}, 0};
      state = storage::call_sync<storage::group_state>(
          [&](auto done) { store_.ensure_group(info, storage::group_start::earliest, done); });
      if (!state) return state.error();
    }
    auto s = make_subscription(std::move(rec), state.value());
    if (!s) return s.error();
  }
  if (!subs_.empty()) common::log::info("webhooks: ", subs_.size(), " subscriptions loaded");
  tick_.expires_after(settings_.tick);
  tick_.async_wait([this](boost::system::error_code e) {
    if (!e) on_tick();
  });
  return outcome::success();
}

void webhook_notifier::stop() {
  flush();
  stopped_ = true;
  tick_.cancel();
  for (auto& [id, s] : subs_) s->endpoint->close_idle();
}

result<std::shared_ptr<webhook_notifier::subscription>> webhook_notifier::make_subscription(
    v1::Webhook rec, const storage::group_state& state) {
  auto url = parse_webhook_url(rec.url());
  if (!url) {
    common::log::error("webhooks: subscription ", rec.id(), " has a bad URL: ", url.error().message);
    return url.error();
  }
  auto s = std::make_shared<subscription>();
  s->group = std::string(k_webhook_group_prefix) + rec.id();
  s->delivery.ack_deadline = milliseconds(rec.timeout_ms()) + k_deadline_margin;
  s->delivery.retry_schedule.clear();
  for (auto ms : rec.schedule_ms()) s->delivery.retry_schedule.emplace_back(ms);
  if (s->delivery.retry_schedule.empty()) s->delivery.retry_schedule = settings_.schedule;
  s->delivery.max_attempts = static_cast<std::uint32_t>(s->delivery.retry_schedule.size()) + 1;
  s->tracker = std::make_unique<group_tracker>(s->group, s->delivery, store_, &visible_end_);
  TXMQ_TRY(s->tracker->load(state, now_ms()));
  s->endpoint = std::make_unique<webhook_endpoint>(io_.get_executor(), tls_, settings_.guard, std::move(url.value()),
                                                   std::max<std::uint32_t>(1, rec.concurrency()));
  s->refilled = std::chrono::steady_clock::now();
  s->tokens = rec.rate_per_second();
  s->rec = std::move(rec);
  subs_[s->rec.id()] = s;
  return s;
}

void webhook_notifier::wake(const std::string& topic) {
  for (auto& [id, s] : subs_) {
    if (s->rec.topic() == topic) pump(s);
  }
}

void webhook_notifier::persist(storage::group_update update) {
  if (is_empty(update)) return;
  // Merging keeps each list in order; the store applies cursors, then delivery records, then
  // acks and dead letters, so a record followed by its ack still ends acked.
  auto& p = pending_updates_[update.group];
  p.group = update.group;
  const auto append = [](auto& to, auto& from) { to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end())); };
  append(p.dispatched, update.dispatched);
  append(p.deliveries, update.deliveries);
  append(p.acks, update.acks);
  append(p.dead, update.dead);
  append(p.redrive, update.redrive);
  schedule_flush();
}

void webhook_notifier::log_attempt(v1::WebhookAttempt line) {
  pending_attempts_.push_back(std::move(line));
  schedule_flush();
}

void webhook_notifier::schedule_flush() {
  if (flush_posted_) return;
  flush_posted_ = true;
  asio::post(io_, [this] { flush(); });
}

void webhook_notifier::flush() {
  flush_posted_ = false;
  for (auto& [group, u] : pending_updates_) {
    store_.update_group(std::move(u), [group = group](result<storage::group_update_result> r) {
      // A lost write only means one more attempt after a restart.
      if (!r) common::log::error("webhooks: storing the state of '", group, "' failed: ", r.error().message);
    });
  }
  pending_updates_.clear();
  if (!pending_attempts_.empty()) {
    // After the group writes, so a logged attempt's outcome is always stored too.
    store_.record_webhook_attempts(std::move(pending_attempts_), [](result<void> r) {
      if (!r) common::log::error("webhooks: logging attempts failed: ", r.error().message);
    });
    pending_attempts_.clear();
  }
}

// ---- delivery -------------------------------------------------------------------------------

void webhook_notifier::pump(const std::shared_ptr<subscription>& s) {
  if (stopped_ || s->deleted || s->rec.disabled()) return;
  const std::uint32_t concurrency = std::max<std::uint32_t>(1, s->rec.concurrency());
  const std::uint32_t rate = s->rec.rate_per_second();
  if (rate) {
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - s->refilled).count();
    s->tokens = std::min<double>(rate, s->tokens + elapsed * rate);
    s->refilled = now;
  }
  while (s->in_flight < concurrency) {
    std::size_t room = concurrency - s->in_flight;
    if (rate) {
      if (s->tokens < 1) break;  // the tick comes back once tokens have grown
      room = std::min<std::size_t>(room, static_cast<std::size_t>(s->tokens));
    }
    std::vector<std::pair<v1::Message, bool>> batch;
    while (!s->replays.empty() && batch.size() < room) {
      batch.emplace_back(std::move(s->replays.front()), true);
      s->replays.pop_front();
    }
    if (batch.empty()) {
      const std::size_t max_bytes = settings_.max_frame_bytes;
      auto r = s->tracker->fetch(1, {s->rec.topic()}, room, max_bytes, s->delivery.ack_deadline, now_ms());
      if (!r) {
        common::log::error("webhooks: reading messages for ", s->rec.id(), " failed: ", r.error().message);
        return;
      }
      persist(std::move(r.value().update));
      if (r.value().messages.empty()) return;
      std::vector<delivery_ref> skipped;
      for (auto& d : r.value().messages) {
        if (s->matches(d.message)) {
          batch.emplace_back(std::move(d.message), false);
        } else {
          skipped.push_back({d.message.topic(), d.message.partition(), d.message.offset(), d.message.attempt()});
        }
      }
      if (!skipped.empty()) persist(s->tracker->ack(skipped, now_ms()).update);
    }
    for (auto& [msg, replay] : batch) {
      ++s->in_flight;
      if (rate) s->tokens -= 1;
      asio::co_spawn(io_, attempt(s, std::move(msg), replay), [id = s->rec.id()](std::exception_ptr e) {
        if (!e) return;
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          common::log::error("webhooks: an attempt for ", id, " failed: ", ex.what());
        }
      });
    }
  }
}

asio::awaitable<void> webhook_notifier::attempt(std::shared_ptr<subscription> s, v1::Message msg, bool replay) {
  const std::int64_t started_ms = now_ms();
  const auto started = std::chrono::steady_clock::now();
  if (metrics_ && !replay && msg.attempt() == 1) {
    const auto from = std::max(msg.publish_time_ms(), msg.deliver_at_ms());
    metrics_->registry
        .add_histogram("txmq_webhook_first_attempt_delay_seconds", "Commit of a message to its first webhook attempt")
        .observe(milliseconds(std::max<std::int64_t>(0, started_ms - from)));
  }
  std::string id = protocol::uuid::from_bytes(msg.id()).has_value()
                       ? protocol::uuid::from_bytes(msg.id()).value().to_string()
                       : std::string();
  const std::int64_t ts = started_ms / 1000;
  std::vector<std::string> keys;
  for (auto& sec : s->rec.secrets()) {
    if (sec.expires_ms() != 0 && sec.expires_ms() <= started_ms) continue;
    if (auto k = webhook_secret_key(sec.secret())) keys.push_back(std::move(k.value()));
  }
  http::request<http::string_body> req;
  auto payload = webhook_payload(msg, s->rec.payload());
  req.set(http::field::content_type, payload.content_type);
  req.set(http::field::user_agent, "txmq-webhooks/1");
  req.set("webhook-id", id);
  req.set("webhook-timestamp", std::to_string(ts));
  req.set("webhook-signature", webhook_signature_header(keys, id, ts, payload.body));
  req.set("txmq-topic", msg.topic());
  req.set("txmq-attempt", std::to_string(msg.attempt()));
  req.body() = std::move(payload.body);
  const milliseconds timeout{s->rec.timeout_ms()};
  auto res = co_await s->endpoint->post(std::move(req), timeout);
  const auto latency = std::chrono::steady_clock::now() - started;

  v1::WebhookAttempt log_line;
  log_line.set_webhook_id(s->rec.id());
  log_line.set_message_id(msg.id());
  log_line.set_topic(msg.topic());
  log_line.set_partition(msg.partition());
  log_line.set_offset(msg.offset());
  log_line.set_attempt(msg.attempt());
  log_line.set_time_ms(started_ms);
  log_line.set_status(res.status);
  log_line.set_latency_ms(static_cast<std::uint32_t>(std::chrono::duration_cast<milliseconds>(latency).count()));
  log_line.set_error(res.error);
  log_line.set_replay(replay);
  std::uint32_t retry_after_ms = 0;
  if (res.status >= 200 && res.status < 300) {
    log_line.set_outcome(v1::WEBHOOK_DELIVERED);
  } else if (res.status == 410) {
    log_line.set_outcome(v1::WEBHOOK_GONE);
  } else if (res.status == 429 || res.status == 503) {
    log_line.set_outcome(v1::WEBHOOK_THROTTLED);
    if (auto ra = parse_retry_after(res.retry_after, now_ms())) {
      retry_after_ms = static_cast<std::uint32_t>(std::clamp<std::int64_t>(ra->count(), 1, k_max_retry_after_ms));
    }
  } else if (res.blocked) {
    log_line.set_outcome(v1::WEBHOOK_BLOCKED);
  } else if (res.timed_out) {
    log_line.set_outcome(v1::WEBHOOK_TIMED_OUT);
  } else {
    log_line.set_outcome(v1::WEBHOOK_FAILED);
  }
  if (metrics_) {
    metrics_->registry
        .add_histogram("txmq_webhook_attempt_latency_seconds", "Webhook request sent to answer (or error)")
        .observe(latency);
  }
  finish_attempt(*s, msg, replay, std::move(log_line), retry_after_ms);
  --s->in_flight;
  pump_soon(s);
}

void webhook_notifier::pump_soon(const std::shared_ptr<subscription>& s) {
  if (s->pump_posted) return;
  s->pump_posted = true;
  asio::post(io_, [this, s] {
    s->pump_posted = false;
    pump(s);
  });
}

void webhook_notifier::finish_attempt(subscription& s, const v1::Message& msg, bool replay, v1::WebhookAttempt line,
                                      std::uint32_t retry_after_ms) {
  // After stop the store takes no more writes; an unrecorded success is sent again after restart.
  if (stopped_) return;
  const auto now = now_ms();
  const bool delivered = line.outcome() == v1::WEBHOOK_DELIVERED;
  if (!replay && !s.deleted) {
    const std::vector<delivery_ref> ref{{msg.topic(), msg.partition(), msg.offset(), msg.attempt()}};
    if (delivered) {
      persist(s.tracker->ack(ref, now).update);
      if (metrics_) {
        metrics_->registry
            .add_histogram("txmq_webhook_delivery_latency_seconds", "Commit of a message to its successful webhook")
            .observe(milliseconds(std::max<std::int64_t>(0, now - msg.publish_time_ms())));
      }
    } else {
      auto r = s.tracker->nack(ref, milliseconds(retry_after_ms), now);
      if (!r.update.dead.empty()) {
        line.set_outcome(v1::WEBHOOK_EXHAUSTED);
        if (metrics_) {
          metrics_->registry.add_counter("txmq_webhook_exhausted_total", "Messages given up after the last attempt")
              .inc();
        }
      }
      persist(std::move(r.update));
    }
  }
  if (metrics_) {
    metrics_->registry
        .add_counter("txmq_webhook_attempts_total", "Webhook attempts by outcome", {{"outcome", outcome_name(line.outcome())}})
        .inc();
  }
  if (line.outcome() == v1::WEBHOOK_GONE && !s.deleted) {
    disable(s, "the endpoint answered 410 Gone at " + std::to_string(now));
  }
  log_attempt(std::move(line));
}

void webhook_notifier::disable(subscription& s, std::string why) {
  if (s.rec.disabled()) return;
  common::log::warn("webhooks: subscription ", s.rec.id(), " (", redact_webhook_url(s.rec.url()), ") disabled: ", why);
  s.rec.set_disabled(true);
  s.rec.set_disabled_reason(std::move(why));
  s.rec.set_disabled_ms(now_ms());
  store_.put_webhook(s.rec, [id = s.rec.id()](result<void> r) {
    if (!r) common::log::error("webhooks: storing that ", id, " is disabled failed: ", r.error().message);
  });
  if (!cluster_) return;
  if (!cluster_->disable) return publish(s.rec);
  // Cluster mode: disabled here at once; etcd is told until it holds it (docs/cluster.md
  // "Webhooks"). Meanwhile a cluster state still showing the subscription enabled is not taken.
  const std::string id = s.rec.id();
  disabling_.insert(id);
  cluster_->disable(id, s.rec.disabled_reason(), s.rec.disabled_ms(),
                    [this, id](result<std::pair<bool, std::int64_t>> r) {
    disabling_.erase(id);
    if (!r) {
      common::log::error("webhooks: ", id, " is disabled here but etcd does not hold it: ", r.error().message,
                         " (the next 410 disables it again)");
      return;
    }
    own_revision_ = std::max(own_revision_, r.value().second);
    common::log::info("webhooks: ", id, "'s disable is in etcd (revision ", r.value().second,
                      r.value().first ? ")" : "; it was disabled or deleted there already)");
  });
}

void webhook_notifier::on_tick() {
  if (stopped_) return;
  const auto now = now_ms();
  for (auto& [id, s] : subs_) {
    persist(s->tracker->expire(now));
    pump(s);
  }
  if (now >= next_expiry_ms_) {
    next_expiry_ms_ = now + 60'000;
    expire_attempts(now - settings_.attempt_retention.count());
  }
  tick_.expires_after(settings_.tick);
  tick_.async_wait([this](boost::system::error_code ec) {
    if (!ec) on_tick();
  });
}

void webhook_notifier::expire_attempts(std::int64_t before_ms) {
  // Bounded passes, so the writer thread serves other requests in between; a full pass means
  // there is more to delete (thousands of attempts a second outgrow one pass a minute).
  store_.expire_webhook_attempts(before_ms, k_expiry_batch, on_io<std::uint64_t>(io_, [this, before_ms](result<std::uint64_t> r) {
    if (!r) {
      common::log::error("webhooks: expiring old attempts failed: ", r.error().message);
    } else if (r.value() == k_expiry_batch && !stopped_) {
      expire_attempts(before_ms);
    }
  }));
}

std::uint64_t webhook_notifier::backlog(const subscription& s) const {
  std::uint64_t lag = 0;
  for (auto& p : s.tracker->summary()) {
    if (auto t = store_.topic(p.topic); t && p.partition < t->partitions.size()) {
      const auto end = t->partitions[p.partition].next_offset;
      lag += end - std::min(p.acked, end);
    }
  }
  return lag;
}

}  // namespace txmq::broker
