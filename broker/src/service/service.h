#pragma once

// The broker's request handling: the dispatch table from each Frame body type to its handler,
// the handlers of Produce (produce.cc) and of the topic requests (topic_admin.cc), and the
// subsystems it owns and drives: the consumer groups, the transaction coordinator and the
// webhook notifier. Everything here runs on the broker's io thread (one thread: no locks);
// storage work runs on the store's own threads and its completions are posted back here.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <boost/asio.hpp>

#include "admin_reads.h"
#include "auth/access_control.h"
#include "auth/request_access.h"
#include "groups/consumer_groups.h"
#include "groups/group_tracker.h"
#include "net/responder.h"
#include "tx/tx_coordinator.h"
#include "webhooks/webhook_notifier.h"
#include "txmq/storage/store.h"

namespace txmq::cluster {
struct cluster_state;
}

namespace txmq::broker {

struct broker_metrics;
namespace cluster_mode {
class cluster_node;
class replication;
class peer_pool;
struct replication_settings;
struct peer_identity;
}

struct service_settings {
  delivery_settings delivery;
  std::uint32_t max_message_bytes = 4u << 20;
  std::uint32_t max_frame_bytes = 8u << 20;
  bool auto_create_topics = true;
  std::uint32_t default_partitions = 4;
  std::int64_t default_retention_ms = 7LL * 24 * 3600 * 1000;
  std::uint64_t default_retention_bytes = 0;  // per partition; 0 = no size limit
  bool sync = true;  // durability = sync
  std::size_t max_topics = 10'000;
  std::size_t max_groups = 10'000;
  std::uint32_t default_fetch_messages = 100;
  std::uint32_t max_fetch_messages = 10'000;
  std::chrono::milliseconds tick{20};
  std::string broker_id = "txmq-1";
  // Transactions and check-back; the limits above are copied into it.
  tx_settings tx;
  // Webhook subscriptions (docs/protocol.md §11); max_frame_bytes is copied into it.
  webhook_settings webhooks;
  // auth = true, and the SHA-256 of the admin principal's token (admin_token_file).
  bool auth = false;
  std::string admin_token_sha256;
  // Cluster mode with auth: the SHA-256 of cluster_token_file's token (the brokers' principal).
  std::string cluster_token_sha256;
};

// Why a Hello is refused: NOT_AUTHENTICATED or NOT_AUTHORIZED, and the text for the client.
struct hello_refusal {
  v1::ErrorCode code;
  std::string text;
};

class service {
 public:
  service(boost::asio::io_context& io, storage::store& store, service_settings settings, broker_metrics* metrics);
  ~service();  // defined where cluster_mode::replication is complete

  // Loads every stored group and starts the timer that expires deadlines and long polls.
  [[nodiscard]] result<void> start();
  // Cluster mode, before stop(): hands the leaderships of replicated partitions over to in-sync
  // replicas (cluster_mode::replication::drain), at most `wait`; `done` runs once on the io
  // thread. Single node: `done` at once. Call on the io thread.
  void drain(std::chrono::milliseconds wait, std::function<void()> done);
  // Stops the timer and answers parked long polls with what they have (nothing).
  void stop();
  // Closes every connection once its queued answers are written.
  void close_all();

  // Authenticates a Hello (auth_token, or the CN of a verified client certificate with mTLS)
  // and checks that its principal holds transact on the producer group it declares. Answers
  // the principal, or why the connection is refused (it is then closed).
  [[nodiscard]] std::variant<std::string, hello_refusal> admit(const v1::Hello& hello,
                                                               const std::optional<std::string>& cert_principal);

  void connection_opened(const std::shared_ptr<responder>& c);
  void connection_closed(responder& c);
  // One request frame after Hello. The client gets exactly one answer for it.
  void handle(const std::shared_ptr<responder>& c, v1::Frame&& frame);
  // An answer to a request of the broker's own (CheckTx): CheckTxResult or Error. Gets no answer.
  void handle_answer(const std::shared_ptr<responder>& c, v1::Frame&& frame);

  [[nodiscard]] const std::string& broker_id() const noexcept { return settings_.broker_id; }
  [[nodiscard]] std::uint32_t max_message_bytes() const noexcept { return settings_.max_message_bytes; }
  [[nodiscard]] std::size_t connections() const noexcept { return connections_.size(); }
  [[nodiscard]] webhook_notifier& webhooks() noexcept { return *webhooks_; }
  [[nodiscard]] auth::access_control& access() noexcept { return *access_; }
  // What a request needs is computed with these (the tx's producer group, a group's topics).
  [[nodiscard]] const auth::request_lookups& lookups() const noexcept { return lookups_; }
  // Cluster mode (docs/cluster.md): topics live in etcd, Produce is routed to partition leaders,
  // Metadata answers from the cluster's state. Set before start(); nullptr = a single node.
  // `advertise` is the address Metadata names for this broker in single-node mode.
  // Principals and grants then live in etcd (docs/cluster.md "Principals and ACLs"):
  // service/cluster_access.cc.
  void set_cluster(cluster_mode::cluster_node* node);
  void set_advertise(std::string address) { advertise_ = std::move(address); }
  // Replication of partitions with replicas > 1 (cluster_mode/replication.h); cluster mode only:
  // after set_cluster(), on the io thread before it serves.
  void set_replication(const cluster_mode::replication_settings& s);
  // Cluster mode: how this broker dials its peers (TLS; its cluster token is not for others'
  // use), nullptr on a single node. The admin HTTP API's cluster views (http/cluster_views.h)
  // dial the leaders with it, under the HTTP caller's own token.
  [[nodiscard]] const cluster_mode::peer_identity* peer_identity() const noexcept;
  [[nodiscard]] boost::asio::io_context& io() noexcept { return io_; }

 private:
  void produce(const std::shared_ptr<responder>& c, std::uint64_t corr, v1::ProduceRequest& req);
  // The append of a checked Produce: `auto_create` partitions when the topic is missing here,
  // `partitions` the broker's choice per message (empty: the store's).
  void append(const std::shared_ptr<responder>& c, std::uint64_t corr, v1::ProduceRequest& req,
              std::optional<std::uint32_t> auto_create, std::vector<std::uint32_t> partitions);
  // Cluster mode (service/cluster_requests.cc).
  void produce_in_cluster(const std::shared_ptr<responder>& c, std::uint64_t corr, v1::ProduceRequest& req);
  void create_topic_in_cluster(const std::shared_ptr<responder>& c, std::uint64_t corr,
                               const v1::CreateTopicRequest& req);
  void alter_topic_in_cluster(const std::shared_ptr<responder>& c, std::uint64_t corr,
                              const v1::AlterTopicRequest& req);
  // Cluster mode: each local copy's retention follows its topic's etcd record (altered after
  // the copy was created); called with every new cluster state.
  void sync_topic_retention(const cluster::cluster_state& state);
  void metadata(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::MetadataRequest& req);
  // A Fetch naming only topics of which this node leads no partition is answered NOT_LEADER
  // (the consumer's metadata is stale); otherwise the groups serve it, from led partitions only.
  void fetch_in_cluster(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::FetchRequest& req);
  // Transactions in a cluster (service/cluster_tx.cc, docs/cluster.md "Transactions"): the
  // coordinator's hooks. tx_owner: nullopt when this node leads the home partition now (ready
  // under its epoch), else the NOT_LEADER error; place_tx: a Prepare's home and partitions.
  void set_tx_cluster();
  [[nodiscard]] std::optional<v1::Error> tx_owner(const std::string& topic, std::uint32_t partition) const;
  [[nodiscard]] std::optional<v1::Error> place_tx(storage::prepare_request& pr) const;
  void copy_tx(const storage::tx_record& rec, std::function<void(result<void>)> done);
  // nullopt when this node leads `topic`/`partition` now (ready under its epoch), else the
  // NOT_LEADER error, its text naming the partition as `what`.
  [[nodiscard]] std::optional<v1::Error> leads_now(const std::string& topic, std::uint32_t partition,
                                                   const std::string& what) const;
  // Read-process-write in a cluster (service/cluster_tx_acks.cc): the coordinator's
  // settle_acks hook (each ack's input partition leader settles it on the transaction's behalf:
  // here, or forwarded as an Ack/Nack/Extend carrying `tx`), and the handler of such forwarded
  // requests (NOT_LEADER unless this node leads every partition they name).
  void settle_tx_acks(tx_coordinator::settle_step step, const storage::txid& id,
                      const std::vector<storage::ack_ref>& acks, std::function<void(result<std::vector<bool>>)> done);
  void settle_for_tx(const std::shared_ptr<responder>& c, std::uint64_t corr, consumer_groups::settle_kind kind,
                     const std::string& group, const google::protobuf::RepeatedPtrField<v1::DeliveryRef>& refs,
                     std::uint32_t ms, const std::string& tx);
  // The ProduceResponse for stored messages (both append paths answer with it).
  static v1::Frame produce_answer(std::uint64_t corr, const std::vector<storage::position>& positions);
  // The produce metrics of one append: messages, duplicates and bytes stored (or an error). Both
  // append paths count here; each observes produce_latency when it answers.
  void count_appended(const result<storage::append_result>& r, std::uint64_t body_bytes);
  // A Produce to a replicated topic: appended, then answered once the ISR fsynced it.
  void append_replicated(const std::shared_ptr<responder>& c, std::uint64_t corr, v1::ProduceRequest& req,
                         std::uint32_t partition_count, std::vector<std::uint32_t> partitions);
  // The partitions this node leads now, ready under their epoch (replicated ones), with the
  // epochs: what it answers admin reads for (DlqList, TxList, ListTopics' offsets, ...).
  // Empty on a single node and before the cluster's state is read.
  [[nodiscard]] std::map<std::pair<std::string, std::uint32_t>, std::int64_t> led_partitions() const;
  // ListTopics in a cluster: every topic of the cluster's state (service/topic_admin.cc).
  void list_topics_in_cluster(const std::shared_ptr<responder>& c, std::uint64_t corr);
  // Creates in the store the topics of the cluster's state that have a partition led here.
  void sync_local_topics();
  void create_topic(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::CreateTopicRequest& req);
  void alter_topic(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::AlterTopicRequest& req);
  void list_topics(const std::shared_ptr<responder>& c, std::uint64_t corr);
  void describe_topic(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& name);
  void list_connections(const std::shared_ptr<responder>& c, std::uint64_t corr);
  // Principals and ACLs (service/auth_admin.cc).
  void principal_create(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::PrincipalCreateRequest& req);
  void principal_list(const std::shared_ptr<responder>& c, std::uint64_t corr);
  void principal_delete(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::PrincipalDeleteRequest& req);
  void acl_change(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::AclEntry& entry, bool grant);
  void acl_list(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::AclListRequest& req);
  // With auth on: NOT_AUTHORIZED unless the connection's principal holds what the request
  // needs (auth/request_access.h). Answers whether the request may go on.
  [[nodiscard]] bool authorized(const std::shared_ptr<responder>& c, const v1::Frame& frame);

  // Messages of `topics` became visible and deliveries of `groups` were settled: wake the
  // webhook subscriptions and the long polls parked on them.
  void wake(const std::vector<std::string>& topics, const std::vector<std::string>& groups);
  void on_tick();

  boost::asio::io_context& io_;
  storage::store& store_;
  service_settings settings_;
  broker_metrics* metrics_;
  // Heavy admin reads of the groups and webhooks run here, off the io thread (admin_reads.h).
  admin_reads reads_;
  std::unique_ptr<consumer_groups> groups_;
  std::map<std::uint64_t, std::weak_ptr<responder>> connections_;
  boost::asio::steady_timer tick_;
  // Fires every 10 ms; how late it fires is the io loop's stall (txmq_io_loop_stall_seconds).
  boost::asio::steady_timer stall_probe_;
  void probe_stall();
  bool stopped_ = false;
  std::unique_ptr<tx_coordinator> tx_;
  std::unique_ptr<webhook_notifier> webhooks_;
  std::unique_ptr<auth::access_control> access_;
  auth::request_lookups lookups_;
  cluster_mode::cluster_node* cluster_ = nullptr;
  std::string advertise_;
  std::map<std::string, std::uint32_t> keyless_round_robin_;  // per topic, cluster mode
  std::shared_ptr<const void> synced_state_;  // the cluster state sync_local_topics() last saw
  // Cluster mode: where access_ keeps principals and grants (etcd), and the state they were
  // last taken from (service/cluster_access.cc).
  std::unique_ptr<auth::record_backend> records_;
  std::shared_ptr<const void> synced_access_;
  void sync_access();
  // Closes the open connections of `principal`, telling them why; answers how many.
  std::uint32_t close_connections_of(const std::string& principal, const std::string& why);
  std::set<std::string> creating_locally_;
  std::set<std::string> altering_locally_;  // local retention being set from etcd (sync_topic_retention)
  std::unique_ptr<cluster_mode::replication> replication_;
  // Kept connections to the other brokers for the requests forwarded on transactions' behalf
  // (copies, holds, acks, releases); made with replication_'s peer identity.
  std::unique_ptr<cluster_mode::peer_pool> peers_;
};

}  // namespace txmq::broker
