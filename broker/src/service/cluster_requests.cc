// Cluster mode's requests (docs/cluster.md): Produce routed to the partitions this node leads
// (NOT_LEADER otherwise), topics created in etcd, Metadata from the cluster's state, and the
// local topics made for the partitions this node leads. Metadata in single-node mode too.

#include <limits>

#include "broker_metrics.h"
#include "cluster_mode/cluster_node.h"
#include "cluster_mode/peer_pool.h"
#include "cluster_mode/replication.h"
#include "cluster_mode/routing.h"
#include "io_thread.h"
#include "request_checks.h"
#include "service/service.h"
#include "txmq/cluster/errc.h"
#include "txmq/common/log.h"

namespace txmq::broker {

namespace asio = boost::asio;

namespace {

// DESIGN §8: replicas default to min(3, live nodes) in cluster mode.
std::int32_t default_replicas(const cluster::cluster_state& state) {
  return std::max<std::int32_t>(1, std::min<std::int32_t>(3, static_cast<std::int32_t>(state.nodes.size())));
}

std::int32_t topic_replicas(const cluster::cluster_state& state, const std::string& topic) {
  for (const auto& t : state.topics) {
    if (t.name == topic) return t.replicas;
  }
  return 1;
}

void respond_not_leader(responder& c, std::uint64_t corr, const cluster_mode::not_leader& why) {
  v1::Frame out;
  out.set_correlation_id(corr);
  cluster_mode::fill_not_leader(why, *out.mutable_error());
  c.respond(std::move(out));
}

}  // namespace

void service::produce_in_cluster(const std::shared_ptr<responder>& c, std::uint64_t corr, v1::ProduceRequest& req) {
  // The messages are judged as on a single node; whether the topic exists is the cluster's call.
  auto checked = check_messages({.messages = req.messages(), .topic = &req.topic(), .request = "produce request"},
                                 {settings_.max_message_bytes, true, std::numeric_limits<std::size_t>::max()}, store_);
  if (!checked) return c->respond_error(corr, wire_code(checked.error()), std::move(checked.error().message));
  const auto state = cluster_->snapshot();
  if (!state) {
    return respond_not_leader(*c, corr, {.topic = req.topic(),
                                         .text = "node " + std::to_string(cluster_->id()) +
                                                 " has not read the cluster's state from etcd yet; retry"});
  }
  std::vector<const std::string*> keys;
  keys.reserve(static_cast<std::size_t>(req.messages_size()));
  for (const auto& m : req.messages()) keys.push_back(m.has_key() ? &m.key() : nullptr);
  auto route = cluster_mode::route_produce(*state, cluster_->id(), req.topic(), keys, keyless_round_robin_[req.topic()]);
  if (route.unknown_topic) {
    if (!settings_.auto_create_topics) {
      return c->respond_error(corr, v1::UNKNOWN_TOPIC,
                              "no topic '" + req.topic() + "' in the cluster and auto_create_topics is off");
    }
    // Created in etcd with one replica; the controller gives its partitions leaders, and the
    // client's retry (NOT_LEADER is retriable) finds them through Metadata.
    cluster::topic_config t{.name = req.topic(), .partitions = static_cast<std::int32_t>(settings_.default_partitions),
                            .replicas = default_replicas(*state)};
    std::weak_ptr<responder> weak = c;
    cluster_->create_topic(t, [this, weak, corr, topic = req.topic()](result<void> r) {  // on the cluster thread
      asio::post(io_, [weak, corr, topic, r = std::move(r)] {
        auto c = weak.lock();
        if (!c) return;
        if (!r) {
          return c->respond_error(corr, v1::STORE_UNAVAILABLE,
                                  "cannot create topic '" + topic + "' in the cluster's etcd: " + r.error().message);
        }
        respond_not_leader(*c, corr, {.topic = topic,
                                      .text = "topic '" + topic +
                                              "' was just created in the cluster; its partitions get leaders in a "
                                              "moment: refresh metadata and retry"});
      });
    });
    return;
  }
  if (route.refused) return respond_not_leader(*c, corr, *route.refused);
  if (replication_ && topic_replicas(*state, req.topic()) > 1) {
    for (auto p : route.partitions) {
      if (!replication_->ready_to_lead(req.topic(), static_cast<std::int32_t>(p))) {
        return respond_not_leader(
            *c, corr,
            {.topic = req.topic(), .partition = static_cast<std::int32_t>(p),
             .text = "node " + std::to_string(cluster_->id()) +
                     (replication_->draining()
                          ? " is shutting down and hands its leaderships over; refresh metadata and retry"
                          : " is not (yet) the leader of this partition at its current epoch; refresh metadata and "
                            "retry")});
      }
    }
    return append_replicated(c, corr, req, route.partition_count, std::move(route.partitions));
  }
  append(c, corr, req, route.partition_count, std::move(route.partitions));
}

void service::fetch_in_cluster(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::FetchRequest& req) {
  const auto state = cluster_->snapshot();
  if (!state || req.topics().empty()) return groups_->fetch(c, corr, req);
  std::optional<cluster_mode::not_leader> refused;
  for (const auto& topic : req.topics()) {
    const auto t = std::find_if(state->topics.begin(), state->topics.end(), [&](const auto& x) { return x.name == topic; });
    // A topic the cluster does not know: the groups answer UNKNOWN_TOPIC as on one node.
    if (t == state->topics.end()) return groups_->fetch(c, corr, req);
    for (std::int32_t p = 0; p < t->partitions; ++p) {
      auto e = state->partitions.find({topic, p});
      if (e == state->partitions.end()) continue;
      if (e->second.state.leader == cluster_->id()) return groups_->fetch(c, corr, req);
      if (!refused && e->second.state.leader != cluster::k_no_leader) {
        refused = cluster_mode::not_leader{.topic = topic,
                                           .leader = e->second.state.leader,
                                           .leader_address = cluster_mode::address_of(*state, e->second.state.leader)};
      }
    }
    if (!refused) refused = cluster_mode::not_leader{.topic = topic};
  }
  refused->text = "node " + std::to_string(cluster_->id()) + " leads no partition of the fetched topic(s) '" +
                  refused->topic + "'" + (req.topics_size() > 1 ? " ..." : "") +
                  ": consumers read each partition from its leader; refresh metadata and fetch from the leaders";
  respond_not_leader(*c, corr, *refused);
}

void service::drain(std::chrono::milliseconds wait, std::function<void()> done) {
  if (!replication_ || stopped_) return done();
  replication_->drain(wait, std::move(done));
}

void service::set_replication(const cluster_mode::replication_settings& s) {
  if (cluster_ == nullptr) return;
  replication_ = std::make_unique<cluster_mode::replication>(io_, store_, *cluster_, s);
  peers_ = std::make_unique<cluster_mode::peer_pool>(
      io_, s.peer,
      metrics_ ? &metrics_->registry.add_counter("txmq_peer_connections_opened_total",
                                                 "Connections this broker opened to other brokers for forwarded "
                                                 "transaction requests (copies, holds, acks, releases)",
                                                 {})
               : nullptr);
  // Consumers read only partitions led here, only below the high watermark (docs/cluster.md
  // "Consumers"); parked fetches wake when it moves.
  groups_->set_visible_end([this](const std::string& topic, std::uint32_t partition, std::uint64_t log_end) {
    return replication_->visible_end(topic, partition, log_end);
  });
  // Webhook deliveries likewise: only by each partition's leader, below its visible end.
  webhooks_->set_visible_end([this](const std::string& topic, std::uint32_t partition, std::uint64_t log_end) {
    return replication_->visible_end(topic, partition, log_end);
  });
  replication_->set_on_visible([this](const std::string& topic) {
    groups_->wake_topic(topic);
    webhooks_->wake(topic);
  });
  // Consumer-group state moves with partition leadership and acks wait for the ISR
  // (docs/cluster.md "Consumer groups").
  groups_->set_replication_gate([this](std::vector<storage::group_change_ref> changes, std::function<void(result<void>)> done) {
    replication_->await_group(std::move(changes), std::move(done));
  });
  // The dead-letter queue is listed and redriven by each partition's leader (docs/cluster.md
  // "Dead letters and admin reads"): the partitions this node leads, ready under their epoch.
  groups_->set_ownership([this] { return led_partitions(); });
  replication_->on_group_leadership([this](const std::string& topic, std::int32_t partition, bool leading) {
    // Timed: these run on the io thread (docs/cluster.md "Leadership changes on the io thread").
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    groups_->partition_leadership(topic, partition, leading);
    const auto t1 = clock::now();
    webhooks_->partition_leadership(topic, partition, leading);
    const auto t2 = clock::now();
    // Transactions homed in the partition move with it (docs/cluster.md "Transactions").
    tx_->home_leadership(topic, static_cast<std::uint32_t>(partition), leading);
    const auto t3 = clock::now();
    const auto ms = [](clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
    if (t3 - t0 >= std::chrono::milliseconds(5)) {
      common::log::info("partition ", topic, "/", partition, leading ? ": starting to lead" : ": stopping to lead",
                        " took ", ms(t3 - t0), " ms on the io thread (groups ", ms(t1 - t0), ", webhooks ", ms(t2 - t1),
                        ", transactions ", ms(t3 - t2), ")");
    }
  });
  set_tx_cluster();
}

const cluster_mode::peer_identity* service::peer_identity() const noexcept {
  return replication_ ? &replication_->peer() : nullptr;
}

std::map<std::pair<std::string, std::uint32_t>, std::int64_t> service::led_partitions() const {
  std::map<std::pair<std::string, std::uint32_t>, std::int64_t> out;
  if (cluster_ == nullptr || !replication_) return out;
  const auto state = cluster_->snapshot();
  if (!state) return out;
  for (const auto& [k, e] : state->partitions) {
    if (e.state.leader != cluster_->id()) continue;
    if (topic_replicas(*state, k.first) > 1 && !replication_->ready_to_lead(k.first, k.second)) continue;
    out.emplace(std::pair{k.first, static_cast<std::uint32_t>(k.second)}, e.state.leader_epoch);
  }
  return out;
}

void service::create_topic_in_cluster(const std::shared_ptr<responder>& c, std::uint64_t corr,
                                      const v1::CreateTopicRequest& req) {
  const auto state = cluster_->snapshot();
  const std::int32_t nodes = state ? static_cast<std::int32_t>(state->nodes.size()) : 0;
  if (req.replicas() > 0 && static_cast<std::int32_t>(req.replicas()) > nodes) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT,
                            "replicas " + std::to_string(req.replicas()) + ": the cluster has " + std::to_string(nodes) +
                                " live node(s); a partition cannot have more replicas than nodes");
  }
  const std::int32_t replicas =
      req.replicas() > 0 ? static_cast<std::int32_t>(req.replicas()) : (state ? default_replicas(*state) : 1);
  const std::int32_t partitions = static_cast<std::int32_t>(req.partitions() ? req.partitions() : settings_.default_partitions);
  if (state) {
    for (const auto& t : state->topics) {
      if (t.name == req.name() && t.partitions != partitions) {
        return c->respond_error(corr, v1::TOPIC_EXISTS,
                                "topic '" + req.name() + "' exists in the cluster with " + std::to_string(t.partitions) +
                                    " partitions");
      }
    }
  }
  if (req.min_insync_replicas() > static_cast<std::uint32_t>(replicas)) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT,
                            "min_insync_replicas " + std::to_string(req.min_insync_replicas()) + " is more than the " +
                                std::to_string(replicas) + " replicas of each partition: no write could be acknowledged");
  }
  if (req.retention_ms() < 0) return c->respond_error(corr, v1::INVALID_ARGUMENT, "retention_ms must not be negative");
  // Kept with the topic in etcd and applied by every node (docs/cluster.md "Topic settings").
  cluster::topic_config t{.name = req.name(),
                          .partitions = partitions,
                          .replicas = replicas,
                          .min_insync = static_cast<std::int32_t>(req.min_insync_replicas()),
                          .retention_ms = req.retention_ms(),
                          .retention_bytes = req.retention_bytes()};
  std::weak_ptr<responder> weak = c;
  cluster_->create_topic(t, [this, weak, corr, t](result<void> r) {
    asio::post(io_, [this, weak, corr, t, r = std::move(r)] {
      auto c = weak.lock();
      if (!c) return;
      if (!r) {
        return c->respond_error(corr, v1::STORE_UNAVAILABLE,
                                "cannot create topic '" + t.name + "' in the cluster's etcd: " + r.error().message);
      }
      // The answer describes the topic as the cluster holds it; partitions led elsewhere have
      // no local offsets here (offsets 0).
      v1::Frame out;
      out.set_correlation_id(corr);
      auto* info = out.mutable_topic_info();
      info->set_name(t.name);
      info->set_partitions(static_cast<std::uint32_t>(t.partitions));
      info->set_retention_ms(settings_.default_retention_ms);
      for (std::int32_t p = 0; p < t.partitions; ++p) info->add_partition_info()->set_partition(static_cast<std::uint32_t>(p));
      c->respond(std::move(out));
    });
  });
}

void service::alter_topic_in_cluster(const std::shared_ptr<responder>& c, std::uint64_t corr,
                                     const v1::AlterTopicRequest& req) {
  // The change is applied to the record as etcd holds it when written (a concurrent alter's
  // value included), and validated there, against the topic's replicas in that record.
  auto change = [req](cluster::topic_config& t) -> result<void> {
    if (req.has_min_insync_replicas()) {
      if (req.min_insync_replicas() > static_cast<std::uint32_t>(t.replicas)) {
        return error(cluster::errc::invalid_argument,
                     "min_insync_replicas " + std::to_string(req.min_insync_replicas()) + " is more than the " +
                         std::to_string(t.replicas) + " replicas of each partition of '" + t.name +
                         "': no write could be acknowledged");
      }
      t.min_insync = static_cast<std::int32_t>(req.min_insync_replicas());
    }
    if (req.has_retention_ms()) t.retention_ms = req.retention_ms();
    if (req.has_retention_bytes()) t.retention_bytes = req.retention_bytes();
    return outcome::success();
  };
  std::weak_ptr<responder> weak = c;
  cluster_->alter_topic(req.name(), std::move(change), [this, weak, corr, name = req.name()](result<cluster::topic_config> r) {
    asio::post(io_, [this, weak, corr, name, r = std::move(r)] {
      auto c = weak.lock();
      if (!c) return;
      if (!r) {
        const auto& e = r.error().code;
        const auto code = e == cluster::errc::not_found          ? v1::UNKNOWN_TOPIC
                          : e == cluster::errc::invalid_argument ? v1::INVALID_ARGUMENT
                                                                 : v1::STORE_UNAVAILABLE;
        return c->respond_error(corr, code, "cannot alter topic '" + name + "' in the cluster's etcd: " + r.error().message);
      }
      const auto& t = r.value();
      common::log::info("topic '", name, "' altered in the cluster: min_insync_replicas ", cluster::min_insync_replicas(t),
                        ", retention_ms ", t.retention_ms, ", retention_bytes ", t.retention_bytes,
                        " (0: each broker's own)");
      // Every node applies it from the next state it reads (this one too): the leaders'
      // acknowledgement check at once, each local copy's retention on its next pass.
      v1::Frame out;
      out.set_correlation_id(corr);
      auto* info = out.mutable_topic_info();
      info->set_name(t.name);
      info->set_partitions(static_cast<std::uint32_t>(t.partitions));
      info->set_retention_ms(t.retention_ms > 0 ? t.retention_ms : settings_.default_retention_ms);
      info->set_retention_bytes(t.retention_bytes > 0 ? t.retention_bytes : settings_.default_retention_bytes);
      info->set_min_insync_replicas(static_cast<std::uint32_t>(cluster::min_insync_replicas(t)));
      for (std::int32_t p = 0; p < t.partitions; ++p) info->add_partition_info()->set_partition(static_cast<std::uint32_t>(p));
      c->respond(std::move(out));
    });
  });
}

void service::sync_topic_retention(const cluster::cluster_state& state) {
  for (const auto& t : state.topics) {
    if (creating_locally_.contains(t.name) || altering_locally_.contains(t.name)) continue;
    const auto local = store_.topic(t.name);
    if (!local) continue;
    // As the copy was created: the record's value, else the broker's own.
    const auto ms = t.retention_ms > 0 ? t.retention_ms : settings_.default_retention_ms;
    const auto bytes = t.retention_bytes > 0 ? t.retention_bytes : settings_.default_retention_bytes;
    if (local->config.retention_ms == ms && local->config.retention_bytes == bytes) continue;
    altering_locally_.insert(t.name);
    store_.set_topic_retention(t.name, ms, bytes, on_io<storage::topic_info>(io_, [this, name = t.name, ms, bytes](result<storage::topic_info> r) {
      altering_locally_.erase(name);
      if (!r) {
        common::log::error("cannot apply topic '", name, "''s retention from etcd to its local copy: ", r.error().message);
        synced_state_.reset();  // try again on the next tick
        return;
      }
      common::log::info("topic '", name, "': local copy's retention now ", ms, " ms, ", bytes, " bytes per partition (from etcd)");
    }));
  }
}

void service::metadata(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::MetadataRequest& req) {
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* resp = out.mutable_metadata_response();
  if (cluster_ != nullptr) {
    const auto state = cluster_->snapshot();
    if (state) {
      cluster_mode::fill_metadata(*state, cluster_->id(), cluster_->cluster_name(), req.topics(), *resp);
    } else {
      resp->set_cluster(true);
      resp->set_cluster_name(cluster_->cluster_name());
      resp->set_node_id(cluster_->id());
      resp->set_controller(cluster::k_no_leader);
    }
    return c->respond(std::move(out));
  }
  // A single broker: node 0, leader of everything it has.
  resp->set_cluster(false);
  resp->set_node_id(0);
  resp->set_controller(cluster::k_no_leader);
  auto* self = resp->add_nodes();
  self->set_id(0);
  self->set_address(advertise_);
  for (const auto& t : store_.topics()) {
    if (!req.topics().empty() && std::find(req.topics().begin(), req.topics().end(), t.config.name) == req.topics().end()) {
      continue;
    }
    auto* tm = resp->add_topics();
    tm->set_name(t.config.name);
    tm->set_partitions(t.config.partitions);
    tm->set_replicas(1);
    for (std::uint32_t p = 0; p < t.config.partitions; ++p) {
      auto* pm = tm->add_partition_info();
      pm->set_partition(p);
      pm->set_leader(0);
      pm->set_leader_address(advertise_);
      pm->add_replicas(0);
      pm->add_isr(0);
    }
  }
  c->respond(std::move(out));
}

void service::sync_local_topics() {
  auto state = cluster_->snapshot();
  if (!state || state == synced_state_) return;
  synced_state_ = state;
  sync_topic_retention(*state);
  for (const auto& t : state->topics) {
    if (store_.topic(t.name) || creating_locally_.contains(t.name)) continue;
    bool leads_one = false;
    for (std::int32_t p = 0; p < t.partitions && !leads_one; ++p) {
      auto it = state->partitions.find({t.name, p});
      leads_one = it != state->partitions.end() && it->second.state.leader == cluster_->id();
    }
    if (!leads_one) continue;
    storage::topic_config cfg;
    cfg.name = t.name;
    cfg.partitions = static_cast<std::uint32_t>(t.partitions);
    // The topic's retention from etcd, else the broker's default like a follower's copy (without
    // it a leader kept its whole log under retention_bytes while its followers trimmed).
    cfg.retention_ms = t.retention_ms > 0 ? t.retention_ms : settings_.default_retention_ms;
    cfg.retention_bytes = t.retention_bytes > 0 ? t.retention_bytes : settings_.default_retention_bytes;
    creating_locally_.insert(t.name);
    store_.create_topic(cfg, on_io<storage::topic_info>(io_, [this, name = t.name](result<storage::topic_info> r) {
      creating_locally_.erase(name);
      if (!r) {
        common::log::error("cannot create the local partitions of topic '", name, "' (led here): ", r.error().message);
        synced_state_.reset();  // try again on the next tick
      }
    }));
  }
}

}  // namespace txmq::broker
