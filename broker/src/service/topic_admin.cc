// CreateTopic, ListTopics and DescribeTopic.

#include "service/service.h"

#include "cluster_mode/cluster_node.h"

#include "io_thread.h"
#include "request_checks.h"

namespace txmq::broker {

using storage::errc;

namespace {

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

void service::create_topic(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::CreateTopicRequest& req) {
  if (auto bad = bad_name("topic", req.name())) return c->respond_error(corr, v1::INVALID_ARGUMENT, *bad);
  if (req.partitions() > 1024) return c->respond_error(corr, v1::INVALID_ARGUMENT, "at most 1024 partitions per topic");
  if (cluster_ != nullptr) return create_topic_in_cluster(c, corr, req);
  if (req.replicas() > 1) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT,
                            "replicas " + std::to_string(req.replicas()) +
                                ": this broker is a single node (no cluster_etcd); it keeps one copy of each partition");
  }
  if (!store_.topic(req.name()) && store_.topics().size() >= settings_.max_topics) {
    return c->respond_error(corr, v1::LIMIT_EXCEEDED,
                            "the broker already has max_topics (" + std::to_string(settings_.max_topics) + ") topics");
  }
  storage::topic_config cfg;
  cfg.name = req.name();
  cfg.partitions = req.partitions() ? req.partitions() : settings_.default_partitions;
  cfg.retention_ms = req.retention_ms() ? req.retention_ms() : settings_.default_retention_ms;
  cfg.retention_bytes = req.retention_bytes() ? req.retention_bytes() : settings_.default_retention_bytes;
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

void service::alter_topic(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::AlterTopicRequest& req) {
  if (!req.has_retention_ms() && !req.has_retention_bytes() && !req.has_min_insync_replicas()) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT,
                            "alter topic '" + req.name() + "': nothing to change (set retention_ms, retention_bytes or "
                                                           "min_insync_replicas)");
  }
  if (req.has_retention_ms() && req.retention_ms() < 0) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT, "retention_ms must not be negative");
  }
  if (req.has_min_insync_replicas() && req.min_insync_replicas() == 0) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT, "min_insync_replicas must be at least 1");
  }
  if (cluster_ != nullptr) return alter_topic_in_cluster(c, corr, req);
  // A single broker keeps one copy of each partition: only the retention it stores per topic
  // can change (docs/cluster.md "Topic settings").
  if (req.has_min_insync_replicas()) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT,
                            "min_insync_replicas: this broker is a single node (no cluster_etcd); it keeps one copy of "
                            "each partition, so there are no replicas to wait for");
  }
  auto t = store_.topic(req.name());
  if (!t) return c->respond_error(corr, v1::UNKNOWN_TOPIC, "no topic '" + req.name() + "'");
  // 0 means the broker's own setting, as in CreateTopic.
  const auto ms = !req.has_retention_ms() ? t->config.retention_ms
                  : req.retention_ms() > 0 ? req.retention_ms()
                                           : settings_.default_retention_ms;
  const auto bytes = !req.has_retention_bytes() ? t->config.retention_bytes
                     : req.retention_bytes() > 0 ? req.retention_bytes()
                                                 : settings_.default_retention_bytes;
  std::weak_ptr<responder> weak = c;
  store_.set_topic_retention(req.name(), ms, bytes,
                             on_io<storage::topic_info>(io_, [weak, corr, name = req.name()](result<storage::topic_info> r) {
    auto c = weak.lock();
    if (!c) return;
    if (!r) {
      return c->respond_error(corr, wire_code(r.error()), "altering topic '" + name + "' failed: " + r.error().message);
    }
    common::log::info("topic '", name, "' altered: retention ", r.value().config.retention_ms, " ms, ",
                      r.value().config.retention_bytes, " bytes per partition");
    v1::Frame out;
    out.set_correlation_id(corr);
    fill_topic(*out.mutable_topic_info(), r.value());
    c->respond(std::move(out));
  }));
}

void service::list_topics(const std::shared_ptr<responder>& c, std::uint64_t corr) {
  if (cluster_ != nullptr) return list_topics_in_cluster(c, corr);
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* resp = out.mutable_list_topics_response();
  for (auto& t : store_.topics()) fill_topic(*resp->add_topics(), t);
  c->respond(std::move(out));
}

// Every topic of the cluster (etcd), led here or not, so that any node answers the cluster's
// list; partitions with their leader, epoch, replicas and ISR; offsets and bytes of this node's
// copy, which are the leader's for the partitions named in `served` (docs/cluster.md "Dead
// letters and admin reads").
void service::list_topics_in_cluster(const std::shared_ptr<responder>& c, std::uint64_t corr) {
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* resp = out.mutable_list_topics_response();
  const auto state = cluster_->snapshot();
  if (!state) {
    return c->respond_error(corr, v1::NOT_LEADER,
                            "node " + std::to_string(cluster_->id()) +
                                " has not read the cluster's state from etcd yet; retry (or ask another node)");
  }
  for (const auto& t : state->topics) {
    auto* info = resp->add_topics();
    const auto local = store_.topic(t.name);
    if (local) fill_topic(*info, *local);
    info->clear_partition_info();
    info->set_name(t.name);
    info->set_partitions(static_cast<std::uint32_t>(t.partitions));
    info->set_replicas(static_cast<std::uint32_t>(t.replicas));
    info->set_retention_ms(t.retention_ms > 0 ? t.retention_ms : settings_.default_retention_ms);
    info->set_retention_bytes(t.retention_bytes > 0 ? t.retention_bytes : settings_.default_retention_bytes);
    for (std::int32_t p = 0; p < t.partitions; ++p) {
      auto* pi = info->add_partition_info();
      pi->set_partition(static_cast<std::uint32_t>(p));
      pi->set_leader(cluster::k_no_leader);
      if (auto e = state->partitions.find({t.name, p}); e != state->partitions.end()) {
        pi->set_leader(e->second.state.leader);
        pi->set_leader_epoch(e->second.state.leader_epoch);
        for (auto n : e->second.state.replicas) pi->add_replicas(n);
        for (auto n : e->second.state.isr) pi->add_isr(n);
      }
      if (local && static_cast<std::size_t>(p) < local->partitions.size()) {
        const auto& lp = local->partitions[static_cast<std::size_t>(p)];
        pi->set_start_offset(lp.start_offset);
        pi->set_end_offset(lp.next_offset);
        pi->set_bytes(lp.bytes);
      }
    }
  }
  for (const auto& [k, epoch] : led_partitions()) {
    auto* s = resp->add_served();
    s->set_topic(k.first);
    s->set_partition(k.second);
    s->set_leader_epoch(epoch);
  }
  c->respond(std::move(out));
}

void service::describe_topic(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& name) {
  auto t = store_.topic(name);
  if (!t) return c->respond_error(corr, v1::UNKNOWN_TOPIC, "no topic '" + name + "'");
  v1::Frame out;
  out.set_correlation_id(corr);
  fill_topic(*out.mutable_topic_info(), *t);
  c->respond(std::move(out));
}

}  // namespace txmq::broker
