#include "webhooks/webhook_notifier.h"

#include <algorithm>

#include <boost/beast/http.hpp>

#include "broker_metrics.h"
#include "io_thread.h"
#include "log.h"
#include "request_checks.h"
#include "webhooks/webhook_subscription.h"

namespace txmq::broker {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using std::chrono::milliseconds;

namespace {

constexpr std::size_t k_max_schedule = 100;
constexpr std::uint32_t k_max_concurrency = 1024;
constexpr milliseconds k_max_timeout = std::chrono::minutes(5);
// The tracker's ack deadline only matters when an attempt never completes (it always does,
// within its timeout); the margin keeps a slow completion from racing the deadline.
constexpr milliseconds k_deadline_margin = std::chrono::seconds(30);
constexpr std::size_t k_max_replay = 10'000;
constexpr std::size_t k_expiry_batch = 10'000;
constexpr std::uint32_t k_max_retry_after_ms = 24u * 3600 * 1000;

// "WEBHOOK_TIMED_OUT" -> "timed_out": the metric label (the CLI prints the same words).
std::string outcome_name(v1::WebhookOutcome o) {
  std::string name = v1::WebhookOutcome_Name(o).substr(std::string_view("WEBHOOK_").size());
  for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return name;
}

}  // namespace

webhook_notifier::webhook_notifier(asio::io_context& io, storage::store& store, webhook_settings settings,
                                   broker_metrics* metrics)
    : io_(io),
      store_(store),
      settings_(std::move(settings)),
      metrics_(metrics),
      tls_(asio::ssl::context::tls_client),
      tick_(io) {}

webhook_notifier::~webhook_notifier() = default;

result<void> webhook_notifier::start() {
  boost::system::error_code ec;
  tls_.set_default_verify_paths(ec);
  if (!ec && !settings_.ca_file.empty()) tls_.load_verify_file(settings_.ca_file, ec);
  if (ec) {
    log::error("webhooks: cannot load trusted certificates", settings_.ca_file.empty() ? "" : " from ",
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
  if (!subs_.empty()) log::info("webhooks: ", subs_.size(), " subscriptions loaded");
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
    log::error("webhooks: subscription ", rec.id(), " has a bad URL: ", url.error().message);
    return url.error();
  }
  auto s = std::make_shared<subscription>();
  s->group = std::string(k_webhook_group_prefix) + rec.id();
  s->delivery.ack_deadline = milliseconds(rec.timeout_ms()) + k_deadline_margin;
  s->delivery.retry_schedule.clear();
  for (auto ms : rec.schedule_ms()) s->delivery.retry_schedule.emplace_back(ms);
  if (s->delivery.retry_schedule.empty()) s->delivery.retry_schedule = settings_.schedule;
  s->delivery.max_attempts = static_cast<std::uint32_t>(s->delivery.retry_schedule.size()) + 1;
  s->tracker = std::make_unique<group_tracker>(s->group, s->delivery, store_);
  TXMQ_TRY(s->tracker->load(state, now_ms()));
  s->endpoint = std::make_unique<webhook_endpoint>(io_.get_executor(), tls_, std::move(url.value()),
                                                   std::max<std::uint32_t>(1, rec.concurrency()));
  s->refilled = std::chrono::steady_clock::now();
  s->tokens = rec.rate_per_second();
  s->rec = std::move(rec);
  if (metrics_) {
    metrics_->registry.add_gauge_callback("txmq_webhook_backlog", "Messages of the subscription not yet settled",
                                          {{"webhook", s->rec.id()}},
                                          [this, weak = std::weak_ptr(s)] {
                                            auto p = weak.lock();
                                            return p ? static_cast<double>(backlog(*p)) : 0.0;
                                          });
  }
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
    store_.update_group(std::move(u), [group](result<storage::group_update_result> r) {
      // A lost write only means one more attempt after a restart.
      if (!r) log::error("webhooks: storing the state of '", group, "' failed: ", r.error().message);
    });
  }
  pending_updates_.clear();
  if (!pending_attempts_.empty()) {
    // After the group writes, so a logged attempt's outcome is always stored too.
    store_.record_webhook_attempts(std::move(pending_attempts_), [](result<void> r) {
      if (!r) log::error("webhooks: logging attempts failed: ", r.error().message);
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
        log::error("webhooks: reading messages for ", s->rec.id(), " failed: ", r.error().message);
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
          log::error("webhooks: an attempt for ", id, " failed: ", ex.what());
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
  auto ct = msg.headers().find("content-type");
  req.set(http::field::content_type, ct != msg.headers().end() ? ct->second : std::string("application/json"));
  req.set(http::field::user_agent, "txmq-webhooks/1");
  req.set("webhook-id", id);
  req.set("webhook-timestamp", std::to_string(ts));
  req.set("webhook-signature", webhook_signature_header(keys, id, ts, msg.body()));
  req.set("txmq-topic", msg.topic());
  req.set("txmq-attempt", std::to_string(msg.attempt()));
  req.body() = msg.body();
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
  log::warn("webhooks: subscription ", s.rec.id(), " (", s.rec.url(), ") disabled: ", why);
  s.rec.set_disabled(true);
  s.rec.set_disabled_reason(std::move(why));
  s.rec.set_disabled_ms(now_ms());
  store_.put_webhook(s.rec, [id = s.rec.id()](result<void> r) {
    if (!r) log::error("webhooks: storing that ", id, " is disabled failed: ", r.error().message);
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
      log::error("webhooks: expiring old attempts failed: ", r.error().message);
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

v1::Webhook webhook_notifier::public_view(const subscription& s) const {
  v1::Webhook out = s.rec;
  out.clear_secrets();
  out.clear_token();
  out.set_backlog(backlog(s));
  if (auto d = store_.dead_letters(s.group, 1'000'000)) out.set_exhausted(d.value().size());
  out.set_in_flight(s.in_flight);
  return out;
}

// ---- admin requests ---------------------------------------------------------------------------

void webhook_notifier::handle(const std::shared_ptr<responder>& c, v1::Frame& frame) {
  const std::uint64_t corr = frame.correlation_id();
  switch (frame.body_case()) {
    case v1::Frame::kWebhookCreate: return create(c, corr, *frame.mutable_webhook_create());
    case v1::Frame::kWebhookList: return list(c, corr);
    case v1::Frame::kWebhookDelete: return remove(c, corr, frame.webhook_delete().id());
    case v1::Frame::kWebhookAttempts: return attempts(c, corr, frame.webhook_attempts());
    case v1::Frame::kWebhookReplay: return replay(c, corr, frame.webhook_replay());
    case v1::Frame::kWebhookRotateSecret: return rotate(c, corr, frame.webhook_rotate_secret());
    default:
      return c->respond_error(corr, v1::UNKNOWN_REQUEST, "not a webhook request");
  }
}

void webhook_notifier::create(const std::shared_ptr<responder>& c, std::uint64_t corr,
                              v1::WebhookCreateRequest& req) {
  auto& w = *req.mutable_webhook();
  if (auto bad = bad_name("topic", w.topic())) return c->respond_error(corr, v1::INVALID_ARGUMENT, *bad);
  if (!store_.topic(w.topic())) {
    return c->respond_error(corr, v1::UNKNOWN_TOPIC,
                            "no topic '" + w.topic() + "'; create it first (txmq topic create " + w.topic() + ")");
  }
  if (auto url = parse_webhook_url(w.url()); !url) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT, "webhook URL: " + url.error().message);
  }
  if (subs_.size() >= settings_.max_webhooks) {
    return c->respond_error(corr, v1::LIMIT_EXCEEDED,
                            "the broker already has webhook_max_subscriptions (" +
                                std::to_string(settings_.max_webhooks) + ") webhooks");
  }
  if (static_cast<std::size_t>(w.schedule_ms_size()) > k_max_schedule) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT,
                            "a webhook schedule has at most " + std::to_string(k_max_schedule) + " steps");
  }
  for (auto ms : w.schedule_ms()) {
    if (ms == 0) return c->respond_error(corr, v1::INVALID_ARGUMENT, "webhook schedule steps must be positive");
  }
  if (w.schedule_ms().empty()) {
    for (auto d : settings_.schedule) w.add_schedule_ms(static_cast<std::uint32_t>(d.count()));
  }
  if (w.timeout_ms() == 0) w.set_timeout_ms(static_cast<std::uint32_t>(settings_.timeout.count()));
  if (milliseconds(w.timeout_ms()) > k_max_timeout) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT, "webhook timeout is at most 5m");
  }
  if (w.concurrency() == 0) w.set_concurrency(settings_.concurrency);
  if (w.concurrency() > k_max_concurrency) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT,
                            "webhook concurrency is at most " + std::to_string(k_max_concurrency));
  }
  if (w.rate_per_second() == 0) w.set_rate_per_second(settings_.rate_per_second);
  std::string secret = w.secrets().empty() ? std::string() : w.secrets(0).secret();
  if (secret.empty()) {
    secret = generate_webhook_secret();
  } else if (!webhook_secret_key(secret)) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT,
                            "webhook secret must be whsec_ followed by base64 (as generated when none is given)");
  }
  w.clear_secrets();
  w.add_secrets()->set_secret(secret);
  w.set_id("wh_" + random_hex(8));
  w.set_token("whtok_" + random_hex(24));
  w.set_created_ms(now_ms());
  w.set_disabled(false);
  const auto start = req.from_earliest() ? storage::group_start::earliest : storage::group_start::latest;
  std::weak_ptr<responder> weak = c;
  // The record first: a group without one is ignored, a record without a group gets one at start.
  store_.put_webhook(w, on_io<void>(io_, [this, weak, corr, rec = w, start](result<void> r) mutable {
    if (!r) {
      if (auto c = weak.lock()) c->respond_error(corr, wire_code(r.error()), "storing the webhook failed: " + r.error().message);
      return;
    }
    storage::group_info info{std::string(k_webhook_group_prefix) + rec.id(), {rec.topic()}, 0};
    store_.ensure_group(std::move(info), start,
                        on_io<storage::group_state>(io_, [this, weak, corr, rec = std::move(rec)](result<storage::group_state> g) mutable {
      auto c = weak.lock();
      if (!g) {
        if (c) c->respond_error(corr, wire_code(g.error()), "creating the webhook's group failed: " + g.error().message);
        return;
      }
      v1::Webhook answer = rec;
      auto s = make_subscription(std::move(rec), g.value());
      if (!s) {
        if (c) c->respond_error(corr, v1::INTERNAL, "starting the webhook failed: " + s.error().message);
        return;
      }
      log::info("webhooks: created ", answer.id(), " for topic '", answer.topic(), "' -> ", answer.url());
      pump(s.value());
      if (!c) return;
      v1::Frame out;
      out.set_correlation_id(corr);
      *out.mutable_webhook() = std::move(answer);
      c->respond(std::move(out));
    }));
  }));
}

void webhook_notifier::list(const std::shared_ptr<responder>& c, std::uint64_t corr) {
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* resp = out.mutable_webhook_list_response();
  for (auto& [id, s] : subs_) *resp->add_webhooks() = public_view(*s);
  c->respond(std::move(out));
}

void webhook_notifier::remove(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& id) {
  auto it = subs_.find(id);
  if (it == subs_.end()) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no webhook '" + id + "'; see txmq webhook list");
  it->second->deleted = true;
  it->second->endpoint->close_idle();
  subs_.erase(it);
  if (metrics_) metrics_->registry.remove("txmq_webhook_backlog", {{"webhook", id}});
  std::weak_ptr<responder> weak = c;
  store_.delete_webhook(id, on_io<bool>(io_, [weak, corr, id](result<bool> r) {
    auto c = weak.lock();
    if (!c) return;
    if (!r) return c->respond_error(corr, wire_code(r.error()), "deleting webhook '" + id + "' failed: " + r.error().message);
    log::info("webhooks: deleted ", id);
    v1::Frame out;
    out.set_correlation_id(corr);
    out.mutable_webhook_delete_response();
    c->respond(std::move(out));
  }));
}

void webhook_notifier::attempts(const std::shared_ptr<responder>& c, std::uint64_t corr,
                                const v1::WebhookAttemptsRequest& req) {
  storage::webhook_attempts_query q;
  q.webhook_id = req.id();
  q.limit = req.limit() ? std::min<std::uint32_t>(req.limit(), 100'000) : 1000;
  if (!req.message_id().empty()) {
    auto m = protocol::uuid::from_bytes(req.message_id());
    if (!m) return c->respond_error(corr, v1::INVALID_ARGUMENT, "message_id must be 16 bytes");
    q.message = m.value();
  }
  if (req.id().empty() || req.id().size() > k_max_name) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT, "a webhook id is needed");
  }
  auto r = store_.webhook_attempts(q);
  if (!r) return c->respond_error(corr, wire_code(r.error()), "reading the attempt log failed: " + r.error().message);
  // A deleted subscription's log stays readable until it expires.
  if (r.value().empty() && !subs_.count(req.id())) {
    return c->respond_error(corr, v1::UNKNOWN_GROUP, "no webhook '" + req.id() + "' and no attempts logged for it");
  }
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* resp = out.mutable_webhook_attempts_response();
  for (auto& a : r.value()) *resp->add_attempts() = std::move(a);
  c->respond(std::move(out));
}

void webhook_notifier::replay(const std::shared_ptr<responder>& c, std::uint64_t corr,
                              const v1::WebhookReplayRequest& req) {
  auto it = subs_.find(req.id());
  if (it == subs_.end()) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no webhook '" + req.id() + "'");
  auto& s = *it->second;
  auto t = store_.topic(s.rec.topic());
  if (!t) return c->respond_error(corr, v1::UNKNOWN_TOPIC, "the webhook's topic '" + s.rec.topic() + "' is gone");
  std::vector<v1::Message> found;
  for (std::uint32_t p = 0; p < t->partitions.size() && found.size() < k_max_replay; ++p) {
    storage::read_request rr;
    rr.topic = s.rec.topic();
    rr.partition = p;
    rr.from_offset = t->partitions[p].start_offset;
    const auto end = t->partitions[p].next_offset;
    while (rr.from_offset < end && found.size() < k_max_replay) {
      auto r = store_.read(rr);
      if (!r) return c->respond_error(corr, wire_code(r.error()), "reading the topic failed: " + r.error().message);
      if (r.value().messages.empty()) break;
      for (auto& m : r.value().messages) {
        if (m.publish_time_ms() >= req.since_ms() && s.matches(m) && found.size() < k_max_replay) {
          m.set_attempt(1);
          found.push_back(std::move(m));
        }
      }
      rr.from_offset = r.value().next_offset;
    }
  }
  std::sort(found.begin(), found.end(), [](const v1::Message& a, const v1::Message& b) {
    return a.publish_time_ms() != b.publish_time_ms() ? a.publish_time_ms() < b.publish_time_ms() : a.id() < b.id();
  });
  for (auto& m : found) s.replays.push_back(std::move(m));
  pump(it->second);
  v1::Frame out;
  out.set_correlation_id(corr);
  out.mutable_webhook_replay_response()->set_queued(found.size());
  c->respond(std::move(out));
}

void webhook_notifier::rotate(const std::shared_ptr<responder>& c, std::uint64_t corr,
                              const v1::WebhookRotateSecretRequest& req) {
  auto it = subs_.find(req.id());
  if (it == subs_.end()) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no webhook '" + req.id() + "'");
  std::string secret = req.secret();
  if (secret.empty()) {
    secret = generate_webhook_secret();
  } else if (!webhook_secret_key(secret)) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT, "webhook secret must be whsec_ followed by base64");
  }
  auto& rec = it->second->rec;
  const auto now = now_ms();
  const std::int64_t until = now + (req.grace_ms() ? std::int64_t{req.grace_ms()} : settings_.secret_grace.count());
  v1::Webhook next = rec;
  next.clear_secrets();
  next.add_secrets()->set_secret(secret);
  for (auto& old : rec.secrets()) {
    if (old.expires_ms() != 0 && old.expires_ms() <= now) continue;
    auto* kept = next.add_secrets();
    kept->set_secret(old.secret());
    kept->set_expires_ms(old.expires_ms() == 0 ? until : std::min(old.expires_ms(), until));
  }
  rec = next;
  std::weak_ptr<responder> weak = c;
  store_.put_webhook(next, on_io<void>(io_, [weak, corr, next](result<void> r) mutable {
    auto c = weak.lock();
    if (!c) return;
    if (!r) return c->respond_error(corr, wire_code(r.error()), "storing the new secret failed: " + r.error().message);
    v1::Frame out;
    out.set_correlation_id(corr);
    next.clear_token();
    *out.mutable_webhook() = std::move(next);
    c->respond(std::move(out));
  }));
}

}  // namespace txmq::broker
