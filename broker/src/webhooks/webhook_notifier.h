#pragma once

// Best-effort notification (docs/protocol.md §11): webhook subscriptions, each served as the
// consumer group "webhook:<id>" by the broker's own HTTP notifier.
//
// - The subscription record (topic, filter, URL, secrets, schedule, timeout, limits, token) is
//   durable in the store; the delivery state is an ordinary group_tracker with the
//   subscription's schedule as its retry schedule and 1 + its length as max attempts, so
//   deadlines, retries, per-key order, exhaustion (the group's dead letters) and restart
//   recovery are the consumer groups' own.
// - Per subscription: at most `concurrency` requests in flight and `rate_per_second` started,
//   each on its own coroutine with its own keep-alive pool, so a slow endpoint only holds up
//   its own subscription.
// - 2xx → ack; 410 → the subscription is disabled; 429/503 → retried after Retry-After (or the
//   schedule); anything else, a timeout or a connection error → retried on the schedule; after
//   the last attempt the message is exhausted. Every attempt is logged in the store and kept
//   for webhook_attempt_retention.
// - Admin requests (Frame fields 70-80, webhook_admin.cc) and the reconciliation API on the
//   admin HTTP port (webhook_reconcile.cc). Delivery is in webhook_notifier.cc.
//
// Runs on the broker's io thread, like the service that owns it; not thread-safe. Storage
// completions are posted back to the io thread.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>

#include "groups/group_tracker.h"
#include "net/responder.h"
#include "webhooks/egress_guard.h"
#include "admin_reads.h"
#include "txmq/storage/store.h"

#include "txmq/common/admin_http.h"

namespace txmq::broker {

struct broker_metrics;

inline constexpr std::string_view k_webhook_group_prefix = "webhook:";

struct webhook_settings {
  std::vector<std::chrono::milliseconds> schedule{
      std::chrono::seconds(15), std::chrono::seconds(15), std::chrono::seconds(30), std::chrono::minutes(3),
      std::chrono::minutes(10), std::chrono::minutes(20), std::chrono::minutes(30), std::chrono::minutes(30),
      std::chrono::minutes(30), std::chrono::hours(1),    std::chrono::hours(3),    std::chrono::hours(3),
      std::chrono::hours(3),    std::chrono::hours(6),    std::chrono::hours(6)};
  std::chrono::milliseconds timeout{5000};
  std::uint32_t concurrency = 16;     // per subscription, unless its own says otherwise
  std::uint32_t rate_per_second = 0;  // per subscription; 0 = unlimited
  std::chrono::milliseconds attempt_retention = std::chrono::hours(24 * 7);
  std::chrono::milliseconds secret_grace = std::chrono::hours(24);
  std::string ca_file;  // extra trusted certificates (PEM) besides the system's
  std::size_t max_webhooks = 1000;
  // The egress guard: webhook_allow_private and webhook_allow_hosts (parsed).
  egress_guard guard;
  std::chrono::milliseconds tick{20};
  std::uint32_t max_frame_bytes = 8u << 20;
};

// Whether a consumer-group name belongs to a webhook subscription (clients may not use it).
[[nodiscard]] inline bool is_webhook_group(std::string_view name) {
  return name.starts_with(k_webhook_group_prefix);
}

class webhook_notifier {
 public:
  // Heavy admin reads (listing, attempt log, replay, reconciliation) run on `reads`.
  webhook_notifier(boost::asio::io_context& io, storage::store& store, admin_reads& reads, webhook_settings settings,
                   broker_metrics* metrics);
  ~webhook_notifier();

  // Loads the subscriptions and their groups (creating a group that is missing) and starts
  // the timer. Called before the io thread runs. Errors: the store's, or a bad CA file.
  [[nodiscard]] result<void> start();
  void stop();
  // Messages were committed to `topic`: start attempts for them.
  void wake(const std::string& topic);
  // Cluster mode (docs/cluster.md "Webhooks", webhook_cluster.cc): subscription records live
  // in etcd, written through `put` / `remove` (answering, on the io thread, the etcd revision
  // after the write, or an error; `changed` false when the id existed / did not), and every
  // node takes them from each cluster state it reads (sync_cluster). Delivery then runs only
  // on each partition's leader, below its visible end, and moves with leadership.
  using revision_done = std::function<void(result<std::pair<bool, std::int64_t>>)>;
  struct cluster_hooks {
    std::function<void(std::string id, std::string record, bool create, revision_done done)> put;
    std::function<void(std::string id, revision_done done)> remove;
    // A 410's disable: written to etcd compared on the key's revision and retried until etcd
    // holds it (cluster_node::disable_webhook); `done` on the io thread.
    std::function<void(std::string id, std::string reason, std::int64_t disabled_ms, revision_done done)> disable;
    // An operator's change (rotate-secret), applied by `change` (any thread) to the record etcd
    // holds and written compared on its revision (cluster_node::update_webhook), so that it never
    // overwrites a disable this node has not read yet; `done` on the io thread.
    std::function<void(std::string id, std::function<std::optional<std::string>(std::string_view)> change,
                       revision_done done)>
        update;
  };
  void set_cluster(cluster_hooks hooks) { cluster_ = std::move(hooks); }
  void set_visible_end(visible_end_fn fn) { visible_end_ = std::move(fn); }
  // The subscriptions of a cluster state read at `revision` (id → serialized v1::Webhook): new
  // ones start here, changed ones (a rotated secret, disabled) are taken, gone ones stop. A
  // state older than this node's own last write is skipped.
  void sync_cluster(const std::vector<std::pair<std::string, std::string>>& records, std::int64_t revision);
  // This node starts or stops leading a replicated partition: the delivery groups of its
  // topic's subscriptions take its state from the store (replicated) or forget it.
  void partition_leadership(const std::string& topic, std::int32_t partition, bool leading);

  // A webhook admin request (Frame fields 70-89); answers exactly once.
  void handle(const std::shared_ptr<responder>& c, v1::Frame& frame);
  // GET /v1/topics/{topic}/messages and GET /v1/messages/{id}, bearer token per subscription.
  // Registers them on `http`. The HTTP/JSON API's router serves the first path too (it
  // shares the prefix /v1/topics/ with the API's topic routes), through reconcile_list().
  void register_routes(common::admin_http_server& http);
  // GET /v1/topics/{topic}/messages and GET /v1/messages/{id}. The store is read on the admin
  // worker; the coroutine runs on the io thread.
  [[nodiscard]] boost::asio::awaitable<common::http_response> reconcile_list(const common::http_request& req);
  [[nodiscard]] boost::asio::awaitable<common::http_response> reconcile_one(const common::http_request& req);

 private:
  struct subscription;
  void create(const std::shared_ptr<responder>& c, std::uint64_t corr, v1::WebhookCreateRequest& req);
  void list(const std::shared_ptr<responder>& c, std::uint64_t corr);
  // `c` may be null (a delete read from the cluster's state); `from_cluster`: etcd has it done.
  void remove(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& id,
              bool from_cluster = false);
  void attempts(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::WebhookAttemptsRequest& req);
  void replay(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::WebhookReplayRequest& req);
  void rotate(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::WebhookRotateSecretRequest& req);

  result<std::shared_ptr<subscription>> make_subscription(v1::Webhook rec, const storage::group_state& state);
  void pump(const std::shared_ptr<subscription>& s);
  // Pumps once the io thread is done with what is queued: completions arriving together share
  // one fetch from the group instead of one each.
  void pump_soon(const std::shared_ptr<subscription>& s);
  boost::asio::awaitable<void> attempt(std::shared_ptr<subscription> s, v1::Message msg, bool replay);
  void finish_attempt(subscription& s, const v1::Message& msg, bool replay, v1::WebhookAttempt log,
                      std::uint32_t retry_after_ms);
  void disable(subscription& s, std::string why);
  // Group writes and attempt log lines are merged per io-loop turn and written together: at
  // thousands of attempts per second, one store request per ack would dominate.
  void persist(storage::group_update update);
  void log_attempt(v1::WebhookAttempt line);
  void schedule_flush();
  void flush();
  void on_tick();
  void expire_attempts(std::int64_t before_ms);
  [[nodiscard]] v1::Webhook public_view(const subscription& s) const;
  [[nodiscard]] std::uint64_t backlog(const subscription& s) const;
  // The subscription whose token the request carries, or an HTTP error.
  struct http_auth;
  [[nodiscard]] http_auth authorise(const common::http_request& req) const;
  struct reconcile_view;

  // Cluster mode: starts a subscription this node has no record of (webhook_cluster.cc).
  void adopt(v1::Webhook rec);
  // Cluster mode: writes the record's new state (rotated secret, disabled) to etcd; logged on failure.
  void publish(const v1::Webhook& rec);

  boost::asio::io_context& io_;
  storage::store& store_;
  admin_reads& reads_;
  std::optional<cluster_hooks> cluster_;
  visible_end_fn visible_end_;  // unset: the log end (single-node mode)
  std::int64_t own_revision_ = 0;
  std::set<std::string> adopting_;
  // Subscriptions this node disabled (a 410) whose disable etcd does not hold yet: a cluster
  // state still showing them enabled does not re-enable them here.
  std::set<std::string> disabling_;
  webhook_settings settings_;
  broker_metrics* metrics_;
  boost::asio::ssl::context tls_;
  boost::asio::steady_timer tick_;
  std::map<std::string, std::shared_ptr<subscription>> subs_;
  std::int64_t next_expiry_ms_ = 0;
  std::map<std::string, storage::group_update> pending_updates_;
  std::vector<v1::WebhookAttempt> pending_attempts_;
  bool flush_posted_ = false;
  bool stopped_ = false;
};

}  // namespace txmq::broker
