// Produce: checks the messages (in cluster mode routes them first: service/cluster_requests.cc),
// appends them (answered after the fsync with durability = sync) and wakes the readers of the topic.

#include "service/service.h"

#include "broker_metrics.h"
#include "io_thread.h"
#include "request_checks.h"

namespace txmq::broker {

void service::produce(const std::shared_ptr<responder>& c, std::uint64_t corr, v1::ProduceRequest& req) {
  if (cluster_ != nullptr) return produce_in_cluster(c, corr, req);
  auto checked = check_messages({.messages = req.messages(), .topic = &req.topic(), .request = "produce request"},
                                 {settings_.max_message_bytes, settings_.auto_create_topics, settings_.max_topics}, store_);
  if (!checked) return c->respond_error(corr, wire_code(checked.error()), std::move(checked.error().message));
  append(c, corr, req, checked.value().empty() ? std::nullopt : std::optional(settings_.default_partitions), {});
}

void service::append(const std::shared_ptr<responder>& c, std::uint64_t corr, v1::ProduceRequest& req,
                     std::optional<std::uint32_t> auto_create, std::vector<std::uint32_t> partitions) {
  storage::append_request ar;
  ar.topic = req.topic();
  ar.sync = settings_.sync;
  ar.auto_create_partitions = auto_create;
  ar.partitions = std::move(partitions);
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
    if (metrics_) metrics_->produce_latency.observe(std::chrono::steady_clock::now() - started);
    count_appended(r, body_bytes);
    auto c = weak.lock();
    if (r) {
      // New messages: wake the webhooks and the long polls of the groups that read this topic.
      webhooks_->wake(topic);
      groups_->wake_topic(topic);
    }
    if (!c) return;
    if (!r) {
      return c->respond_error(corr, wire_code(r.error()), "produce to '" + topic + "' failed: " + r.error().message);
    }
    c->respond(produce_answer(corr, r.value().positions));
  }));
}

void service::count_appended(const result<storage::append_result>& r, std::uint64_t body_bytes) {
  if (!metrics_) return;
  if (!r) {
    metrics_->produce_errors.inc();
    return;
  }
  std::uint64_t dup = 0;
  for (auto& p : r.value().positions) dup += p.duplicate ? 1 : 0;
  metrics_->messages_in.inc(r.value().positions.size() - dup);
  metrics_->duplicates.inc(dup);
  metrics_->bytes_in.inc(body_bytes);
}

v1::Frame service::produce_answer(std::uint64_t corr, const std::vector<storage::position>& positions) {
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* resp = out.mutable_produce_response();
  for (const auto& p : positions) {
    auto* pos = resp->add_positions();
    pos->set_partition(p.partition);
    pos->set_offset(p.offset);
    pos->set_duplicate(p.duplicate);
  }
  return out;
}

}  // namespace txmq::broker
