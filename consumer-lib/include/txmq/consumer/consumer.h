#pragma once

// Receives messages of a consumer group from a txmq broker. Delivery is at-least-once: a
// message is redelivered (attempt + 1) when it is nacked, when its ack deadline passes, or when
// the connection that fetched it is lost before it was acked. Per-key order is kept by the
// broker, which never hands out a key's next message while one is in flight; the consumer
// never reorders.
//
// Cluster mode (docs/cluster.md "Consumers"): the first fetch asks the broker for Metadata
// once. A single broker (or one older than Metadata) is read exactly as before, over the one
// connection. In a cluster, each partition is read from its leader: one connection per leader
// node, made with the same options (bootstrap list, TLS, token); acks, nacks and extends go to
// the node that delivered the message (delivery::node); Metadata is refreshed every
// `metadata_refresh` and at once when a node's fetch fails, so moved leaders are followed.
//
// Two levels:
// - fetch / ack / nack / extend: one request each, blocking, thread-safe.
// - run(handler, stop): long-polls and calls the handler on `concurrency` worker threads; acks
//   when it succeeds, nacks when it returns an error or throws, extends the ack deadline of
//   deliveries still being handled when half of it has passed, and keeps going through
//   reconnects. The worker does not wait for the ack's answer (in a cluster the ack goes to the
//   node that delivered the message); the delivery keeps its slot of the window until the
//   answer, and run() returns after the last.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include "txmq/client/connection.h"
#include "txmq/client/error.h"
#include "txmq/protocol/message_id.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::consumer {

// Names one delivered message within the group.
struct delivery_ref {
  std::string topic;
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
  // The delivery's attempt: the broker refuses an ack of an earlier delivery of the same
  // message (its deadline passed and it went out again). 0 = whichever is in flight.
  std::uint32_t attempt = 0;
  // Cluster mode: the advertised address of the node that delivered it, where it is settled.
  // "" = the consumer's own connection (a single broker), or in a cluster the partition's
  // leader now.
  std::string node;

  friend bool operator==(const delivery_ref&, const delivery_ref&) = default;
};

struct delivery {
  // id, topic, key (has_key()), headers, body, publish_time_ms, partition, offset, attempt.
  v1::Message message;
  // When the broker redelivers it unless it is acked (broker clock).
  std::chrono::system_clock::time_point deadline;
  // Cluster mode: the node that delivered it (see delivery_ref::node); "" with a single broker.
  std::string node;

  [[nodiscard]] delivery_ref ref() const {
    return {message.topic(), message.partition(), message.offset(), message.attempt(), node};
  }
  // The message id; a nil uuid if the broker sent a malformed one.
  [[nodiscard]] protocol::message_id id() const;
  [[nodiscard]] std::uint32_t attempt() const noexcept { return message.attempt(); }
};

struct consumer_options {
  client::connection_options connection;
  std::string group;
  std::vector<std::string> topics;
  // run(): handler threads. Deliveries fetched at most concurrency + prefetch at a time.
  std::size_t concurrency = 1;
  std::size_t prefetch = 0;
  // Per fetch: at most this many (run() asks for fewer when its workers are busy).
  std::uint32_t max_messages = 100;
  // Long-poll wait of run()'s fetches; also how long run() may take to notice a stop.
  std::chrono::milliseconds max_wait{1000};
  // 0 = the broker's ack_deadline.
  std::chrono::milliseconds ack_deadline{0};
  // Nack delay after a failed handler: 0 = the group's retry schedule.
  std::chrono::milliseconds nack_delay{0};
  // run(): pause after a failed fetch, doubling up to max.
  std::chrono::milliseconds retry_backoff_initial{50};
  std::chrono::milliseconds retry_backoff_max{2000};
  // Cluster mode: how often the leaders are looked up again when nothing failed.
  std::chrono::milliseconds metadata_refresh{2000};
  // Diagnostics from run() (failed acks, lost leases, handler exceptions). Default: none.
  // Called on run()'s threads, a failed ack's on the connection's io thread: it must not block
  // or call this consumer's blocking methods (they would wait for that thread).
  std::function<void(std::string_view)> log;
};

// What the handler says: success acks, an error nacks (its text goes to the log).
using handler_result = client::result<void>;
using handler = std::function<handler_result(const delivery&)>;

class consumer {
 public:
  // Owns a connection made from options.connection (connecting in the background).
  explicit consumer(consumer_options options);
  // Uses a shared connection.
  consumer(std::shared_ptr<client::connection> conn, consumer_options options);
  ~consumer();
  consumer(const consumer&) = delete;
  consumer& operator=(const consumer&) = delete;

  // Up to max deliveries, waiting up to `wait` for the first (0 = answer at once). Errors: the
  // broker's (UNKNOWN_TOPIC, NOT_AUTHORIZED, INVALID_ARGUMENT, ...) or a connection error; in a
  // cluster, a node's error only when no other node answered (a node that no longer leads
  // only makes the consumer look the leaders up again), and deliveries that arrive after
  // fetch() returned are returned by the next call.
  [[nodiscard]] client::result<std::vector<delivery>> fetch(std::uint32_t max, std::chrono::milliseconds wait);

  // One result per ref, in order: success, or UNKNOWN_DELIVERY (not in flight for this group:
  // already acked, or its deadline passed and it was handed out again). The outer error is the
  // request's (connection lost, timeout, broker Error). In a cluster, refs go to their nodes,
  // one request per node; a node that is not connected fails its refs with not_connected at
  // once (its broker redelivers them), and with refs of several nodes a request's failure is
  // reported per ref.
  using per_ref_results = std::vector<client::result<void>>;
  [[nodiscard]] client::result<per_ref_results> ack(std::span<const delivery_ref> refs);
  // Redeliver after `delay` (0 = the group's retry schedule).
  [[nodiscard]] client::result<per_ref_results> nack(std::span<const delivery_ref> refs, std::chrono::milliseconds delay);
  // Push the ack deadline to now + `by`.
  [[nodiscard]] client::result<per_ref_results> extend(std::span<const delivery_ref> refs, std::chrono::milliseconds by);

  // Runs until `stop` is requested (returns success after the handlers in progress have
  // finished and been acked/nacked) or a fetch fails with a non-retriable error (returned).
  // Connection loss and retriable errors are retried with back-off. Call once at a time.
  [[nodiscard]] client::result<void> run(const handler& handle, std::stop_token stop);

  [[nodiscard]] const std::shared_ptr<client::connection>& conn() const noexcept;
  [[nodiscard]] const consumer_options& options() const noexcept;

 private:
  class impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace txmq::consumer
