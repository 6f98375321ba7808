#pragma once

// Transactions on the broker (docs/protocol.md §9): the handlers of Prepare and EndTx
// (tx_coordinator.cc), the operator's TxList and TxShow (tx_admin.cc) and TxResolve, and the
// check-back scheduler (check_back.cc).
//
// The durable state (PREPARED / COMMITTED / ROLLED_BACK / ABANDONED, check counts, the due
// index, first-resolution-wins, acks applied in the commit write) lives in storage::store;
// this class decides when to ask whom, and what an answer means:
//   - every scan_interval (longer when scans get long) it reads the due checks from the store;
//   - a due transaction whose producer group has a live connection that declared the group in
//     its Hello is sent a CheckTx, round-robin over those connections, at most
//     tx_checks_in_flight open per group; the rest wait in a per-group backlog, so one slow
//     group never holds up another;
//   - COMMIT / ROLLBACK answers resolve the transaction (resolver::check); UNKNOWN, an Error
//     answer, no answer within tx_check_answer_timeout, a connection lost with the check open,
//     or no connected producer at all count as an undecided check: check_count + 1 and the
//     next check per tx_check_schedule, or ABANDONED once tx_max_checks is reached.
//     Answers that arrive after their timeout are ignored (the check already counted).
//
// Runs on the broker's io thread, like the service that owns it; not thread-safe. Storage
// completions are posted back to the io thread.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <boost/asio.hpp>

#include "admin_reads.h"
#include "groups/group_tracker.h"
#include "net/responder.h"
#include "tx/check_policy.h"
#include "txmq/common/metrics.h"
#include "txmq/storage/store.h"

namespace txmq::broker {

struct broker_metrics;

struct tx_settings {
  std::chrono::milliseconds tx_timeout{6000};  // Prepare -> first check (per-tx override allowed)
  std::vector<std::chrono::milliseconds> check_schedule{
      std::chrono::seconds(5),  std::chrono::seconds(10), std::chrono::seconds(30), std::chrono::minutes(1),
      std::chrono::minutes(2),  std::chrono::minutes(5),  std::chrono::minutes(10)};
  std::uint32_t max_checks = 15;
  std::uint32_t checks_in_flight = 32;  // per producer group
  std::chrono::milliseconds answer_timeout{3000};
  // Shortest gap between two reads of the due index; a scan that takes long stretches it to
  // ten times its duration, so scanning never takes more than a tenth of the io thread.
  std::chrono::milliseconds scan_interval{20};
  // Due transactions read per scan.
  std::size_t scan_limit = 20'000;
  // Copied from the service's settings: what Prepare accepts.
  std::uint32_t max_message_bytes = 4u << 20;
  bool auto_create_topics = true;
  std::uint32_t default_partitions = 4;
  std::size_t max_topics = 10'000;
  bool sync = true;
  // Copied from the service's settings: what a TxList answer may take.
  std::uint32_t max_frame_bytes = 8u << 20;
};

class tx_coordinator {
 public:
  // What the coordinator needs from the consumer groups, which the service owns.
  struct group_access {
    // The tracker of a loaded consumer group, or nullptr.
    std::function<group_tracker*(const std::string& group)> find_group;
    // Messages of `topics` became visible and deliveries of `groups` were settled: serve the
    // long polls parked on them.
    std::function<void(const std::vector<std::string>& topics, const std::vector<std::string>& groups)> wake;
  };

  // TxList scans on `reads` (admin_reads.h), off the io thread.
  tx_coordinator(boost::asio::io_context& io, storage::store& store, admin_reads& reads, tx_settings settings,
                 broker_metrics* metrics, group_access groups);

  // Whether a connection may receive and answer the checks of a producer group (with auth on:
  // its principal holds transact on producer-group:GROUP, asked at each check, so a revoked
  // grant takes effect at once). Unset: every connection that declared the group may.
  using check_filter = std::function<bool(const responder& c, const std::string& group)>;
  void set_check_filter(check_filter f) { may_check_ = std::move(f); }

  enum class settle_step : std::uint8_t { hold, ack, release };
  // How long a hold keeps a transaction's input deliveries in flight: longer than the check
  // schedule takes to decide or abandon a transaction. The home leader renews the holds of its
  // PREPARED transactions and of COMMITs whose acks are not applied yet every quarter of it
  // (renew_holds), and the claim before a COMMIT renews them too. 24 h; a test build
  // (TXMQ_FAULT_HOOKS) takes TXMQ_TEST_ACK_HOLD_MS from the environment.
  static constexpr std::chrono::hours k_ack_hold{24};
  [[nodiscard]] static std::chrono::milliseconds ack_hold();

  // Cluster mode (docs/cluster.md "Transactions"), set by the service; unset on a single node,
  // whose path is unchanged. A transaction lives in its home partition's change sequence.
  struct cluster_hooks {
    // Places a Prepare: its home partition and each message's partition; an Error (NOT_LEADER
    // with the leader's address, ...) when this node may not take it.
    std::function<std::optional<v1::Error>(storage::prepare_request&)> place;
    // nullopt when this node leads the home partition now (EndTx, check-back); else the Error.
    std::function<std::optional<v1::Error>(const std::string& topic, std::uint32_t partition)> owner;
    // The ISR gate (replication::await_group).
    std::function<void(std::vector<storage::group_change_ref>, std::function<void(result<void>)>)> await;
    // Copies a committed transaction's messages into their partitions, same ids (deduplicated).
    std::function<void(const storage::tx_record&, std::function<void(result<void>)>)> copy;
    // Read-process-write: settles a transaction's acks on each input partition's leader on its
    // behalf (docs/cluster.md "Transactions"): `hold` at Prepare and again before a COMMIT is
    // written, `ack` once a COMMIT is on the home ISR, `release` once a ROLLBACK is. Answers, per
    // ack in order, whether it applied (false: that delivery is not in flight in that attempt,
    // or another transaction holds it), or an error when some leader could not be asked or did
    // not know the group (UNKNOWN_GROUP after a few seconds of asking: never taken as applied).
    std::function<void(settle_step, const storage::txid&, const std::vector<storage::ack_ref>&,
                       std::function<void(result<std::vector<bool>>)>)>
        settle_acks;
    // TxList (docs/cluster.md "Dead letters and admin reads"): the partitions this node leads
    // now, ready under their epoch, with the epochs. A node lists only the transactions homed
    // in them (and those without a home) and names them in the answer's `served`.
    std::function<std::map<std::pair<std::string, std::uint32_t>, std::int64_t>()> led;
  };
  void set_cluster(cluster_hooks h) { cluster_ = std::move(h); }
  // This node now leads (or no longer leads) a partition: as a home partition, its prepared
  // transactions are checked from here (the next scan reads the whole due index) and its
  // committed transactions not yet copied are copied.
  void home_leadership(const std::string& topic, std::uint32_t partition, bool leading);

  // Counts the stored PREPARED and ABANDONED transactions for the gauges and starts the timer.
  [[nodiscard]] result<void> start();
  // Stops the timer; checks still open stay due in the store and are asked again after a start.
  void stop();

  // A connection finished Hello / closed. Connections with a producer group receive checks.
  void connection_opened(const std::shared_ptr<responder>& c);
  void connection_closed(responder& c);

  // Request handlers; each answers the connection exactly once.
  void prepare(const std::shared_ptr<responder>& c, std::uint64_t corr, v1::PrepareRequest& req);
  void end_tx(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::EndTxRequest& req);
  void operator_resolve(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::TxResolveRequest& req);
  void list(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::TxListRequest& req);
  void show(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::TxShowRequest& req);
  // A CheckTxResult or Error frame: the answer to one of our CheckTx (matched by
  // correlation_id and connection). Anything else is ignored; nothing is sent back.
  void handle_answer(const std::shared_ptr<responder>& c, v1::Frame&& frame);

  // CheckTx frames sent and not yet answered, timed out or lost.
  [[nodiscard]] std::size_t open_checks() const noexcept { return open_.size(); }

  // Correlation ids of the broker's own requests have this bit set; clients count up from 1.
  static constexpr std::uint64_t k_request_id_bit = std::uint64_t{1} << 63;

 private:
  // See take_turn below.
  using resolve_turn = std::shared_ptr<void>;
  struct open_check {
    storage::txid id;
    std::string group;
    std::uint64_t connection = 0;
    std::uint32_t checks_before = 0;
    std::chrono::steady_clock::time_point deadline;
  };
  struct undecided_check {
    storage::txid id;
    std::uint32_t checks_before = 0;
    const char* why = "";  // metrics label: unknown, timeout, lost, error, no_producer
  };

  void resolve(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& what,
               const std::string& txid_bytes, v1::TxOutcome outcome, storage::resolver by);
  void resolve_in_turn(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& what,
                       const storage::txid& id, v1::TxOutcome outcome, storage::resolver by, resolve_turn turn);
  // The store's part of Prepare and of a resolve (after the holds or the claim in cluster mode).
  void write_prepare(const std::shared_ptr<responder>& c, std::uint64_t corr, storage::prepare_request pr);
  void write_resolve(const std::shared_ptr<responder>& c, std::uint64_t corr, storage::resolve_request rr,
                     v1::TxOutcome outcome, std::optional<std::string> stale,
                     std::optional<storage::tx_record> found_before, resolve_turn turn = {});
  // Cluster read-process-write, before a COMMIT is written: the transaction's holds are taken
  // again (each delivery still in flight in its attempt and held by no other transaction).
  // `then` gets why it must roll back instead (nullopt: commit), or the error that stopped the
  // claim (nothing is written then).
  void claim_in_cluster(const storage::tx_record& rec,
                        std::function<void(result<std::optional<std::string>>)> then);
  // Read-process-write: a COMMIT may apply its acks only while each consumed delivery is still
  // in flight in its group and no other commit is applying it. Otherwise (its deadline passed,
  // another consumer processed it and acked, or its transaction committed first) committing
  // would publish the transformed message twice, so the transaction is rolled back instead.
  // Returns why when it must be rolled back; otherwise claims the deliveries until
  // release_acks().
  [[nodiscard]] std::optional<std::string> claim_acks(const storage::tx_record& rec);
  void release_acks(const storage::tx_record& rec);
  // Book-keeping after a resolve that changed the state: metrics, log, the groups' trackers
  // (acks applied by the store) and long polls.
  static std::string unknown_tx_text(const std::string& tx_text);
  void resolved(const storage::tx_record& before, const storage::resolve_result& r, storage::resolver by);
  void on_tick();
  void scan(std::int64_t now_ms, std::vector<undecided_check>& undecided);
  // Sends checks of the group's backlog while the group has a producer and room under its cap.
  void pump(const std::string& group);
  void send_check(responder& c, const storage::tx_record& rec);
  void resolve_by_check(const open_check& check, storage::tx_outcome outcome);
  void resolve_check_in_turn(const open_check& check, storage::tx_outcome outcome);
  void write_check_resolve(const storage::resolve_request& rr, bool claimed, storage::tx_record rec,
                           resolve_turn turn = {});
  // Records undecided checks (one store write) and abandons the transactions that reached
  // tx_max_checks.
  void record(std::vector<undecided_check> undecided);
  void count_check(const char* result);
  // Static: TxList calls it on the admin worker.
  static void fill_info(const storage::tx_record& rec, v1::TxInfo& out, bool with_messages,
                        const std::unordered_set<storage::txid, protocol::uuid_hash>& open);
  [[nodiscard]] std::unordered_set<storage::txid, protocol::uuid_hash> open_txids() const;
  // Deliveries claimed by commits being written (group, topic, partition, offset) → by which
  // transaction (a retried EndTx of the same one is not a conflict).
  std::map<std::tuple<std::string, std::string, std::uint32_t, std::uint64_t>, storage::txid> claimed_;

  boost::asio::io_context& io_;
  storage::store& store_;
  admin_reads& reads_;
  tx_settings settings_;
  broker_metrics* metrics_;
  group_access groups_;
  check_schedule schedule_;
  producer_pool pool_;
  boost::asio::steady_timer timer_;
  std::chrono::steady_clock::time_point next_scan_{};
  // Scans start at the earliest due time still pending, not at the beginning of the due index,
  // so that they do not walk again over the deleted entries of every transaction resolved since
  // the last compaction; a full scan now and then is the net for anything written below it.
  // Everything this coordinator writes into the index (a Prepare's first check, a recorded
  // check's next one) lowers written_due_floor_ when the write completes, and the next scan
  // starts no later than that: so the scan needs no margin below the last one's end, a margin
  // that at 40,000 tx/s put 40,000 deleted entries (one second's resolutions) under every scan.
  std::int64_t scan_from_ms_ = 0;
  std::int64_t written_due_floor_ = std::numeric_limits<std::int64_t>::max();
  std::chrono::steady_clock::time_point next_full_scan_{};
  bool stopped_ = false;
  std::uint64_t next_request_id_ = 0;
  // By correlation id.
  std::unordered_map<std::uint64_t, open_check> open_;
  // Transactions with a check open, or a resolve or record_checks write on its way: not asked
  // again meanwhile.
  std::unordered_set<storage::txid, protocol::uuid_hash> busy_;
  // Transactions prepared here without acks and not yet resolved by EndTx/TxResolve: those
  // resolve without a find_tx() first (issue #15). A hint only, capped; one missing here takes
  // the look-up.
  static constexpr std::size_t k_max_no_acks = 1u << 18;
  std::unordered_set<storage::txid, protocol::uuid_hash> no_acks_;
  // txmq_tx_committed_total / _rolled_back_total series by (committed, resolver).
  std::map<std::pair<bool, int>, common::counter*> resolved_counters_;
  // Due transactions waiting for room under their group's cap, in due order.
  std::map<std::string, std::deque<storage::txid>> backlog_;
  // Transactions whose check found no producer of their group, by group. When a producer of
  // the group connects they are asked at once instead of at their next scheduled check (which
  // may be minutes away after a long outage): a returning producer settles its group's backlog
  // within seconds, still at most tx_checks_in_flight at a time. In memory only: after a broker
  // restart the schedule applies. Bounded per group; beyond it, the schedule applies too.
  std::map<std::string, std::unordered_set<storage::txid, protocol::uuid_hash>> orphaned_;
  // Orphans of a group whose producer came back, asked before the due backlog and although
  // not due; unlike backlog_, not rebuilt by each scan.
  std::map<std::string, std::deque<storage::txid>> returning_;
  static constexpr std::size_t k_max_orphans_per_group = 200'000;
  check_filter may_check_;
  cluster_hooks cluster_;
  // Committed home transactions whose messages are being copied or wait for a retry.
  std::unordered_set<storage::txid, protocol::uuid_hash> copying_;
  std::unordered_map<storage::txid, storage::tx_record, protocol::uuid_hash> uncopied_;
  std::chrono::steady_clock::time_point next_copy_retry_{};
  // A resolved home transaction's follow-up: a COMMIT's copies and acks, a ROLLBACK's releases
  // (read-process-write); marked done in the record (mark_copied) when all went through.
  void start_copy(storage::tx_record rec);
  // A COMMIT's gate answered: on the home ISR → its copies start; not (yet) → asked again every
  // retry while this node still leads the home partition (a new leader takes it over).
  void confirmed_commit(const storage::txid& id, const storage::group_change_ref& change, bool on_isr);
  std::unordered_map<storage::txid, storage::group_change_ref, protocol::uuid_hash> unconfirmed_;
  std::unordered_set<storage::txid, protocol::uuid_hash> confirming_;
  void retry_copies();
  // Every ack_hold()/4 while this node leads their home partitions: the holds of PREPARED
  // read-process-write transactions and of COMMITs whose acks are not applied yet are taken
  // again (an Extend by the same transaction), so they do not run out while the transaction
  // waits for its decision or its acks. ABANDONED transactions' holds are not renewed: their
  // inputs go back to the group when the hold runs out (docs/cluster.md "Read-process-write").
  void renew_holds();
  std::chrono::steady_clock::time_point next_hold_renew_{};
  // Cluster mode: one resolution of a transaction at a time (EndTx, TxResolve, a check-back's
  // answer). A cluster COMMIT of read-process-write takes its holds again before writing, an
  // asynchronous step during which a contrary ROLLBACK could be written and its releases sent
  // (and the COMMIT's claim then hold the inputs again for a transaction already rolled back).
  // Serialized, the second request finds the first one's outcome in the store and is answered
  // from it (repeated, or TX_ALREADY_RESOLVED). A turn is held until the store answered the
  // resolve write; the waiting requests run after it, in arrival order.
  // A turn for `id` now, or nullptr after queueing `retry` to run when the turn is free.
  [[nodiscard]] resolve_turn take_turn(const storage::txid& id, std::function<void()> retry);
  std::unordered_map<storage::txid, std::deque<std::function<void()>>, protocol::uuid_hash> resolving_;
  std::shared_ptr<char> alive_ = std::make_shared<char>(0);  // expires with the coordinator
  // Answers with the Error (NOT_LEADER and the like) the cluster hooks gave.
  static void respond_with(responder& c, std::uint64_t corr, v1::Error e);
  static void answer_end_tx(responder& c, std::uint64_t corr, const storage::resolve_result& res);
  // Connections that declared a producer group, by connection id.
  std::unordered_map<std::uint64_t, std::weak_ptr<responder>> producers_;
};

}  // namespace txmq::broker
