#pragma once

// The admin HTTP API's answers for the whole cluster (docs/cluster.md "The admin HTTP API and
// the console in a cluster"). In cluster mode a node leads some partitions; the admin reads
// (DlqList, TxList, ListGroups, DescribeGroup, ListTopics' offsets) are answered by each
// partition's leader for the partitions it leads (`served`), and a webhook's attempt log is
// each node's own. So the node that receives an HTTP request reads the Metadata it holds and
// asks every leader (every live node for the attempt log) over the wire — itself through the
// gateway — and merges the answers as the client library does (txmq/protocol/served.h).
//
// Whose rights: each forwarded request carries the HTTP caller's own bearer token in its Hello,
// so every node checks the caller's ACLs; the brokers' principal (txmq-cluster) is never used
// for them, and a caller gains nothing by asking through another node. A caller authenticated
// without a token (a client certificate) cannot be forwarded: the answer then holds this
// node's part and names the nodes not asked.
//
// Never a partial view presented as whole: every answer carries `cluster` — `complete`, each
// node asked and whether it answered (why not), and each partition not covered by its leader at
// the Metadata's epoch (no leader, its leader did not answer, or leadership moved meanwhile).
// POSTs that change state go to the right leader: a redrive to every leader (the answer says
// which partitions were redriven), a transaction's commit/rollback to its home leader.
//
// Runs on the io thread (the gateway's coroutines). The nodes of a view are asked at once, under
// one deadline for the whole view (5 s for reads, 12 s for redrives and commits, which leaders
// answer once their ISR holds them): a node that has not answered by then is named as not
// answering and its partitions as missing. The other nodes are asked over kept connections, one
// pool per caller's token (caller_peers.h), not a connection per node per request.

#include <boost/asio/awaitable.hpp>

#include "http/route_table.h"

namespace txmq::broker::http_api::cluster_views {

// Whether the broker runs in cluster mode (the routes then use the functions below).
[[nodiscard]] bool enabled(gateway& gw) noexcept;

// Each takes the request the single-node route would send (its filters and limit set) and
// answers the cluster's view as JSON: the single node's shape plus `cluster`.
[[nodiscard]] boost::asio::awaitable<common::http_response> list_topics(route_context& ctx, v1::Frame request);
[[nodiscard]] boost::asio::awaitable<common::http_response> list_groups(route_context& ctx, v1::Frame request);
[[nodiscard]] boost::asio::awaitable<common::http_response> describe_group(route_context& ctx, v1::Frame request);
[[nodiscard]] boost::asio::awaitable<common::http_response> dlq_list(route_context& ctx, v1::Frame request);
[[nodiscard]] boost::asio::awaitable<common::http_response> dlq_redrive(route_context& ctx, v1::Frame request);
[[nodiscard]] boost::asio::awaitable<common::http_response> tx_list(route_context& ctx, v1::Frame request);
// TxShow, TxResolve: this node first; then the home partition's leader (NOT_LEADER names it,
// or the record names the home), or the other nodes when this one holds no record.
[[nodiscard]] boost::asio::awaitable<common::http_response> tx_one(route_context& ctx, v1::Frame request,
                                                                   v1::Frame::BodyCase expected);
[[nodiscard]] boost::asio::awaitable<common::http_response> webhook_attempts(route_context& ctx, v1::Frame request);
// GET /v1/cluster: the Metadata this node holds (nodes, controller, partitions with leader,
// epoch, replicas, ISR), on a single node too (cluster = false).
[[nodiscard]] boost::asio::awaitable<common::http_response> metadata(route_context& ctx);

}  // namespace txmq::broker::http_api::cluster_views
