#pragma once

// The broker's seat in a cluster (cluster_etcd set; docs/cluster.md): a cluster::member (the
// node's session on an etcd lease, the controller campaign and the controller's work) and a
// second etcd client for the broker's own writes (topics). Both run on a thread of their own,
// so that a busy request loop never delays a lease renewal (a late renewal would make the node
// give its leaderships up).
//
// Thread-safety: snapshot(), id(), create_topic() from any thread; start() and stop() from one
// thread that is not the cluster thread. create_topic()'s callback runs on the cluster thread:
// post it on to where it belongs.

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "txmq/cluster/auth_records.h"
#include "txmq/cluster/member.h"
#include "txmq/common/metrics.h"
#include "txmq/protocol/result.h"

namespace txmq::broker::cluster_mode {

class cluster_metrics;

// How far one follower of a partition led here is behind (replication publishes these, the
// metrics read them: txmq_replica_lag_messages).
struct replica_lag_sample {
  std::string topic;
  std::int32_t partition = 0;
  cluster::node_id node = 0;
  std::uint64_t messages = 0;  // the leader's log end minus the follower's reported fsynced end
};

struct node_settings {
  std::vector<common::host_port> etcd;
  cluster::member_options member;
};

class cluster_node {
 public:
  explicit cluster_node(node_settings settings);
  ~cluster_node();  // stop()
  cluster_node(const cluster_node&) = delete;
  cluster_node& operator=(const cluster_node&) = delete;

  // Registers the cluster metrics (cluster_metrics.h) and samples the state for them every
  // 100 ms on the cluster thread. Before start(); `registry` outlives this node.
  void enable_metrics(common::metrics_registry& registry);
  // Starts the session in the background (it registers as soon as etcd answers).
  void start();
  // Revokes the lease (the others see this node leave now, not after the TTL) and ends the
  // thread. Idempotent.
  void stop();

  [[nodiscard]] cluster::node_id id() const noexcept { return settings_.member.id; }
  [[nodiscard]] const std::string& cluster_name() const noexcept { return settings_.member.cluster_name; }
  [[nodiscard]] const std::string& advertise() const noexcept { return settings_.member.advertise; }
  [[nodiscard]] bool registered() const noexcept { return member_->registered(); }
  // The last state read from etcd; nullptr before the first read.
  [[nodiscard]] std::shared_ptr<const cluster::cluster_state> snapshot() const { return member_->snapshot(); }
  // Leader changes this node wrote as controller.
  [[nodiscard]] std::uint64_t leader_elections() const noexcept { return member_->leader_elections(); }

  // Writes topics/<name> unless it exists (an existing one is success: the caller reads the
  // state for its config). Errors: etcd's (unavailable, ...), invalid_argument.
  void create_topic(cluster::topic_config topic, std::function<void(result<void>)> done);
  // Changes topics/<name> (cluster::alter_topic: compared on the key's revision, `change` applied
  // again to a concurrent writer's value). `change` and `done` run on the cluster thread.
  void alter_topic(std::string name, std::function<result<void>(cluster::topic_config&)> change,
                   std::function<void(result<cluster::topic_config>)> done);
  // A partition leader's ISR change, or its hand-over when it drains (cluster::write_isr):
  // written only if the partition key is still at `mod_revision`. `done` runs on the cluster thread.
  void write_isr(std::string topic, std::int32_t partition, cluster::partition_state state,
                 std::int64_t mod_revision, std::function<void(result<void>)> done);

  // Principals and grants in etcd (cluster/auth_records.h, docs/cluster.md "Principals and
  // ACLs"). `done` runs on the cluster thread.
  using record_done = std::function<void(result<cluster::record_change>)>;
  void put_principal(cluster::principal_record p, record_done done);
  void delete_principal(std::string name, record_done done);
  void put_acl(cluster::acl_record a, record_done done);
  void delete_acl(cluster::acl_record a, record_done done);
  // Webhook subscriptions in etcd (cluster/auth_records.h); `done` on the cluster thread.
  void put_webhook(std::string id, std::string record, bool create, record_done done);
  void delete_webhook(std::string id, record_done done);
  // A 410's disable made durable (docs/cluster.md "Webhooks"): sets the record's disabled flag,
  // reason and time in etcd, compared on the key's revision (a concurrent rotation is kept, a
  // delete wins), retried with back-off (250 ms doubling to 5 s) until etcd holds it, the key
  // is gone, or the node stops. `done` (cluster thread) gets changed = false when the record
  // was gone or already disabled.
  void disable_webhook(std::string id, std::string reason, std::int64_t disabled_ms, record_done done);
  // An operator's change of a subscription (rotate-secret): `change` makes the new record from
  // the one etcd holds (so a disable written meanwhile by another node's 410 is kept), written
  // compared on the key's revision (cluster::update_webhook), not retried beyond its own
  // compare retries. `change` and `done` run on the cluster thread; changed = false when the
  // key is gone.
  void update_webhook(std::string id, std::function<std::optional<std::string>(std::string_view)> change,
                      record_done done);
  // Attempts of disable_webhook that failed and were retried (tests, logs).
  [[nodiscard]] std::uint64_t webhook_disable_retries() const noexcept { return disable_retries_.load(); }

  // The replica lag of every follower of the partitions led here, replaced whole by the
  // replication (io thread) and read at scrape time (HTTP thread): any thread.
  void set_replica_lag(std::vector<replica_lag_sample> lag);
  [[nodiscard]] std::vector<replica_lag_sample> replica_lag() const;

 private:
  // Runs one etcd write of a principal or grant on the cluster thread; an exception answers too.
  void run_record(std::function<boost::asio::awaitable<result<cluster::record_change>>()> op, record_done done);

  node_settings settings_;
  boost::asio::io_context io_;
  std::unique_ptr<cluster::member> member_;
  std::unique_ptr<cluster::etcd_client> etcd_;
  std::unique_ptr<cluster_metrics> metrics_;
  std::thread thread_;
  bool started_ = false;
  std::atomic<bool> stopped_ = false;
  std::atomic<std::uint64_t> disable_retries_{0};
  mutable std::mutex lag_mu_;
  std::vector<replica_lag_sample> lag_;
};

}  // namespace txmq::broker::cluster_mode
