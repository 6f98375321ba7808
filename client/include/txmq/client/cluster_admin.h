#pragma once

// Admin requests whose answer a cluster spreads over its partition leaders (docs/cluster.md
// "Dead letters and admin reads"). A group's dead letters live with their partitions, and only
// a partition's leader holds a complete, current copy and may change it; so a cluster node
// lists and redrives the dead letters of the partitions it leads, naming them (with their
// leader epochs) in `served`. These functions read Metadata, ask every leader, and check that
// each partition was served by its Metadata leader at its epoch; when one was not (leadership
// moved meanwhile, a leader did not answer) they read Metadata again and ask again, until
// `deadline`. Against a single broker they send the request once (paging as usual).
//
// Blocking; must not be called on a connection's io thread. `conn` may be connected to any node.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "txmq/client/connection.h"
#include "txmq/client/error.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::client {

struct dlq_listing {
  // Sorted by topic name, partition, offset; at most the limit asked.
  std::vector<v1::DeadLetter> dead_letters;
  // Partitions without a leader now (their whole ISR is down): their dead letters are not in
  // the listing (nor redriven). Empty on a single broker.
  std::vector<std::pair<std::string, std::uint32_t>> unavailable;
};

struct dlq_redrive_result {
  std::uint64_t redriven = 0;
  std::vector<std::pair<std::string, std::uint32_t>> unavailable;  // as dlq_listing's
};

// Up to `limit` dead letters of `group` (every partition's, from its leader).
[[nodiscard]] result<dlq_listing> dlq_list_all(const std::shared_ptr<connection>& conn, const std::string& group,
                                               std::size_t limit,
                                               std::chrono::milliseconds deadline = std::chrono::seconds(30));
// Redrives every dead letter of `group`, each by its partition's leader (answered once the
// partition's ISR holds it). A retry after a partial failure redrives only what is still dead.
[[nodiscard]] result<dlq_redrive_result> dlq_redrive_all(const std::shared_ptr<connection>& conn,
                                                         const std::string& group,
                                                         std::chrono::milliseconds deadline = std::chrono::seconds(30));

// The group's figures, each partition's row from its leader (and dead_letters summed over
// those rows); the broker's answer as it is against a single broker.
[[nodiscard]] result<v1::GroupInfo> describe_group_all(const std::shared_ptr<connection>& conn, const std::string& group,
                                                       std::chrono::milliseconds deadline = std::chrono::seconds(30));
// Every group so, sorted by name.
[[nodiscard]] result<std::vector<v1::GroupInfo>> list_groups_all(const std::shared_ptr<connection>& conn,
                                                                 std::chrono::milliseconds deadline = std::chrono::seconds(30));

// Transactions (TxList) of every home partition, each listed by its home partition's leader
// (the one node whose record is current: a follower's copy may lag behind a commit), merged and
// de-duplicated by txid, sorted by txid; at most `limit`. `request` carries the filters (state,
// all_states, topic); its limit and cursor are set here. `unavailable`: home partitions without
// a leader now (their transactions are not listed). Against a single broker: its pages.
struct tx_listing {
  std::vector<v1::TxInfo> txs;
  std::vector<std::pair<std::string, std::uint32_t>> unavailable;
};
[[nodiscard]] result<tx_listing> tx_list_all(const std::shared_ptr<connection>& conn, const v1::TxListRequest& request,
                                             std::size_t limit,
                                             std::chrono::milliseconds deadline = std::chrono::seconds(30));

// Every topic of the cluster (any node lists them all, from etcd), with each partition's
// leader, replicas and ISR, and its offsets and bytes from its leader; sorted by name.
// `unavailable`: partitions without a leader (their offsets are 0). Against a single broker:
// its ListTopics.
struct topic_listing {
  std::vector<v1::TopicInfo> topics;
  std::vector<std::pair<std::string, std::uint32_t>> unavailable;
};
[[nodiscard]] result<topic_listing> list_topics_all(const std::shared_ptr<connection>& conn,
                                                    std::chrono::milliseconds deadline = std::chrono::seconds(30));

// A webhook subscription's attempt log. In a cluster each node logs the attempts it made (a
// partition's leader delivers it; after a failover the new leader logs from where it took
// over), so every live node of the Metadata is asked for up to `limit` attempts and the answers
// are merged by time (oldest first; newest first with `newest_first`), at most `limit` in all.
// A node that does not answer is named in `unanswered` (its attempts are left out), and so are
// the attempts of a node that is down (Metadata does not list it). `message_id`: raw 16 bytes,
// or empty for every message.
struct webhook_attempt_log {
  std::vector<v1::WebhookAttempt> attempts;
  std::vector<std::string> unanswered;  // "ADDRESS: why"
};
[[nodiscard]] result<webhook_attempt_log> webhook_attempts_all(const std::shared_ptr<connection>& conn,
                                                               const std::string& id, const std::string& message_id,
                                                               std::size_t limit, bool newest_first = false);

}  // namespace txmq::client
