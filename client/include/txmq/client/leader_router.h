#pragma once

// Follows partition leaders in cluster mode (docs/cluster.md, docs/protocol.md "Metadata"):
// keeps the last Metadata answer, names the leader of a message's partition (the broker's own
// choice: protocol::partition_for_key for keyed messages; keyless ones round-robin over the
// partitions that have a leader), and keeps one connection per leader address, made on first
// use with the bootstrap connection's options. Against a single broker (Metadata says
// cluster = false) or before the first refresh, everything goes to the bootstrap connection.
//
// The producer groups its batches by leader_for() and, on NOT_LEADER, calls async_refresh()
// and sends the same messages (same ids) again to their new leaders.
//
// Thread-safety: every member function may be called from any thread.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "txmq/client/connection.h"
#include "txmq/client/error.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::client {

class leader_router : public std::enable_shared_from_this<leader_router> {
 public:
  // Make it with std::make_shared (async_refresh keeps it alive until its answer).
  // `bootstrap` is connected to any node (its address may be a bootstrap list); new connections
  // to leaders copy `bootstrap->options()` with the leader's address.
  explicit leader_router(std::shared_ptr<connection> bootstrap);
  ~leader_router();
  leader_router(const leader_router&) = delete;
  leader_router& operator=(const leader_router&) = delete;

  // Sends Metadata on the bootstrap connection (or, when it is down, a leader connection) and
  // keeps the answer; `done` runs on a connection's io thread (must not block). `timeout`: the
  // request's (default: the connection's request_timeout).
  void async_refresh(std::function<void(result<void>)> done,
                     std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // Blocking form. Errors: the connection's (not_connected, timeout, ...).
  [[nodiscard]] result<v1::MetadataResponse> refresh(std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // The advertised address of the leader of `topic`'s partition for `key` (nullopt: keyless),
  // or "" when not known (single broker, topic not in the metadata, no leader now): send to
  // the bootstrap connection then.
  [[nodiscard]] std::string leader_for(const std::string& topic, const std::optional<std::string>& key);

  // The connection for `address` ("" = the bootstrap connection), made on first use.
  [[nodiscard]] std::shared_ptr<connection> connection_for(const std::string& address);
  [[nodiscard]] const std::shared_ptr<connection>& bootstrap() const noexcept { return bootstrap_; }

  // The last Metadata answer; nullopt before the first refresh succeeded.
  [[nodiscard]] std::optional<v1::MetadataResponse> metadata() const;
  // Closes the connections it made (not the bootstrap one).
  void close();

 private:
  void keep(v1::MetadataResponse m);

  std::shared_ptr<connection> bootstrap_;
  mutable std::mutex mutex_;
  std::optional<v1::MetadataResponse> metadata_;
  std::map<std::string, std::shared_ptr<connection>> leaders_;
  std::map<std::string, std::uint32_t> round_robin_;
  bool closed_ = false;
};

}  // namespace txmq::client
