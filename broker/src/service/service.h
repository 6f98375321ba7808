#pragma once

// The request handlers of the broker and the consumer groups they serve. Everything here runs on
// the broker's io thread (one thread: no locks); storage work runs on the store's own threads
// and its completions are posted back here.

#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include <boost/asio.hpp>

#include "net/responder.h"
#include "groups/group_tracker.h"
#include "tx/tx_coordinator.h"
#include "webhooks/webhook_notifier.h"
#include "txmq/storage/store.h"

namespace txmq::broker {

class broker_metrics;

struct service_settings {
  delivery_settings delivery;
  std::uint32_t max_message_bytes = 4u << 20;
  std::uint32_t max_frame_bytes = 8u << 20;
  bool auto_create_topics = true;
  std::uint32_t default_partitions = 4;
  std::int64_t default_retention_ms = 7LL * 24 * 3600 * 1000;
  bool sync = true;  // durability = sync
  std::size_t max_topics = 10'000;
  std::size_t max_groups = 10'000;
  std::uint32_t default_fetch_messages = 100;
  std::uint32_t max_fetch_messages = 10'000;
  std::chrono::milliseconds tick{20};
  std::string broker_id = "txmq-1";
  // Transactions and check-back; the limits above are copied into it.
  tx_settings tx;
  // Webhook subscriptions (DESIGN §5); max_frame_bytes is copied into it.
  webhook_settings webhooks;
};

class service {
 public:
  service(boost::asio::io_context& io, storage::store& store, service_settings settings, broker_metrics* metrics);

  // Loads every stored group and starts the timer that expires deadlines and long polls.
  [[nodiscard]] result<void> start();
  // Stops the timer and answers parked long polls with what they have (nothing).
  void stop();
  // Closes every connection once its queued answers are written.
  void close_all();

  void connection_opened(const std::shared_ptr<responder>& c);
  void connection_closed(responder& c);
  // One request frame after Hello. The connection gets exactly one answer for it.
  void handle(const std::shared_ptr<responder>& c, v1::Frame&& frame);
  // An answer to a request of the broker's own (CheckTx): CheckTxResult or Error. Gets no answer.
  void handle_answer(const std::shared_ptr<responder>& c, v1::Frame&& frame);

  [[nodiscard]] const std::string& broker_id() const noexcept { return settings_.broker_id; }
  [[nodiscard]] std::uint32_t max_message_bytes() const noexcept { return settings_.max_message_bytes; }
  [[nodiscard]] std::size_t connections() const noexcept { return connections_.size(); }
  // Gauges for /metrics, computed on the io thread.
  struct group_gauges {
    std::string group;
    std::uint64_t lag = 0;
    std::uint64_t in_flight = 0;
  };
  [[nodiscard]] std::vector<group_gauges> gauges() const;
  [[nodiscard]] webhook_notifier& webhooks() noexcept { return *webhooks_; }

 private:
  struct waiter {
    std::weak_ptr<responder> conn;
    std::uint64_t correlation_id = 0;
    std::vector<std::string> topics;
    std::size_t max = 0;
    std::chrono::milliseconds ack_deadline{0};
    std::chrono::steady_clock::time_point deadline;
  };
  struct group_entry {
    std::unique_ptr<group_tracker> tracker;
    std::list<waiter> waiters;
  };

  void produce(const std::shared_ptr<responder>& c, std::uint64_t corr, v1::ProduceRequest& req);
  void fetch(const std::shared_ptr<responder>& c, std::uint64_t corr, v1::FetchRequest& req);
  void settle(const std::shared_ptr<responder>& c, std::uint64_t corr, int kind, const std::string& group,
              const google::protobuf::RepeatedPtrField<v1::DeliveryRef>& refs, std::uint32_t ms);
  void create_topic(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::CreateTopicRequest& req);
  void create_group(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::CreateGroupRequest& req);
  void describe_group(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& group);
  void list_groups(const std::shared_ptr<responder>& c, std::uint64_t corr);
  void dlq_list(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::DlqListRequest& req);
  void dlq_redrive(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& group);

  // Runs fn with the group's tracker once the group exists and subscribes to all topics
  // (creating or extending it in the store first). fn gets an error instead when that fails.
  void with_group(const std::string& name, const std::vector<std::string>& topics, storage::group_start start,
                  std::function<void(result<group_entry*>)> fn);
  // Hands deliverable messages to parked long polls of the group, oldest first.
  void serve_waiters(group_entry& g);
  // Answers a fetch from the tracker; false when it found nothing.
  bool try_fetch(group_entry& g, responder& c, std::uint64_t corr, const std::vector<std::string>& topics,
                 std::size_t max, std::chrono::milliseconds ack_deadline, bool answer_empty);
  void persist(storage::group_update update, bool sync = false);
  // Serves the long polls of the groups that read `topics` or are named in `groups`.
  void wake(const std::vector<std::string>& topics, const std::vector<std::string>& groups);
  void register_group_metrics(const std::string& name);
  void on_tick();
  v1::GroupInfo describe(const std::string& name, group_entry& g);

  boost::asio::io_context& io_;
  storage::store& store_;
  service_settings settings_;
  broker_metrics* metrics_;
  std::map<std::string, group_entry> groups_;
  std::map<std::uint64_t, std::weak_ptr<responder>> connections_;
  boost::asio::steady_timer tick_;
  bool stopped_ = false;
  std::unique_ptr<tx_coordinator> tx_;
  std::unique_ptr<webhook_notifier> webhooks_;
};

}  // namespace txmq::broker
