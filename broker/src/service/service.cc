#include "service/service.h"

#include <algorithm>

#include "broker_metrics.h"
#include "io_thread.h"
#include "log.h"
#include "request_checks.h"

namespace txmq::broker {

namespace asio = boost::asio;
using storage::errc;

namespace {

constexpr std::size_t k_max_refs = 10'000;


// A name for topics and groups: printable, no spaces, not too long.

std::string reserved_group(const std::string& name) {
  return "group name '" + name + "' is reserved for webhook subscriptions (see txmq webhook list)";
}

void fill_topic(v1::TopicInfo& out, const storage::topic_info& t) {
  out.set_name(t.config.name);
  out.set_partitions(t.config.partitions);
  out.set_retention_ms(t.config.retention_ms);
  out.set_retention_bytes(t.config.retention_bytes);
  out.set_created_ms(t.created_ms);
  for (std::uint32_t p = 0; p < t.partitions.size(); ++p) {
    auto* pi = out.add_partition_info();
    pi->set_partition(p);
    pi->set_start_offset(t.partitions[p].start_offset);
    pi->set_end_offset(t.partitions[p].next_offset);
    pi->set_bytes(t.partitions[p].bytes);
  }
}

}  // namespace

service::service(asio::io_context& io, storage::store& store, service_settings settings, broker_metrics* metrics)
    : io_(io), store_(store), settings_(std::move(settings)), metrics_(metrics), tick_(io) {
  tx_settings ts = settings_.tx;
  ts.max_message_bytes = settings_.max_message_bytes;
  ts.auto_create_topics = settings_.auto_create_topics;
  ts.default_partitions = settings_.default_partitions;
  ts.max_topics = settings_.max_topics;
  ts.sync = settings_.sync;
  tx_coordinator::group_access access;
  access.find_group = [this](const std::string& name) -> group_tracker* {
    auto it = groups_.find(name);
    return it == groups_.end() ? nullptr : it->second.tracker.get();
  };
  access.wake = [this](const std::vector<std::string>& topics, const std::vector<std::string>& groups) {
    wake(topics, groups);
  };
  tx_ = std::make_unique<tx_coordinator>(io_, store_, std::move(ts), metrics_, std::move(access));
  webhook_settings ws = settings_.webhooks;
  ws.max_frame_bytes = settings_.max_frame_bytes;
  webhooks_ = std::make_unique<webhook_notifier>(io_, store_, std::move(ws), metrics_);
}

result<void> service::start() {
  for (auto& info : store_.groups()) {
    // Served by the webhook notifier, with each subscription's own schedule.
    if (is_webhook_group(info.name)) continue;
    auto state = store_.load_group(info.name);
    if (!state) return state.error();
    auto& g = groups_[info.name];
    g.tracker = std::make_unique<group_tracker>(info.name, settings_.delivery, store_);
    register_group_metrics(info.name);
    TXMQ_TRY(g.tracker->load(state.value(), now_ms()));
  }
  TXMQ_TRY(tx_->start());
  TXMQ_TRY(webhooks_->start());
  tick_.expires_after(settings_.tick);
  tick_.async_wait([this](boost::system::error_code ec) {
    if (!ec) on_tick();
  });
  return outcome::success();
}

void service::stop() {
  stopped_ = true;
  tick_.cancel();
  tx_->stop();
  webhooks_->stop();
  for (auto& [name, g] : groups_) {
    for (auto& w : g.waiters) {
      if (auto c = w.conn.lock()) c->respond_error(w.correlation_id, v1::SHUTTING_DOWN, "broker is shutting down");
    }
    g.waiters.clear();
  }
}

void service::close_all() {
  auto all = connections_;
  for (auto& [id, weak] : all) {
    if (auto c = weak.lock()) c->close();
  }
}

void service::connection_opened(const std::shared_ptr<responder>& c) {
  connections_[c->id()] = c;
  tx_->connection_opened(c);
}

void service::connection_closed(responder& c) {
  connections_.erase(c.id());
  tx_->connection_closed(c);
  for (auto& [name, g] : groups_) {
    g.waiters.remove_if([&](const waiter& w) {
      auto p = w.conn.lock();
      return !p || p.get() == &c;
    });
  }
}

void service::register_group_metrics(const std::string& name) {
  if (!metrics_) return;
  // Read at scrape time on the io thread, where the admin server runs.
  metrics_->registry.add_gauge_callback("txmq_group_lag", "Messages of the group's topics not yet acknowledged",
                                        {{"group", name}}, [this, name] {
    for (auto& g : gauges()) {
      if (g.group == name) return static_cast<double>(g.lag);
    }
    return 0.0;
  });
  metrics_->registry.add_gauge_callback("txmq_group_in_flight", "Deliveries awaiting their ack", {{"group", name}},
                                        [this, name] {
    auto it = groups_.find(name);
    return it == groups_.end() ? 0.0 : static_cast<double>(it->second.tracker->in_flight());
  });
}

std::vector<service::group_gauges> service::gauges() const {
  std::vector<group_gauges> out;
  for (auto& [name, g] : groups_) {
    group_gauges gg;
    gg.group = name;
    gg.in_flight = g.tracker->in_flight();
    for (auto& s : g.tracker->summary()) {
      if (auto t = store_.topic(s.topic); t && s.partition < t->partitions.size()) {
        gg.lag += t->partitions[s.partition].next_offset - std::min(s.acked, t->partitions[s.partition].next_offset);
      }
    }
    out.push_back(std::move(gg));
  }
  return out;
}

void service::handle(const std::shared_ptr<responder>& c, v1::Frame&& frame) {
  const std::uint64_t corr = frame.correlation_id();
  if (stopped_) return c->respond_error(corr, v1::SHUTTING_DOWN, "broker is shutting down");
  switch (frame.body_case()) {
    case v1::Frame::kProduce: return produce(c, corr, *frame.mutable_produce());
    case v1::Frame::kFetch: return fetch(c, corr, *frame.mutable_fetch());
    case v1::Frame::kAck: return settle(c, corr, 0, frame.ack().group(), frame.ack().refs(), 0);
    case v1::Frame::kNack: return settle(c, corr, 1, frame.nack().group(), frame.nack().refs(), frame.nack().delay_ms());
    case v1::Frame::kExtend:
      return settle(c, corr, 2, frame.extend().group(), frame.extend().refs(), frame.extend().extend_ms());
    case v1::Frame::kCreateTopic: return create_topic(c, corr, frame.create_topic());
    case v1::Frame::kListTopics: {
      v1::Frame out;
      out.set_correlation_id(corr);
      auto* resp = out.mutable_list_topics_response();
      for (auto& t : store_.topics()) fill_topic(*resp->add_topics(), t);
      return c->respond(std::move(out));
    }
    case v1::Frame::kDescribeTopic: {
      auto t = store_.topic(frame.describe_topic().name());
      if (!t) return c->respond_error(corr, v1::UNKNOWN_TOPIC, "no topic '" + frame.describe_topic().name() + "'");
      v1::Frame out;
      out.set_correlation_id(corr);
      fill_topic(*out.mutable_topic_info(), *t);
      return c->respond(std::move(out));
    }
    case v1::Frame::kCreateGroup: return create_group(c, corr, frame.create_group());
    case v1::Frame::kListGroups: return list_groups(c, corr);
    case v1::Frame::kDescribeGroup: return describe_group(c, corr, frame.describe_group().group());
    case v1::Frame::kDlqList: return dlq_list(c, corr, frame.dlq_list());
    case v1::Frame::kDlqRedrive: return dlq_redrive(c, corr, frame.dlq_redrive().group());
    case v1::Frame::kPrepare: return tx_->prepare(c, corr, *frame.mutable_prepare());
    case v1::Frame::kEndTx: return tx_->end_tx(c, corr, frame.end_tx());
    case v1::Frame::kTxList: return tx_->list(c, corr, frame.tx_list());
    case v1::Frame::kTxShow: return tx_->show(c, corr, frame.tx_show());
    case v1::Frame::kTxResolve: return tx_->operator_resolve(c, corr, frame.tx_resolve());
    case v1::Frame::kWebhookCreate:
    case v1::Frame::kWebhookList:
    case v1::Frame::kWebhookDelete:
    case v1::Frame::kWebhookAttempts:
    case v1::Frame::kWebhookReplay:
    case v1::Frame::kWebhookRotateSecret: return webhooks_->handle(c, frame);
    case v1::Frame::kHello:
      return c->respond_error(corr, v1::INVALID_ARGUMENT, "Hello was already received on this connection");
    default:
      return c->respond_error(corr, v1::UNKNOWN_REQUEST,
                              "request type " + std::to_string(static_cast<int>(frame.body_case())) +
                                  " is not one this broker serves");
  }
}

void service::handle_answer(const std::shared_ptr<responder>& c, v1::Frame&& frame) {
  tx_->handle_answer(c, std::move(frame));
}

void service::wake(const std::vector<std::string>& topics, const std::vector<std::string>& groups) {
  for (auto& t : topics) webhooks_->wake(t);
  for (auto& [name, g] : groups_) {
    if (g.waiters.empty()) continue;
    const bool named = std::find(groups.begin(), groups.end(), name) != groups.end();
    if (named || std::any_of(topics.begin(), topics.end(), [&](const std::string& t) { return g.tracker->subscribes(t); })) {
      serve_waiters(g);
    }
  }
}

// ---- produce --------------------------------------------------------------------------------

void service::produce(const std::shared_ptr<responder>& c, std::uint64_t corr, v1::ProduceRequest& req) {
  auto checked = check_messages({.messages = req.messages(), .topic = &req.topic(), .request = "produce request"},
                                 {settings_.max_message_bytes, settings_.auto_create_topics, settings_.max_topics}, store_);
  if (!checked) return c->respond_error(corr, wire_code(checked.error()), std::move(checked.error().message));
  storage::append_request ar;
  ar.topic = req.topic();
  ar.sync = settings_.sync;
  if (!checked.value().empty()) ar.auto_create_partitions = settings_.default_partitions;
  ar.messages.reserve(static_cast<std::size_t>(req.messages_size()));
  for (auto& m : *req.mutable_messages()) {
    m.set_publish_time_ms(0);  // the broker's clock decides
    ar.messages.push_back(std::move(m));
  }
  std::weak_ptr<responder> weak = c;
  std::string topic = ar.topic;
  const auto started = std::chrono::steady_clock::now();
  std::uint64_t body_bytes = 0;
  for (auto& m : ar.messages) body_bytes += m.body().size();
  store_.append(std::move(ar), on_io<storage::append_result>(io_, [this, weak, corr, topic, started, body_bytes](result<storage::append_result> r) {
    if (metrics_) {
      metrics_->produce_latency.observe(std::chrono::steady_clock::now() - started);
      if (!r) {
        metrics_->produce_errors.inc();
      } else {
        std::uint64_t dup = 0;
        for (auto& p : r.value().positions) dup += p.duplicate ? 1 : 0;
        metrics_->messages_in.inc(r.value().positions.size() - dup);
        metrics_->duplicates.inc(dup);
        metrics_->bytes_in.inc(body_bytes);
      }
    }
    auto c = weak.lock();
    if (r) {
      webhooks_->wake(topic);
      // New messages: wake long polls of the groups that read this topic.
      for (auto& [name, g] : groups_) {
        if (!g.waiters.empty() && g.tracker->subscribes(topic)) serve_waiters(g);
      }
    }
    if (!c) return;
    if (!r) {
      return c->respond_error(corr, wire_code(r.error()), "produce to '" + topic + "' failed: " + r.error().message);
    }
    v1::Frame out;
    out.set_correlation_id(corr);
    auto* resp = out.mutable_produce_response();
    for (auto& p : r.value().positions) {
      auto* pos = resp->add_positions();
      pos->set_partition(p.partition);
      pos->set_offset(p.offset);
      pos->set_duplicate(p.duplicate);
    }
    c->respond(std::move(out));
  }));
}

// ---- groups ---------------------------------------------------------------------------------

void service::with_group(const std::string& name, const std::vector<std::string>& topics, storage::group_start start,
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
      g.tracker = std::make_unique<group_tracker>(name, settings_.delivery, store_);
      register_group_metrics(name);
    }
    if (auto l = g.tracker->load(r.value(), now_ms()); !l) return fn(l.error());
    fn(&g);
  }));
}

bool service::try_fetch(group_entry& g, responder& c, std::uint64_t corr, const std::vector<std::string>& topics,
                        std::size_t max, std::chrono::milliseconds ack_deadline, bool answer_empty) {
  // The answer must fit in one frame, with room for the envelope.
  const std::size_t max_bytes = settings_.max_frame_bytes > 65536 ? settings_.max_frame_bytes - 65536 : settings_.max_frame_bytes / 2;
  auto r = g.tracker->fetch(c.id(), topics, max, max_bytes, ack_deadline, now_ms());
  if (!r) {
    c.respond_error(corr, wire_code(r.error()), "fetch for group '" + g.tracker->name() + "' failed: " + r.error().message);
    return true;
  }
  persist(std::move(r.value().update));
  if (r.value().messages.empty() && !answer_empty) return false;
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* resp = out.mutable_fetch_response();
  const auto now = now_ms();
  for (auto& d : r.value().messages) {
    if (metrics_) {
      metrics_->messages_out.inc();
      metrics_->bytes_out.inc(d.message.body().size());
      if (d.message.attempt() > 1) {
        metrics_->redeliveries.inc();
      } else {
        const auto from = std::max(d.message.publish_time_ms(), d.message.deliver_at_ms());
        metrics_->end_to_end_latency.observe(std::chrono::milliseconds(std::max<std::int64_t>(0, now - from)));
      }
    }
    auto* del = resp->add_deliveries();
    *del->mutable_message() = std::move(d.message);
    del->set_deadline_ms(d.deadline_ms);
  }
  c.respond(std::move(out));
  return true;
}

void service::fetch(const std::shared_ptr<responder>& c, std::uint64_t corr, v1::FetchRequest& req) {
  if (auto bad = bad_name("group", req.group())) return c->respond_error(corr, v1::INVALID_ARGUMENT, *bad);
  if (is_webhook_group(req.group())) return c->respond_error(corr, v1::INVALID_ARGUMENT, reserved_group(req.group()));
  if (req.topics().empty()) return c->respond_error(corr, v1::INVALID_ARGUMENT, "fetch names no topic");
  std::vector<std::string> topics(req.topics().begin(), req.topics().end());
  for (auto& t : topics) {
    if (!store_.topic(t)) return c->respond_error(corr, v1::UNKNOWN_TOPIC, "no topic '" + t + "'");
  }
  std::size_t max = req.max_messages() ? req.max_messages() : settings_.default_fetch_messages;
  max = std::min<std::size_t>(max, settings_.max_fetch_messages);
  const std::chrono::milliseconds wait{req.max_wait_ms()};
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

void service::serve_waiters(group_entry& g) {
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

void service::settle(const std::shared_ptr<responder>& c, std::uint64_t corr, int kind, const std::string& group,
                     const google::protobuf::RepeatedPtrField<v1::DeliveryRef>& refs, std::uint32_t ms) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no consumer group '" + group + "'");
  if (refs.empty() || static_cast<std::size_t>(refs.size()) > k_max_refs) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT,
                            "between 1 and " + std::to_string(k_max_refs) + " deliveries per request");
  }
  if (kind == 2 && ms == 0) return c->respond_error(corr, v1::INVALID_ARGUMENT, "extend_ms must be positive");
  std::vector<delivery_ref> mrefs;
  mrefs.reserve(static_cast<std::size_t>(refs.size()));
  for (auto& r : refs) mrefs.push_back({r.topic(), r.partition(), r.offset(), r.attempt()});
  auto& g = it->second;
  const auto now = now_ms();
  auto res = kind == 0   ? g.tracker->ack(mrefs, now)
             : kind == 1 ? g.tracker->nack(mrefs, std::chrono::milliseconds(ms), now)
                         : g.tracker->extend(mrefs, std::chrono::milliseconds(ms), now);
  if (metrics_) {
    std::uint64_t ok = 0;
    for (auto e : res.results) ok += e == protocol::errc{} ? 1 : 0;
    if (kind == 0) metrics_->acks.inc(ok);
    if (kind == 1) metrics_->nacks.inc(ok);
  }
  persist(std::move(res.update));
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* dr = out.mutable_delivery_results();
  for (auto e : res.results) dr->add_results(e == protocol::errc{} ? v1::ERROR_CODE_UNSPECIFIED : v1::UNKNOWN_DELIVERY);
  c->respond(std::move(out));
  // An ack may unblock the next message of a key.
  if (kind == 0 && !g.waiters.empty()) serve_waiters(g);
}

void service::persist(storage::group_update update, bool sync) {
  if (is_empty(update)) return;
  if (metrics_) metrics_->dead_letters.inc(update.dead.size());
  update.sync = sync;
  const std::string group = update.group;
  store_.update_group(std::move(update), [group](result<storage::group_update_result> r) {
    // A lost group write only means a redelivery; the store refuses all later writes anyway.
    if (!r) log::error("storing the state of group '", group, "' failed: ", r.error().message);
  });
}

void service::on_tick() {
  if (stopped_) return;
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
  tick_.expires_after(settings_.tick);
  tick_.async_wait([this](boost::system::error_code ec) {
    if (!ec) on_tick();
  });
}

// ---- administration -------------------------------------------------------------------------

void service::create_topic(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::CreateTopicRequest& req) {
  if (auto bad = bad_name("topic", req.name())) return c->respond_error(corr, v1::INVALID_ARGUMENT, *bad);
  if (req.partitions() > 1024) return c->respond_error(corr, v1::INVALID_ARGUMENT, "at most 1024 partitions per topic");
  if (!store_.topic(req.name()) && store_.topics().size() >= settings_.max_topics) {
    return c->respond_error(corr, v1::LIMIT_EXCEEDED,
                            "the broker already has max_topics (" + std::to_string(settings_.max_topics) + ") topics");
  }
  storage::topic_config cfg;
  cfg.name = req.name();
  cfg.partitions = req.partitions() ? req.partitions() : settings_.default_partitions;
  cfg.retention_ms = req.retention_ms() ? req.retention_ms() : settings_.default_retention_ms;
  cfg.retention_bytes = req.retention_bytes();
  std::weak_ptr<responder> weak = c;
  store_.create_topic(cfg, on_io<storage::topic_info>(io_, [weak, corr, name = cfg.name](result<storage::topic_info> r) {
    auto c = weak.lock();
    if (!c) return;
    if (!r) {
      std::string text = r.error() == errc::topic_exists
                             ? "topic '" + name + "' exists with another partition count"
                             : "creating topic '" + name + "' failed: " + r.error().message;
      return c->respond_error(corr, wire_code(r.error()), text);
    }
    v1::Frame out;
    out.set_correlation_id(corr);
    fill_topic(*out.mutable_topic_info(), r.value());
    c->respond(std::move(out));
  }));
}

v1::GroupInfo service::describe(const std::string& name, group_entry& g) {
  v1::GroupInfo info;
  info.set_name(name);
  for (auto& t : g.tracker->topics()) info.add_topics(t);
  std::map<std::pair<std::string, std::uint32_t>, std::uint32_t> dead;
  std::uint64_t dead_total = 0;
  if (auto d = store_.dead_letters(name, 1'000'000)) {
    for (auto& l : d.value()) {
      ++dead[{l.topic, l.partition}];
      ++dead_total;
    }
  }
  if (auto st = store_.load_group(name)) info.set_created_ms(st.value().info.created_ms);
  for (auto& s : g.tracker->summary()) {
    auto* p = info.add_partitions();
    p->set_topic(s.topic);
    p->set_partition(s.partition);
    p->set_acked(s.acked);
    p->set_dispatched(s.dispatched);
    std::uint64_t end = 0;
    if (auto t = store_.topic(s.topic); t && s.partition < t->partitions.size()) end = t->partitions[s.partition].next_offset;
    p->set_end_offset(end);
    p->set_lag(end > s.acked ? end - s.acked : 0);
    p->set_in_flight(s.in_flight);
    p->set_waiting(s.waiting);
    p->set_dead(dead[{s.topic, s.partition}]);
  }
  info.set_dead_letters(dead_total);
  return info;
}

void service::create_group(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::CreateGroupRequest& req) {
  if (auto bad = bad_name("group", req.group())) return c->respond_error(corr, v1::INVALID_ARGUMENT, *bad);
  if (is_webhook_group(req.group())) return c->respond_error(corr, v1::INVALID_ARGUMENT, reserved_group(req.group()));
  if (!store_.topic(req.topic())) return c->respond_error(corr, v1::UNKNOWN_TOPIC, "no topic '" + req.topic() + "'");
  std::weak_ptr<responder> weak = c;
  with_group(req.group(), {req.topic()}, req.from_latest() ? storage::group_start::latest : storage::group_start::earliest,
             [this, weak, corr, name = req.group()](result<group_entry*> g) {
    auto c = weak.lock();
    if (!c) return;
    if (!g) return c->respond_error(corr, wire_code(g.error()), "group '" + name + "': " + g.error().message);
    v1::Frame out;
    out.set_correlation_id(corr);
    *out.mutable_group_info() = describe(name, *g.value());
    c->respond(std::move(out));
  });
}

void service::describe_group(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& group) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no consumer group '" + group + "'");
  v1::Frame out;
  out.set_correlation_id(corr);
  *out.mutable_group_info() = describe(group, it->second);
  c->respond(std::move(out));
}

void service::list_groups(const std::shared_ptr<responder>& c, std::uint64_t corr) {
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* resp = out.mutable_list_groups_response();
  for (auto& [name, g] : groups_) *resp->add_groups() = describe(name, g);
  c->respond(std::move(out));
}

void service::dlq_list(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::DlqListRequest& req) {
  if (!groups_.count(req.group())) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no consumer group '" + req.group() + "'");
  auto d = store_.dead_letters(req.group(), req.limit() ? req.limit() : 100);
  if (!d) return c->respond_error(corr, wire_code(d.error()), "reading dead letters failed: " + d.error().message);
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* resp = out.mutable_dlq_list_response();
  for (auto& l : d.value()) {
    auto* dl = resp->add_dead_letters();
    storage::read_request rr;
    rr.topic = l.topic;
    rr.partition = l.partition;
    rr.from_offset = l.offset;
    rr.max_messages = 1;
    if (auto r = store_.read(rr); r && !r.value().messages.empty() && r.value().messages.front().offset() == l.offset) {
      *dl->mutable_message() = std::move(r.value().messages.front());
    } else {
      dl->mutable_message()->set_topic(l.topic);
      dl->mutable_message()->set_partition(l.partition);
      dl->mutable_message()->set_offset(l.offset);
    }
    dl->set_attempts(l.attempts);
    dl->set_dead_at_ms(l.dead_at_ms);
    dl->set_reason(l.reason);
  }
  c->respond(std::move(out));
}

void service::dlq_redrive(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& group) {
  if (!groups_.count(group)) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no consumer group '" + group + "'");
  auto d = store_.dead_letters(group, 1'000'000);
  if (!d) return c->respond_error(corr, wire_code(d.error()), "reading dead letters failed: " + d.error().message);
  storage::group_update u;
  u.group = group;
  u.sync = true;
  for (auto& l : d.value()) u.redrive.push_back({l.topic, l.partition, l.offset});
  auto refs = u.redrive;
  std::weak_ptr<responder> weak = c;
  store_.update_group(std::move(u), on_io<storage::group_update_result>(io_, [this, weak, corr, group, refs](result<storage::group_update_result> r) {
    auto c = weak.lock();
    if (r) {
      auto it = groups_.find(group);
      if (it != groups_.end()) {
        it->second.tracker->redriven(refs, now_ms());
        serve_waiters(it->second);
      }
    }
    if (!c) return;
    if (!r) return c->respond_error(corr, wire_code(r.error()), "redrive failed: " + r.error().message);
    v1::Frame out;
    out.set_correlation_id(corr);
    out.mutable_dlq_redrive_response()->set_redriven(refs.size());
    c->respond(std::move(out));
  }));
}

}  // namespace txmq::broker
