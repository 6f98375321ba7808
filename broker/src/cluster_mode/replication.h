#pragma once

// Replication of message partitions in cluster mode (DESIGN §8, docs/cluster.md
// "Replication"). Runs on the broker's io thread (no locks), beside the service.
//
// Leader side (replication_leader.cc): a follower's ReplicaFetch gets the leader's fsynced
// messages with their leader epochs and the high watermark (HW); its fetch offset doubles as
// its report of what it has fsynced. HW = min over the ISR (leader included) of the fsynced end
// offsets reported under the current epoch. A Produce to a replicated partition is answered
// only when the HW covers every message of it and |ISR| >= min_insync_replicas, else
// NOT_ENOUGH_REPLICAS after replication_timeout. A follower that has not caught up for
// replica_lag_max leaves the ISR, and one that caught up joins it again, both by an etcd
// transaction comparing the partition key's mod_revision (cluster::write_isr): the smaller ISR
// is used for acknowledgements only once etcd holds it (it is read back from etcd).
//
// Follower side (replication_follower.cc): one coroutine per partition this node follows; it
// asks the leader where its last epoch ended (KIP-101), truncates to it, then pulls, appends
// at the leader's offsets (storage::store::replica_append, fsynced through the store's group
// commit) and reports with its next fetch.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "net/responder.h"
#include "txmq/cluster/control_plane.h"
#include "txmq/protocol/frame_codec.h"
#include "txmq/storage/store.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::broker::cluster_mode {

class cluster_node;

struct replication_settings {
  std::chrono::milliseconds replication_timeout{10'000};
  std::chrono::milliseconds replica_lag_max{10'000};
  // How long a leader holds a ReplicaFetch that found nothing new (a long poll).
  std::chrono::milliseconds fetch_wait{200};
  std::uint32_t max_fetch_messages = 4000;
  // A deliberately broken build for the checker's own test (tests/cluster_replication_test):
  // acknowledge once the leader fsynced, without waiting for the followers. Honoured only
  // when the broker is built with tests (TXMQ_FAULT_HOOKS) and TXMQ_TEST_ACK_BEFORE_REPLICAS=1.
  bool ack_before_replicas = false;
};

class replication {
 public:
  using clock = std::chrono::steady_clock;
  using key = std::pair<std::string, std::int32_t>;

  replication(boost::asio::io_context& io, storage::store& store, cluster_node& node, replication_settings settings);
  ~replication();

  // min_insync_replicas of a topic with `replicas` copies (DESIGN §8: 2 from 3 replicas, else 1).
  [[nodiscard]] static std::size_t min_insync(std::int32_t replicas) { return replicas >= 3 ? 2 : 1; }

  // Whether a Produce to this partition may be appended here now: this node leads it under the
  // snapshot's epoch and has recorded that epoch in its log. Replicated topics only.
  [[nodiscard]] bool ready_to_lead(const std::string& topic, std::int32_t partition) const;
  // After the leader's own append (fsynced): `done` runs (on the io thread) once the HW covers
  // `need` (an offset + 1) on every partition listed, or with NOT_ENOUGH_REPLICAS at the timeout.
  void await_replicas(const std::string& topic, std::vector<std::pair<std::int32_t, std::uint64_t>> need,
                      std::function<void(result<void>)> done);

  void replica_fetch(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::ReplicaFetchRequest& req);

  // Consumer-group state (replication_groups.cc, docs/cluster.md "Consumer groups"): `done`
  // runs once every ISR member reports the partition's group change sequence at or past each
  // end_seq (and |ISR| >= min_insync_replicas), NOT_LEADER at once when a partition is not led
  // here, NOT_ENOUGH_REPLICAS at replication_timeout. Partitions of replicas-1 topics pass.
  void await_group(std::vector<storage::group_change_ref> changes, std::function<void(result<void>)> done);
  // Called on the io thread when this node starts leading a replicated partition (its epoch
  // recorded, its follower task ended: the store holds the group state it replicated) or
  // stops (it follows it now, or leads it no longer): the consumer groups reload or drop it.
  void on_group_leadership(std::function<void(const std::string& topic, std::int32_t partition, bool leading)> fn) {
    group_leadership_ = std::move(fn);
  }

  // Every service tick: follows the cluster's state (starts/stops followers, records epochs,
  // changes ISRs), answers timed-out waits and long polls.
  void tick();
  void stop();

 private:
  struct follower_progress {
    std::uint64_t durable = 0;  // its fsynced end offset, reported under the current epoch
    bool reported = false;
    clock::time_point caught_up_at{};
    // The leader's log end and the time at this follower's previous fetch: a fetch reaching
    // that end means the follower was caught up then (Kafka's lastCaughtUpTime), which a
    // follower under steady load never is with respect to the end at its own fetch.
    std::uint64_t prev_fetch_end = 0;
    clock::time_point prev_fetch_at{};
    // Its group change sequence's end (applied and fsynced), reported under the current epoch.
    std::uint64_t group_durable = 0;
    bool group_reported = false;
  };
  struct waiter {
    std::string topic;
    std::vector<std::pair<std::int32_t, std::uint64_t>> need;
    clock::time_point deadline;
    std::function<void(result<void>)> done;
    bool group = false;  // `need` holds group change seqs, compared with group_watermark
  };
  struct parked_fetch {
    std::weak_ptr<responder> c;
    std::uint64_t corr = 0;
    v1::ReplicaFetchRequest req;
    clock::time_point until;
  };
  struct leader_part {
    std::int64_t epoch = -1;
    bool epoch_recorded = false;
    bool recording = false;
    std::int64_t newer_epoch_seen = 0;  // a follower knows a newer epoch: this node is stale
    std::map<cluster::node_id, follower_progress> followers;
    std::vector<parked_fetch> parked;
    bool isr_write_pending = false;
    clock::time_point since{};
  };
  struct follower_task;

  // The partition's entry in the last state read from etcd, nullptr when unknown.
  [[nodiscard]] const cluster::partition_entry* entry_of(const key& k) const;
  [[nodiscard]] std::int32_t replicas_of(const std::string& topic) const;
  [[nodiscard]] std::uint64_t local_end(const std::string& topic, std::int32_t partition) const;
  // The HW of a partition led here: min of the ISR's fsynced ends (the leader's own included);
  // nullopt when acknowledgements must wait (ISR below min_insync, a newer epoch seen).
  [[nodiscard]] std::optional<std::uint64_t> high_watermark(const key& k) const;
  // The group change seq every ISR member holds (the leader's own durable end included), under
  // the same conditions as high_watermark; nullopt when acknowledgements must wait.
  [[nodiscard]] std::optional<std::uint64_t> group_watermark(const key& k) const;
  [[nodiscard]] std::uint64_t local_group_end(const std::string& topic, std::int32_t partition) const;
  // The group part of a ReplicaFetch answer (changes from req.group_seq, or the snapshot).
  void add_group_part(const v1::ReplicaFetchRequest& req, v1::ReplicaFetchResponse& resp);
  // Follower: takes the leader's snapshot of the partition's group state; false on failure.
  boost::asio::awaitable<bool> take_group_snapshot(const key& k, std::shared_ptr<boost::asio::ip::tcp::socket> sock,
                                                   protocol::frame_reader& reader, std::uint64_t& corr,
                                                   std::int64_t epoch);
  // Follower: applies the group changes of a fetch answer; false when a snapshot is needed.
  boost::asio::awaitable<bool> apply_group_part(const key& k, const v1::ReplicaFetchResponse& ans);
  void group_leadership(const key& k, bool leading) {
    if (group_leadership_) group_leadership_(k.first, k.second, leading);
  }
  void settle_waiters();
  void answer_fetch(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::ReplicaFetchRequest& req);
  void wake_parked(const key& k, bool all);
  void lead_tick(const cluster::cluster_state& state);
  void follow_tick(const cluster::cluster_state& state);
  void change_isr(const key& k, std::vector<cluster::node_id> isr, const char* why);
  boost::asio::awaitable<void> run_follower(key k, std::shared_ptr<follower_task> t);

  boost::asio::io_context& io_;
  storage::store& store_;
  cluster_node& node_;
  replication_settings settings_;
  std::shared_ptr<const cluster::cluster_state> state_;  // refreshed every tick
  std::map<key, leader_part> leading_;
  std::deque<waiter> waiters_;
  std::map<key, std::shared_ptr<follower_task>> following_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::function<void(const std::string&, std::int32_t, bool)> group_leadership_;
};

}  // namespace txmq::broker::cluster_mode
