#pragma once

// Replication of message partitions in cluster mode (DESIGN §8, docs/cluster.md
// "Replication"). Runs on the broker's io thread (no locks), beside the service.
//
// Leader side (replication_leader.cc): a follower's ReplicaFetch gets the leader's written
// messages (before the leader's own fsync: their fsyncs overlap; a parked fetch is woken by
// on_written) with their leader epochs and the high watermark (HW); its durable offset is its
// report of what it has fsynced. A node never leads under an epoch its log holds from before
// a restart: it writes the next epoch first (lead_tick, docs/cluster.md "Followers ahead of
// the leader's fsync"). HW = min over the ISR (leader included) of the fsynced end
// offsets reported under the current epoch. A Produce to a replicated partition is answered
// only when the HW covers every message of it and |ISR| >= min_insync_replicas, else
// NOT_ENOUGH_REPLICAS after replication_timeout. A follower that has not caught up for
// replica_lag_max leaves the ISR, and one that caught up joins it again, both by an etcd
// transaction comparing the partition key's mod_revision (cluster::write_isr): the smaller ISR
// is used for acknowledgements only once etcd holds it (it is read back from etcd).
//
// Follower side (replication_follower.cc): one coroutine per leader node this node follows
// partitions from (a fetch session, Kafka's): per partition it asks the leader where its last
// epoch ended (KIP-101) and truncates to it, then pulls all of them with one ReplicaFetch
// (partition_fetches; the leader holds it until any has something new), appends
// at the leader's offsets (storage::store::replica_append, fsynced through the store's group
// commit) and reports its fsynced end with its next fetch. With replica_fetch_pipeline > 1 the
// follower fetches the next messages while its previous appends are still being fsynced, and a
// leader answers at once (never holds) a fetch whose durable_offset is below its fetch_offset,
// so the follower learns "nothing new", waits for its fsyncs and reports them in the next
// (held) fetch. fetch_session.h: how a session's answer shares max_frame_bytes.

#include <array>
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

#include "admin_reads.h"
#include "cluster_mode/peer_connection.h"
#include "net/responder.h"
#include "txmq/cluster/control_plane.h"
#include "txmq/protocol/frame_codec.h"
#include "txmq/storage/store.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::broker::cluster_mode {

class cluster_node;
struct raw_batch;  // fetch_session.h

struct replication_settings {
  std::chrono::milliseconds replication_timeout{10'000};
  std::chrono::milliseconds replica_lag_max{10'000};
  // How long a leader holds a ReplicaFetch that found nothing new (a long poll).
  std::chrono::milliseconds fetch_wait{200};
  std::uint32_t max_fetch_messages = 4000;
  // Appends a follower keeps in flight per partition (replica_fetch_pipeline): 1 = fetch, append,
  // wait for the fsync, fetch again (reporting it); more = fetch the next messages while the
  // previous are fsynced (each in-flight append is one fetch's messages: bounds the memory).
  std::uint32_t fetch_pipeline = 1;
  // The largest ReplicaFetch answer a leader builds (its max_frame_bytes less room for the
  // frame's other fields): message batches and group snapshot pages stay below it.
  std::size_t max_answer_bytes = 4u << 20;
  // The retention of a followed topic whose etcd record sets none (the broker's own defaults).
  std::int64_t default_retention_ms = 7LL * 24 * 3600 * 1000;
  std::uint64_t default_retention_bytes = 0;
  // A deliberately broken build for the checker's own test (tests/cluster_replication_test):
  // acknowledge once the leader fsynced, without waiting for the followers. Honoured only
  // when the broker is built with tests (TXMQ_FAULT_HOOKS) and TXMQ_TEST_ACK_BEFORE_REPLICAS=1.
  bool ack_before_replicas = false;
  // How a follower reaches its leader: TLS when this broker serves it, the cluster token
  // when auth is on (peer_connection.h). Empty: plaintext, no token.
  peer_identity peer;
};

// For tests only (TXMQ_FAULT_HOOKS builds, TXMQ_TEST_LOSE_TAIL=N at startup): truncates the last
// n messages of every partition in the store, as a crash of the machine would take messages
// written but not yet fsynced (a SIGKILL does not: the kernel keeps them). Blocks until done.
void lose_tail_for_test(storage::store& store, std::uint64_t n);

class replication {
 public:
  using clock = std::chrono::steady_clock;
  using key = std::pair<std::string, std::int32_t>;

  replication(boost::asio::io_context& io, storage::store& store, cluster_node& node, replication_settings settings);
  ~replication();

  // How this broker reaches its peers (TLS, cluster token): also used by requests other than
  // replication, e.g. a transaction's copies to other leaders.
  [[nodiscard]] const peer_identity& peer() const noexcept { return settings_.peer; }

  // Whether a Produce to this partition may be appended here now: this node leads it under the
  // snapshot's epoch and has recorded that epoch in its log. Replicated topics only.
  [[nodiscard]] bool ready_to_lead(const std::string& topic, std::int32_t partition) const;
  // After the leader's own append (fsynced): `done` runs (on the io thread) once the HW covers
  // `need` (an offset + 1) on every partition listed, or with NOT_ENOUGH_REPLICAS at the timeout.
  void await_replicas(const std::string& topic, std::vector<std::pair<std::int32_t, std::uint64_t>> need,
                      std::function<void(result<void>)> done);

  void replica_fetch(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::ReplicaFetchRequest& req);
  // On the io thread once a Produce's messages are written to the store (before their fsync,
  // storage::append_request::on_written): answers the followers' fetches parked on these
  // partitions (all of the topic's led here when empty) with them.
  void on_written(const std::string& topic, const std::vector<std::int32_t>& partitions);

  // How far consumers may read the partition from this node (groups/group_tracker.h
  // visible_end_fn), from the state last read from etcd: 0 unless this node leads it; the log
  // end for a topic with one replica; for a replicated topic the highest high watermark reached
  // under the current epoch while acknowledgements were possible (never above what every ISR
  // member fsynced: what a failover keeps). 0 until the followers report under a new epoch.
  [[nodiscard]] std::uint64_t visible_end(const std::string& topic, std::uint32_t partition,
                                          std::uint64_t log_end) const;
  // Runs (on the io thread) with the topic when a led partition's visible end moves up, so that
  // parked consumer fetches take the new messages. Set once, before the io thread serves.
  void set_on_visible(std::function<void(const std::string& topic)> fn) { on_visible_ = std::move(fn); }

  // SIGTERM drain (docs/cluster.md "Draining a broker"): stops taking writes on the replicated
  // partitions led here (Produce answered NOT_LEADER), waits until their in-sync followers have
  // fsynced the whole log, then hands each one over: one etcd transaction per partition,
  // compared on the partition key's mod_revision, naming the most caught-up live ISR member
  // leader with epoch + 1 and the ISR without this node. Partitions with no other live ISR
  // member are left as they are (they lose their leader when the node leaves). `done` runs
  // once, on the io thread, when every write is answered or `wait` is over; produce waits still
  // open then are answered NOT_LEADER (retriable: the producer resends the same ids to the new
  // leader, whose dedupe answers the ones it already holds). Starts no follower afterwards.
  void drain(std::chrono::milliseconds wait, std::function<void()> done);
  [[nodiscard]] bool draining() const noexcept { return drain_ != nullptr; }
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
  // A fetch session's request held by the leader (every partition in it had nothing new): it is
  // parked on each of its partitions and answered whole, once, when any of them wakes it.
  struct session_fetch {
    std::weak_ptr<responder> c;
    std::uint64_t corr = 0;
    v1::ReplicaFetchRequest req;
    clock::time_point until;
    bool answered = false;
  };
  struct parked_fetch {
    std::weak_ptr<responder> c;
    std::uint64_t corr = 0;
    v1::ReplicaFetchRequest req;
    clock::time_point until;
    std::shared_ptr<session_fetch> session;  // set: a session's request (req and c unused)
  };
  struct leader_part {
    std::int64_t epoch = -1;
    bool epoch_recorded = false;
    bool recording = false;
    std::int64_t newer_epoch_seen = 0;  // a follower knows a newer epoch: this node is stale
    std::map<cluster::node_id, follower_progress> followers;
    std::vector<parked_fetch> parked;
    bool isr_write_pending = false;
    // After a failed ISR or epoch write (etcd away): no new attempt before isr_retry_after, the
    // delay doubling from 100 ms to 2 s. Retried on every 20 ms tick, one etcd outage logged a
    // "removing it from the ISR" and a "not written" line 50 times a second per partition.
    clock::time_point isr_retry_after{};
    std::chrono::milliseconds isr_retry_delay{0};
    clock::time_point since{};
    std::uint64_t visible = 0;  // visible_end(), monotonic within the epoch
    // The partition's leader epochs, read from the store once per leadership: while this node
    // leads under a recorded epoch nothing else changes them (only a follower truncates or
    // appends a newer epoch), and reading them for every ReplicaFetch cost 1.5 % of a
    // replicated publish's CPU (docs/BENCHMARKS.md "Cluster").
    std::optional<std::vector<storage::epoch_entry>> epochs;
    // The last answers that carried messages, and the fetches they answered: the followers of
    // a partition fetch the same offsets, one after the other, and a later one is answered with
    // the frame made for an earlier one (its correlation id, log end and high watermark
    // updated) instead of reading and encoding the messages again (the store read was ~10 % of
    // a replicated publish's CPU, docs/BENCHMARKS.md "Cluster"). Valid for the leadership: the
    // log below its end does not change while this node leads.
    struct cached_answer {
      std::unique_ptr<v1::Frame> frame;
      std::uint64_t from = 0;
      std::uint32_t max_messages = 0;
    };
    std::array<cached_answer, 4> answers;
    // The same for fetch sessions: the encoded batches part of a partition's answer (a
    // ReplicaFetchResponse holding only batches), to which the fresh fields are appended
    // (protobuf merges concatenated encodings): a copy of bytes, no second read or encoding.
    struct cached_batches {
      std::string encoded;
      std::uint64_t from = 0;
      std::uint32_t max_messages = 0;
      std::uint64_t log_start = 0;
    };
    std::array<cached_batches, 4> encoded;
    std::size_t next_encoded = 0;
    // The group snapshot each follower is paging through (taken at its first page; later pages
    // are cut from the same one, so the pages are one consistent state).
    struct snapshot_pages {
      std::uint64_t id = 0;
      std::shared_ptr<const v1::GroupSnapshot> snapshot;
      // Read off the io thread for a first page (start_group_snapshot), taken by the answer
      // that the read's completion makes.
      std::shared_ptr<const v1::GroupSnapshot> taken;
    };
    std::map<cluster::node_id, snapshot_pages> snapshots;
    std::size_t next_answer = 0;  // the slot replaced next (the oldest)
  };
  struct follower_task;
  struct fetch_session;
  struct drain_state {
    clock::time_point deadline;
    std::function<void()> done;
    std::set<key> handled;  // written, refused, or left as they are
    std::size_t writes_pending = 0;
  };

  // The partition's entry in the last state read from etcd, nullptr when unknown.
  [[nodiscard]] const cluster::partition_entry* entry_of(const key& k) const;
  [[nodiscard]] std::int32_t replicas_of(const std::string& topic) const;
  [[nodiscard]] std::size_t min_insync_of(const std::string& topic) const;
  [[nodiscard]] std::uint64_t local_end(const std::string& topic, std::int32_t partition) const;
  // What this node's store has written of the partition, fsynced or not (>= local_end).
  [[nodiscard]] std::uint64_t written_end(const std::string& topic, std::int32_t partition) const;
  // The HW of a partition led here: min of the ISR's fsynced ends (the leader's own included);
  // nullopt when acknowledgements must wait (ISR below min_insync, a newer epoch seen).
  [[nodiscard]] std::optional<std::uint64_t> high_watermark(const key& k) const;
  // The group change seq every ISR member holds (the leader's own durable end included), under
  // the same conditions as high_watermark; nullopt when acknowledgements must wait.
  [[nodiscard]] std::optional<std::uint64_t> group_watermark(const key& k) const;
  [[nodiscard]] std::uint64_t local_group_end(const std::string& topic, std::int32_t partition) const;
  // The group part of a ReplicaFetch answer (changes from req.group_seq, or the snapshot).
  void add_group_part(const v1::ReplicaFetchRequest& req, v1::ReplicaFetchResponse& resp, std::size_t budget);
  // The page of the follower's group snapshot that req asks for (add_group_part's snapshot part).
  void add_snapshot_page(const v1::ReplicaFetchRequest& req, v1::ReplicaFetchResponse& resp);
  // Follower: takes the leader's snapshot of the partition's group state, page by page, and
  // installs it once whole (never half of it); false on failure.
  boost::asio::awaitable<bool> take_group_snapshot(const key& k, std::shared_ptr<peer_link> link, std::int64_t epoch);
  // Follower: applies the group changes of a fetch answer; false when a snapshot is needed.
  boost::asio::awaitable<bool> apply_group_part(const key& k, const v1::ReplicaFetchResponse& ans);
  void group_leadership(const key& k, bool leading) {
    if (group_leadership_) group_leadership_(k.first, k.second, leading);
  }
  void settle_waiters();
  // Moves the partition's visible end up to its high watermark (if acknowledgements are
  // possible now) and calls on_visible_ when it moved.
  void advance_visible(const key& k);
  void answer_fetch(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::ReplicaFetchRequest& req);
  // A partition's fetch is served here (nullopt), or the refusal (NOT_LEADER, FENCED); notes a
  // newer epoch a follower knows (acknowledgements stop).
  [[nodiscard]] std::optional<std::pair<v1::ErrorCode, std::string>> check_fetch(const v1::ReplicaFetchRequest& req);
  // Takes the follower's report of a plain fetch (its fsynced end and group seq: ISR joins, HW,
  // waiters); true when the fetch finds nothing new, so that it may be held (a long poll).
  bool take_report(const key& k, const v1::ReplicaFetchRequest& req);
  // Fetch sessions (partition_fetches): the whole request, and one partition's encoded answer
  // with at most `budget` bytes of messages and group changes (skip: none, fetched again).
  void session_fetch_request(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::ReplicaFetchRequest& req);
  void answer_session(const std::shared_ptr<session_fetch>& s);
  void answer_session_later(std::shared_ptr<session_fetch> s);  // posted: after the caller's changes
  [[nodiscard]] std::string session_partition_answer(const v1::ReplicaFetchRequest& req, std::size_t budget, bool skip);
  void wake_parked(const key& k, bool all);
  void lead_tick(const cluster::cluster_state& state);
  void follow_tick(const cluster::cluster_state& state);
  void change_isr(const key& k, std::vector<cluster::node_id> isr, const char* why);
  // The leader's own write of its partition's state (ISR, or a new epoch), compared on the
  // mod_revision it read (cluster::write_isr); one at a time per partition.
  void write_state(const key& k, cluster::partition_state state, const char* why);
  // Every 500 ms: each follower's lag on the partitions led here, for the metrics.
  void publish_lag(const cluster::cluster_state& state);
  boost::asio::awaitable<void> run_session(cluster::node_id leader, std::shared_ptr<fetch_session> s);
  // Follower: asks the session's leader where the partition's last epoch ended and truncates
  // there (KIP-101); false when not done (retried), closing the link when it failed.
  boost::asio::awaitable<bool> truncate_to_leader(const key& k, follower_task& t, const std::shared_ptr<peer_link>& link);
  // Follower: one partition's part of a session answer (topic creation, log restart, appends,
  // group changes); its batches in stored form (fetch_session.h split_partition_answer).
  boost::asio::awaitable<void> take_answer(const key& k, follower_task& t, const v1::ReplicaFetchResponse& ans,
                                           std::vector<raw_batch>& batches);
  // Leader: a follower's first group snapshot page. The snapshot is read on snapshot_reads_
  // (a partition's whole group state: 100,000 dead letters kept the io thread busy for up to a
  // second after a failover, when every follower asks the new leader for one), then answered
  // on the io thread if this node still leads the partition under the same epoch.
  void start_group_snapshot(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::ReplicaFetchRequest& req);
  // replication_drain.cc: hands over what is ready (or everything at the deadline); finishes.
  void drain_step();
  void hand_over(const key& k);

  boost::asio::io_context& io_;
  storage::store& store_;
  cluster_node& node_;
  replication_settings settings_;
  std::shared_ptr<const cluster::cluster_state> state_;  // refreshed every tick
  std::map<key, leader_part> leading_;
  std::deque<waiter> waiters_;
  std::map<key, std::shared_ptr<follower_task>> following_;
  std::map<cluster::node_id, std::shared_ptr<fetch_session>> sessions_;  // by leader node
  std::size_t next_session_start_ = 0;  // rotates the partition answered first (fetch_session.h)
  std::function<void(const std::string& topic)> on_visible_;
  std::unique_ptr<drain_state> drain_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  clock::time_point lag_published_{};
  std::function<void(const std::string&, std::int32_t, bool)> group_leadership_;
  std::uint64_t next_snapshot_id_ = 1;
  // The (partition, epoch) pairs this process started leading: an epoch the log holds but
  // that is not here was led before a restart (lead_tick takes a new one).
  std::set<std::pair<key, std::int64_t>> led_here_;
  // Group snapshots read off the io thread (one worker; declared last, so it is stopped and
  // joined before the members its completions use go away).
  admin_reads snapshot_reads_{io_};
};

}  // namespace txmq::broker::cluster_mode
