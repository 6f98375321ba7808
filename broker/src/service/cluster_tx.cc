// Transactions in cluster mode (docs/cluster.md "Transactions"): what the service gives the
// tx coordinator (tx_coordinator::cluster_hooks). A transaction's home partition is the
// partition of its first message; Prepare and EndTx are served by that partition's leader
// (NOT_LEADER with its address elsewhere) and answered once the home ISR holds the record
// (replication::await_group, the gate acks use). A COMMIT's messages are copied into their
// partitions by the home leader through the replicated append, same ids.

#include <map>

#include "cluster_mode/cluster_node.h"
#include "cluster_mode/peer_pool.h"
#include "cluster_mode/replication.h"
#include "cluster_mode/routing.h"
#include "io_thread.h"
#include "service/service.h"
#include "tx/tx_coordinator.h"
#include "txmq/protocol/partitioner.h"

namespace txmq::broker {

namespace {

// A copy's Produce to another leader: answered once that leader's ISR holds it, so longer than
// replication_timeout (10 s by default, after which it answers NOT_ENOUGH_REPLICAS itself).
constexpr std::chrono::milliseconds k_copy_timeout{15'000};

v1::Error not_leader_error(const cluster_mode::not_leader& why) {
  v1::Error e;
  cluster_mode::fill_not_leader(why, e);
  return e;
}

v1::Error plain_error(v1::ErrorCode code, std::string text) {
  v1::Error e;
  e.set_code(code);
  e.set_message(std::move(text));
  return e;
}

}  // namespace

std::optional<v1::Error> service::tx_owner(const std::string& topic, std::uint32_t partition) const {
  return leads_now(topic, partition, "the transaction's home partition");
}

std::optional<v1::Error> service::leads_now(const std::string& topic, std::uint32_t partition,
                                            const std::string& what) const {
  const auto state = cluster_->snapshot();
  if (!state) {
    return not_leader_error({.topic = topic,
                             .partition = static_cast<std::int32_t>(partition),
                             .text = "node " + std::to_string(cluster_->id()) +
                                     " has not read the cluster's state from etcd yet; retry"});
  }
  if (auto refused = cluster_mode::partition_refusal(*state, cluster_->id(), topic, static_cast<std::int32_t>(partition))) {
    refused->text = what + ": " + refused->text;
    return not_leader_error(*refused);
  }
  std::int32_t replicas = 1;
  for (const auto& t : state->topics) {
    if (t.name == topic) replicas = t.replicas;
  }
  if (replicas > 1 && replication_ && !replication_->ready_to_lead(topic, static_cast<std::int32_t>(partition))) {
    return not_leader_error({.topic = topic,
                             .partition = static_cast<std::int32_t>(partition),
                             .text = "node " + std::to_string(cluster_->id()) +
                                     " is not (yet) the leader of " + what + " " + topic + "/" +
                                     std::to_string(partition) + " at its current epoch; refresh metadata and retry"});
  }
  return std::nullopt;
}

std::optional<v1::Error> service::place_tx(storage::prepare_request& pr) const {
  const auto state = cluster_->snapshot();
  if (!state) return tx_owner("", 0);
  // Every message's partition is fixed now, as a Produce's would be: keyed by its key, keyless
  // by its id (so a replayed copy lands where the first one did and is deduplicated there).
  for (auto& m : pr.messages) {
    std::int32_t partitions = 0;
    for (const auto& t : state->topics) {
      if (t.name == m.topic()) partitions = t.partitions;
    }
    if (partitions <= 0) {
      return plain_error(v1::UNKNOWN_TOPIC, "no topic '" + m.topic() +
                                                "' in the cluster: create it first (a transaction does not create "
                                                "topics in cluster mode)");
    }
    const auto n = static_cast<std::uint32_t>(partitions);
    m.set_partition(m.has_key() ? protocol::partition_for_key(m.key(), n) : protocol::partition_for_key(m.id(), n));
  }
  // A topic the home leader holds no partition of is created locally (empty) with the
  // cluster's partition count, so the record can name it; one count serves all the topics
  // only when they agree (otherwise such a topic must already be here).
  std::optional<std::uint32_t> count;
  bool agree = true;
  for (auto& m : pr.messages) {
    for (const auto& t : state->topics) {
      if (t.name != m.topic()) continue;
      if (count && *count != static_cast<std::uint32_t>(t.partitions)) agree = false;
      count = static_cast<std::uint32_t>(t.partitions);
    }
  }
  if (agree) pr.auto_create_partitions = count;
  pr.home_topic = pr.messages.front().topic();
  pr.home_partition = pr.messages.front().partition();
  if (auto refused = tx_owner(pr.home_topic, *pr.home_partition)) return refused;
  return std::nullopt;
}

void service::copy_tx(const storage::tx_record& rec, std::function<void(result<void>)> done) {
  const auto state = cluster_->snapshot();
  if (!state) return done(error(protocol::errc::not_leader, "the cluster's state is not read yet"));
  // Messages of partitions led here: one replicated append per topic. The others: one Produce
  // per (topic, leader) to that leader, over a peer connection (peer_connection.h: TLS and the
  // cluster token when the cluster uses them). Same ids everywhere: a copy replayed after a
  // failover is answered by the dedupe index.
  std::map<std::string, std::vector<const v1::Message*>> local;
  std::map<std::pair<std::string, std::string>, std::vector<const v1::Message*>> remote;  // (topic, address)
  for (auto& m : rec.messages) {
    if (!tx_owner(m.topic(), m.partition())) {
      local[m.topic()].push_back(&m);
      continue;
    }
    auto refused = cluster_mode::partition_refusal(*state, cluster_->id(), m.topic(), static_cast<std::int32_t>(m.partition()));
    if (!refused || refused->leader_address.empty()) {
      return done(error(protocol::errc::not_leader, "partition " + m.topic() + "/" + std::to_string(m.partition()) +
                                                        " has no leader to copy to now"));
    }
    remote[{m.topic(), refused->leader_address}].push_back(&m);
  }
  auto left = std::make_shared<std::size_t>(local.size() + remote.size());
  auto failed = std::make_shared<std::optional<error>>();
  auto shared_done = std::make_shared<std::function<void(result<void>)>>(std::move(done));
  auto finish = [left, failed, shared_done](result<void> r) {
    if (!r && !*failed) *failed = r.error();
    if (--*left > 0) return;
    if (*failed) return (*shared_done)(**failed);
    (*shared_done)(outcome::success());
  };
  if (*left == 0) return finish(outcome::success());
  const std::string txid(rec.id.raw());
  // Named copies, not structured bindings: clang 14 (the fuzz build) cannot capture those.
  for (auto& entry : local) {
    const std::string& topic = entry.first;
    const auto& ms = entry.second;
    storage::append_request ar;
    ar.topic = topic;
    ar.sync = true;
    for (auto* m : ms) {
      v1::Message copy = *m;
      copy.set_txid(txid);
      copy.set_publish_time_ms(0);
      ar.partitions.push_back(m->partition());
      ar.messages.push_back(std::move(copy));
    }
    for (const auto& t : state->topics) {
      if (t.name == topic) ar.auto_create_partitions = static_cast<std::uint32_t>(t.partitions);
    }
    store_.append(std::move(ar), on_io<storage::append_result>(io_, [this, topic, finish](result<storage::append_result> r) {
      if (!r) return finish(r.error());
      // A duplicate too (a copy replayed after a failover): its original may not be replicated yet.
      std::map<std::int32_t, std::uint64_t> need;
      for (auto& p : r.value().positions) {
        auto& n = need[static_cast<std::int32_t>(p.partition)];
        n = std::max(n, p.offset + 1);
      }
      if (!replication_) return finish(outcome::success());
      replication_->await_replicas(topic, {need.begin(), need.end()}, [this, topic, finish](result<void> done) {
        if (done) webhooks_->wake(topic);
        finish(std::move(done));
      });
    }));
  }
  for (auto& entry : remote) {
    const auto where = entry.first;
    const auto& ms = entry.second;
    if (!peers_) {
      finish(error(protocol::errc::internal, "copy to " + where.first + " at " + where.second + ": no replication"));
      continue;
    }
    v1::Frame f;
    auto* pr = f.mutable_produce();
    pr->set_topic(where.first);
    for (auto* m : ms) {
      auto* copy = pr->add_messages();
      *copy = *m;
      copy->clear_partition();
      copy->clear_offset();
      copy->clear_publish_time_ms();
      copy->clear_txid();
    }
    // Answered by the leader once its ISR holds the messages (a replicated Produce).
    peers_->request(where.second, std::move(f), k_copy_timeout, [finish, where](result<v1::Frame> r) {
      if (!r) return finish(r.error());
      if (r.value().has_error()) {
        return finish(error(protocol::errc::not_leader, "copy to " + where.first + " at " + where.second + ": " +
                                                            r.value().error().message()));
      }
      if (!r.value().has_produce_response()) {
        return finish(error(protocol::errc::internal, "copy to " + where.first + " at " + where.second +
                                                          ": unexpected answer"));
      }
      finish(outcome::success());
    });
  }
}

void service::set_tx_cluster() {
  tx_coordinator::cluster_hooks h;
  h.place = [this](storage::prepare_request& pr) { return place_tx(pr); };
  h.owner = [this](const std::string& topic, std::uint32_t partition) { return tx_owner(topic, partition); };
  h.await = [this](std::vector<storage::group_change_ref> changes, std::function<void(result<void>)> done) {
    if (!replication_) return done(outcome::success());
    replication_->await_group(std::move(changes), std::move(done));
  };
  h.copy = [this](const storage::tx_record& rec, std::function<void(result<void>)> done) { copy_tx(rec, std::move(done)); };
  h.settle_acks = [this](tx_coordinator::settle_step step, const storage::txid& id,
                         const std::vector<storage::ack_ref>& acks, std::function<void(result<std::vector<bool>>)> done) {
    settle_tx_acks(step, id, acks, std::move(done));
  };
  h.led = [this] { return led_partitions(); };
  tx_->set_cluster(std::move(h));
}

}  // namespace txmq::broker
