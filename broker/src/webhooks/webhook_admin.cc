// The administration of webhook subscriptions (Frame fields 70-80): create, list, delete, the
// attempt log, replay and secret rotation.

#include "webhooks/webhook_notifier.h"

#include <algorithm>

#include "admin_reads.h"
#include "broker_metrics.h"
#include "io_thread.h"
#include "txmq/common/log.h"
#include "request_checks.h"
#include "webhooks/webhook_subscription.h"

namespace txmq::broker {

using std::chrono::milliseconds;

namespace {

constexpr std::size_t k_max_schedule = 100;
constexpr std::uint32_t k_max_concurrency = 1024;
constexpr milliseconds k_max_timeout = std::chrono::minutes(5);
constexpr std::size_t k_max_replay = 10'000;
// A WebhookAttempts cursor starting with this pages newest first (docs/protocol.md §11).
constexpr char k_newest_first = '-';

// The attempt log's cursor travels as lowercase hex text (it is a storage key suffix).
std::string to_hex(std::string_view raw) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::optional<std::string> from_hex(std::string_view text) {
  if (text.size() % 2 != 0 || text.size() > 256) return std::nullopt;
  const auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 2) {
    const int hi = nibble(text[i]), lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

}  // namespace

v1::Webhook webhook_notifier::public_view(const subscription& s) const {
  v1::Webhook out = s.rec;
  out.clear_secrets();
  out.clear_token();
  out.set_backlog(backlog(s));
  // exhausted (the group's dead letters) is counted by the admin worker: see list().
  out.set_in_flight(s.in_flight);
  return out;
}

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
  const std::string new_id = w.id();
  auto local = [this, weak, corr, w, start]() mutable {
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
        common::log::info("webhooks: created ", answer.id(), " for topic '", answer.topic(), "' -> ", redact_webhook_url(answer.url()));
        pump(s.value());
        if (!c) return;
        v1::Frame out;
        out.set_correlation_id(corr);
        *out.mutable_webhook() = std::move(answer);
        c->respond(std::move(out));
      }));
    }));
  };
  if (!cluster_) return local();
  // Cluster mode: etcd first (every node starts it from there), then this node at once.
  std::string bytes;
  w.SerializeToString(&bytes);
  cluster_->put(w.id(), std::move(bytes), true,
                [this, weak, corr, new_id, local = std::move(local)](result<std::pair<bool, std::int64_t>> r) mutable {
                  if (!r || !r.value().first) {
                    if (auto c = weak.lock()) {
                      c->respond_error(corr, v1::STORE_UNAVAILABLE,
                                       "storing the webhook in etcd failed: " +
                                           (r ? std::string("its id exists") : r.error().message));
                    }
                    return;
                  }
                  own_revision_ = std::max(own_revision_, r.value().second);
                  adopting_.insert(new_id);
                  local();
                });
}

void webhook_notifier::list(const std::shared_ptr<responder>& c, std::uint64_t corr) {
  // The subscriptions' state is copied here; their dead letters (exhausted) are counted on the
  // worker, a page at a time.
  std::vector<std::pair<v1::Webhook, std::string>> views;
  views.reserve(subs_.size());
  for (auto& [id, s] : subs_) views.emplace_back(public_view(*s), s->group);
  std::weak_ptr<responder> weak = c;
  reads_.run<v1::Frame>(
      [this, views = std::move(views)]() mutable -> result<v1::Frame> {
        v1::Frame out;
        auto* resp = out.mutable_webhook_list_response();
        for (auto& [view, group] : views) {
          TXMQ_TRY(auto dead, count_dead_letters(store_, group, reads_));
          view.set_exhausted(dead.total);
          *resp->add_webhooks() = std::move(view);
        }
        return out;
      },
      answer_admin_read(weak, corr, "listing webhooks failed: "));
}

void webhook_notifier::remove(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& id,
                              bool from_cluster) {
  auto it = subs_.find(id);
  if (it == subs_.end()) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no webhook '" + id + "'; see txmq webhook list");
  if (cluster_ && !from_cluster) {
    // Cluster mode: etcd first; every node (this one at once) stops it.
    std::weak_ptr<responder> weak = c;
    return cluster_->remove(id, [this, weak, corr, id](result<std::pair<bool, std::int64_t>> r) {
      if (!r) {
        if (auto c = weak.lock()) {
          c->respond_error(corr, v1::STORE_UNAVAILABLE, "deleting the webhook in etcd failed: " + r.error().message);
        }
        return;
      }
      own_revision_ = std::max(own_revision_, r.value().second);
      auto c = weak.lock();
      if (subs_.contains(id) && c) return remove(c, corr, id, true);
      if (subs_.contains(id)) remove(nullptr, 0, id, true);
      if (c) {
        v1::Frame out;
        out.set_correlation_id(corr);
        out.mutable_webhook_delete_response();
        c->respond(std::move(out));
      }
    });
  }
  it->second->deleted = true;
  it->second->endpoint->close_idle();
  subs_.erase(it);
  std::weak_ptr<responder> weak = c;
  store_.delete_webhook(id, on_io<bool>(io_, [weak, corr, id](result<bool> r) {
    auto c = weak.lock();  // null: a delete made through another node
    if (!c) return;
    if (!r) return c->respond_error(corr, wire_code(r.error()), "deleting webhook '" + id + "' failed: " + r.error().message);
    common::log::info("webhooks: deleted ", id);
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
  q.limit = list_limit(req.limit(), k_max_list_limit);
  if (!req.message_id().empty()) {
    auto m = protocol::uuid::from_bytes(req.message_id());
    if (!m) return c->respond_error(corr, v1::INVALID_ARGUMENT, "message_id must be 16 bytes");
    q.message = m.value();
  }
  if (req.id().empty() || req.id().size() > k_max_name) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT, "a webhook id is needed");
  }
  // The cursor is opaque and carries the order: one starting with '-' (unreserved in a URL, not a hex digit) pages newest first ("-"
  // alone: from the newest), and so does the next_after of such a page.
  std::string_view cursor = req.after();
  if (cursor.starts_with(k_newest_first)) {
    q.newest_first = true;
    cursor.remove_prefix(1);
  }
  if (!cursor.empty()) {
    auto raw = from_hex(cursor);
    if (!raw) return c->respond_error(corr, v1::INVALID_ARGUMENT, "after: not a cursor (use next_after of the previous page)");
    q.after = std::move(*raw);
  }
  const std::size_t limit = q.limit;
  // One more than asked: whether another page follows.
  ++q.limit;
  std::weak_ptr<responder> weak = c;
  reads_.run<std::vector<v1::WebhookAttempt>>(
      [this, q] { return store_.webhook_attempts(q); },
      [this, weak, corr, id = req.id(), limit, by_message = q.message.has_value(), newest_first = q.newest_first,
       first_page = q.after.empty()](result<std::vector<v1::WebhookAttempt>> r) {
        auto c = weak.lock();
        if (!c) return;
        if (!r) return c->respond_error(corr, wire_code(r.error()), "reading the attempt log failed: " + r.error().message);
        // A deleted subscription's log stays readable until it expires.
        if (r.value().empty() && first_page && !subs_.count(id)) {
          return c->respond_error(corr, v1::UNKNOWN_GROUP, "no webhook '" + id + "' and no attempts logged for it");
        }
        v1::Frame out;
        out.set_correlation_id(corr);
        auto* resp = out.mutable_webhook_attempts_response();
        // An attempt holds an error text of the endpoint's making: the answer ends before it
        // would pass the frame limit.
        answer_budget budget(settings_.max_frame_bytes);
        bool more = r.value().size() > limit;
        if (more) r.value().resize(limit);
        for (auto& a : r.value()) {
          if (!budget.take(a.ByteSizeLong())) {
            more = true;
            break;
          }
          *resp->add_attempts() = std::move(a);
        }
        if (more && resp->attempts_size() > 0) {
          resp->set_next_after((newest_first ? std::string(1, k_newest_first) : std::string()) +
                               to_hex(storage::webhook_attempt_cursor(*resp->attempts().rbegin(), by_message)));
        }
        c->respond(std::move(out));
      });
}

void webhook_notifier::replay(const std::shared_ptr<responder>& c, std::uint64_t corr,
                              const v1::WebhookReplayRequest& req) {
  auto it = subs_.find(req.id());
  if (it == subs_.end()) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no webhook '" + req.id() + "'");
  auto& s = *it->second;
  auto t = store_.topic(s.rec.topic());
  if (!t) return c->respond_error(corr, v1::UNKNOWN_TOPIC, "the webhook's topic '" + s.rec.topic() + "' is gone");
  // The scan reads the whole retained topic (to find up to k_max_replay matching messages): on
  // the worker, with a copy of the filter; the replays are queued back here.
  std::weak_ptr<responder> weak = c;
  reads_.run<std::vector<v1::Message>>(
      [this, rec = s.rec, t = *t, since = req.since_ms()]() -> result<std::vector<v1::Message>> {
        std::vector<v1::Message> found;
        for (std::uint32_t p = 0; p < t.partitions.size() && found.size() < k_max_replay; ++p) {
          storage::read_request rr;
          rr.topic = rec.topic();
          rr.partition = p;
          rr.from_offset = t.partitions[p].start_offset;
          const auto end = t.partitions[p].next_offset;
          while (rr.from_offset < end && found.size() < k_max_replay) {
            if (reads_.stopping()) return error(protocol::errc::shutting_down, "the broker is shutting down");
            auto r = store_.read(rr);
            if (!r) return error(r.error().code, "reading the topic failed: " + r.error().message);
            if (r.value().messages.empty()) break;
            for (auto& m : r.value().messages) {
              if (m.publish_time_ms() >= since && webhook_matches(rec, m) && found.size() < k_max_replay) {
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
        return found;
      },
      [this, weak, corr, id = req.id()](result<std::vector<v1::Message>> found) {
        auto c = weak.lock();
        if (!found) {
          if (c) c->respond_error(corr, wire_code(found.error()), found.error().message);
          return;
        }
        auto it = subs_.find(id);
        if (it == subs_.end()) {
          if (c) c->respond_error(corr, v1::UNKNOWN_GROUP, "webhook '" + id + "' was deleted during the replay");
          return;
        }
        const auto queued = found.value().size();
        for (auto& m : found.value()) it->second->replays.push_back(std::move(m));
        pump(it->second);
        if (!c) return;
        v1::Frame out;
        out.set_correlation_id(corr);
        out.mutable_webhook_replay_response()->set_queued(queued);
        c->respond(std::move(out));
      });
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
  const auto now = now_ms();
  const std::int64_t until = now + (req.grace_ms() ? std::int64_t{req.grace_ms()} : settings_.secret_grace.count());
  // The new secret first, then the old ones still valid, each kept until the grace ends.
  auto rotated = [secret, now, until](const v1::Webhook& rec) {
    v1::Webhook next = rec;
    next.clear_secrets();
    next.add_secrets()->set_secret(secret);
    for (auto& old : rec.secrets()) {
      if (old.expires_ms() != 0 && old.expires_ms() <= now) continue;
      auto* kept = next.add_secrets();
      kept->set_secret(old.secret());
      kept->set_expires_ms(old.expires_ms() == 0 ? until : std::min(old.expires_ms(), until));
    }
    return next;
  };
  std::weak_ptr<responder> weak = c;
  auto store_and_answer = [this, weak, corr](v1::Webhook next) {
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
  };
  if (cluster_ && cluster_->update) {
    // Cluster mode: the rotation is applied to the record etcd holds, compared on its revision,
    // not to this node's copy, which may predate a disable (another node's 410, DESIGN §5: a
    // disabled subscription stays disabled until an operator acts); a blind write of the copy
    // would enable it again on every node. The secret changes; nothing else does.
    auto made = std::make_shared<v1::Webhook>();  // written on the cluster thread before `done` is posted
    const std::string id = req.id();
    return cluster_->update(
        id,
        [rotated, made](std::string_view current) -> std::optional<std::string> {
          v1::Webhook rec;
          if (!rec.ParseFromArray(current.data(), static_cast<int>(current.size()))) return std::nullopt;
          *made = rotated(rec);
          return made->SerializeAsString();
        },
        [this, weak, corr, id, made, store_and_answer](result<std::pair<bool, std::int64_t>> r) {
          if (!r) {
            if (auto c = weak.lock()) {
              c->respond_error(corr, v1::STORE_UNAVAILABLE,
                               "writing the new secret to etcd failed: " + r.error().message +
                                   "; nothing changed, the old secret still signs (try again)");
            }
            return;
          }
          if (!r.value().first) {
            if (auto c = weak.lock()) c->respond_error(corr, v1::UNKNOWN_GROUP, "no webhook '" + id + "' (deleted meanwhile)");
            return;
          }
          own_revision_ = std::max(own_revision_, r.value().second);
          v1::Webhook next = *made;
          if (auto it = subs_.find(id); it != subs_.end()) {
            auto& s = *it->second;
            if (disabling_.contains(id) && !next.disabled()) {
              // This node's 410 disable is on its way to etcd: kept, as sync_cluster keeps it.
              next.set_disabled(true);
              next.set_disabled_reason(s.rec.disabled_reason());
              next.set_disabled_ms(s.rec.disabled_ms());
            }
            s.rec = next;
          }
          store_and_answer(std::move(next));
        });
  }
  auto& rec = it->second->rec;
  v1::Webhook next = rotated(rec);
  rec = next;
  publish(next);
  store_and_answer(std::move(next));
}

}  // namespace txmq::broker
