#pragma once

// Reading a cluster's admin answers (docs/cluster.md "Dead letters and admin reads"): a node
// answers DlqList, DlqRedrive, DescribeGroup, ListGroups, TxList and ListTopics for the
// partitions it leads and names them with their epochs (`served`). Whoever asks every leader —
// the client library (client/cluster_admin.h) or a broker answering the admin HTTP API for the
// whole cluster — plans the leaders from one Metadata, checks each answer's `served` against
// that plan and merges. These are the pure parts of that, shared by both; no I/O.
//
// Thread-safe (no state); values only.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "txmq/v1/frame.pb.h"

namespace txmq::protocol {

using partition_key = std::pair<std::string, std::uint32_t>;

struct expected_leader {
  std::string address;
  std::int64_t node = -1;
  std::int64_t epoch = 0;
};

// Who should answer for each partition, by one Metadata; partitions without a leader apart.
struct leader_plan {
  std::map<partition_key, expected_leader> partitions;
  std::set<std::string> addresses;          // every leader's advertised address
  std::vector<partition_key> unavailable;  // no leader now (their whole ISR is down)
};

[[nodiscard]] leader_plan plan_of(const v1::MetadataResponse& m);

// Marks in `covered` the partitions `address` served at the epoch the plan names; false when
// it served one the plan gives to another node or epoch (its view or the Metadata is stale).
bool take_served(const leader_plan& plan, const std::string& address,
                 const google::protobuf::RepeatedPtrField<v1::ServedPartition>& served,
                 std::set<partition_key>& covered);

// Every partition the plan gives to `address` (it answered that it has nothing of what was
// asked there, e.g. UNKNOWN_GROUP).
void cover_all_of(const leader_plan& plan, const std::string& address, std::set<partition_key>& covered);

// The plan's partitions not in `covered`, sorted.
[[nodiscard]] std::vector<partition_key> uncovered(const leader_plan& plan, const std::set<partition_key>& covered);

// Order of a merged dead-letter listing: topic name, partition, offset.
[[nodiscard]] bool dead_letter_less(const v1::DeadLetter& a, const v1::DeadLetter& b);

// Joins the GroupInfo `part` that `address` answered into `into`: each partition's row only
// from the node the plan names as its leader, dead_letters summed over those rows.
void merge_group(const leader_plan& plan, const std::string& address, const v1::GroupInfo& part, v1::GroupInfo& into);
// Sorts a group's rows by topic name and partition.
void sort_group_rows(v1::GroupInfo& g);

// Joins the ListTopicsResponse `part` that `address` answered into `into`: the topics as any
// node lists them (every node lists the cluster's topics), each partition's offsets and bytes
// from the node the plan names as its leader. `into` is sorted by name afterwards.
void merge_topics(const leader_plan& plan, const std::string& address, const v1::ListTopicsResponse& part,
                  v1::ListTopicsResponse& into);

}  // namespace txmq::protocol
