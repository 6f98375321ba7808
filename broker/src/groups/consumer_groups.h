#pragma once

// The consumer groups clients read through (the webhook subscriptions' groups are the
// notifier's): one group_tracker per group and the group's parked long polls, the handlers of
// Fetch, Ack, Nack and Extend (consumer_groups.cc) and of CreateGroup, DescribeGroup,
// ListGroups (group_admin.cc), DlqList and DlqRedrive (dead_letter_admin.cc).
//
// Group state is written through storage::store::update_group without waiting for the fsync (a
// lost write only causes a redelivery). Runs on the broker's io thread, like the service that
// owns it; not thread-safe. Storage completions are posted back to the io thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "admin_reads.h"
#include "groups/group_tracker.h"
#include "net/responder.h"
#include "txmq/storage/store.h"

namespace txmq::broker {

struct broker_metrics;

struct consumer_group_settings {
  delivery_settings delivery;
  std::uint32_t max_frame_bytes = 8u << 20;
  std::size_t max_groups = 10'000;
  std::uint32_t default_fetch_messages = 100;
  std::uint32_t max_fetch_messages = 10'000;
};

class consumer_groups {
 public:
  // Heavy admin reads (describe, dead-letter listing and redrive) run on `reads`.
  consumer_groups(boost::asio::io_context& io, storage::store& store, admin_reads& reads,
                  consumer_group_settings settings, broker_metrics* metrics);
  // Unregisters the group gauges (they read this object).
  ~consumer_groups();
  consumer_groups(const consumer_groups&) = delete;
  consumer_groups& operator=(const consumer_groups&) = delete;

  // Loads every stored group but the webhook subscriptions'. Called before the io thread runs.
  // Errors: the store's, or a group whose stored state does not load.
  [[nodiscard]] result<void> load();
  // Answers the parked long polls SHUTTING_DOWN.
  void stop();
  // Drops the long polls of a client that is gone.
  void connection_closed(const responder& c);
  // Deadlines that passed become retries or dead letters; long polls get what became
  // deliverable, or an empty answer once their wait is over. Called every tick.
  void tick();
  // Serves the long polls of the groups that read `topics` or are named in `groups`.
  void wake(const std::vector<std::string>& topics, const std::vector<std::string>& groups);
  // Serves the long polls of the groups that read `topic` (new messages were stored).
  void wake_topic(const std::string& topic);
  // Bounds what every group delivers and reports as lag (group_tracker.h visible_end_fn).
  // Before load(); unset in single-node mode.
  void set_visible_end(visible_end_fn fn) { visible_end_ = std::move(fn); }
  // Cluster mode (docs/cluster.md "Consumer groups"): Ack, Nack and Extend are answered only
  // once the gate passes for the change sequences their update moved (replication::await_group:
  // the ISR holds them), or with its error. Unset (single-node mode): answered at once, as ever.
  using replication_gate =
      std::function<void(std::vector<storage::group_change_ref>, std::function<void(result<void>)>)>;
  void set_replication_gate(replication_gate gate) { gate_ = std::move(gate); }
  // Cluster mode (docs/cluster.md "Dead letters and admin reads"): the partitions whose group
  // state this node serves now (it leads them, ready under its epoch), with that epoch. DlqList
  // and DlqRedrive act only on these and name them in their answers. Unset (single-node mode):
  // every partition.
  using owned_partitions = std::map<std::pair<std::string, std::uint32_t>, std::int64_t>;
  void set_ownership(std::function<owned_partitions()> fn) { ownership_ = std::move(fn); }
  // This node starts (reload the partition's state of every group from the store, which
  // replication filled) or stops (forget it) leading a replicated partition.
  void partition_leadership(const std::string& topic, std::int32_t partition, bool leading);

  // The tracker of a loaded group, or nullptr.
  [[nodiscard]] group_tracker* find(const std::string& name);

  // Request handlers; each answers `c` exactly once (a fetch that waits: when messages come,
  // its wait is over, or the broker stops).
  void fetch(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::FetchRequest& req);
  enum class settle_kind { ack, nack, extend };
  // Ack, Nack (ms: the retry delay, 0 = the retry schedule) or Extend (ms: by how much). `tx`:
  // settled on behalf of that transaction by its home leader (group_tracker::extend's hold).
  void settle(const std::shared_ptr<responder>& c, std::uint64_t corr, settle_kind kind, const std::string& group,
              const google::protobuf::RepeatedPtrField<v1::DeliveryRef>& refs, std::uint32_t ms,
              std::string_view tx = {});
  void create_group(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::CreateGroupRequest& req);
  void describe_group(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& group);
  void list_groups(const std::shared_ptr<responder>& c, std::uint64_t corr);
  void dlq_list(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::DlqListRequest& req);
  void dlq_redrive(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& group);

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
  // txmq_group_lag and txmq_group_in_flight, every group's in one pass per scrape.
  void register_group_metrics();
  // What a describe needs of the io thread's state, copied so the worker can build the answer.
  struct group_snapshot {
    std::string name;
    std::vector<std::string> topics;
    std::vector<partition_summary> summary;
    std::optional<owned_partitions> owned;  // cluster mode: the partitions led here
  };
  [[nodiscard]] group_snapshot snapshot(const std::string& name, const group_entry& g) const;
  // Builds a GroupInfo from the snapshot and the store; runs on the admin worker.
  [[nodiscard]] static result<v1::GroupInfo> describe(const storage::store& store, const admin_reads& reads,
                                                      const group_snapshot& g);
  // Describes on the worker and answers c with the GroupInfo.
  void answer_describe(const std::shared_ptr<responder>& c, std::uint64_t corr, group_snapshot g);
  void redrive_page(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& group,
                    std::optional<storage::message_ref> after, std::uint64_t done_so_far);
  // The answer to a client that names the group of a webhook subscription.
  [[nodiscard]] static std::string reserved_group(const std::string& name);

  boost::asio::io_context& io_;
  storage::store& store_;
  admin_reads& reads_;
  consumer_group_settings settings_;
  broker_metrics* metrics_;
  std::map<std::string, group_entry> groups_;
  visible_end_fn visible_end_;  // every tracker holds its address
  replication_gate gate_;
  std::function<owned_partitions()> ownership_;
  std::string fetch_scratch_;  // Fetch answers are encoded here (try_fetch)
};

}  // namespace txmq::broker
