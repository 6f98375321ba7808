#pragma once

// Sends messages to a txmq broker: per-topic batching into ProduceRequests, a bound on the
// messages in flight (back-pressure), and retries with the same message ids (the broker's
// dedupe makes a retry safe) until a delivery timeout.
//
// Thread-safety: every member function may be called from any thread. Completion callbacks
// run on the producer's completion thread, one at a time; they may call async_send() but not
// send(), flush() or close() (which wait for that thread; they fail with
// client::errc::would_deadlock there).
//
// Ordering: messages of one topic are sent in the order they were accepted, one batch in flight
// per topic by default, so a retried batch can never be stored after a later one (per-key order
// holds across retries). Raising max_in_flight_batches_per_topic trades that for throughput.
// With the limit set, a message given up (delivery timeout or refusal) also fails, unsent, every
// message of its topic accepted before that moment and not yet acknowledged: sent after it, they
// would be stored before it once the application sends it again. Send them again, in order.

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "txmq/client/connection.h"
#include "txmq/client/error.h"
#include "txmq/protocol/message_id.h"

namespace txmq::producer {

struct outgoing_message {
  std::string topic;
  std::optional<std::string> key;  // same key -> same partition -> ordered; absent: round robin
  std::map<std::string, std::string> headers;
  std::string body;
  std::optional<protocol::message_id> id;                            // a new UUIDv7 when absent
  std::optional<std::chrono::system_clock::time_point> deliver_at;  // delayed message
};

// Where the broker stored a message.
struct send_result {
  protocol::message_id id;
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
  bool duplicate = false;  // the id was already stored; these are the original's position
};

struct producer_options {
  client::connection_options connection;
  // How long a message waits for others of its topic before its batch is sent.
  std::chrono::milliseconds linger{5};
  std::size_t batch_max_messages = 500;
  // Bodies + keys + topics + headers, roughly the wire size; never more than 7/8 of the broker's
  // max_frame_bytes once the connection knows it (a larger request would be refused whole).
  std::size_t batch_max_bytes = 1u << 20;
  // Messages accepted and not yet completed. send()/async_send() block while it is reached.
  std::size_t max_in_flight_messages = 10000;
  // 1 (default) keeps a topic's batches strictly in order across retries; 0 = no limit.
  std::size_t max_in_flight_batches_per_topic = 1;
  // From acceptance to acknowledgement, including retries and waiting for room. After it the
  // message fails with client::errc::delivery_timeout (text: attempts and last error).
  std::chrono::milliseconds delivery_timeout{30000};
  // Per attempt (capped by what is left of the delivery timeout).
  std::chrono::milliseconds request_timeout{10000};
  // Between retries of a batch: doubles from initial to max.
  std::chrono::milliseconds retry_backoff_initial{50};
  std::chrono::milliseconds retry_backoff_max{1000};
};

class producer {
 public:
  using callback = std::function<void(client::result<send_result>)>;

  // Owns a connection made from options.connection (connecting in the background).
  explicit producer(producer_options options);
  // Uses a shared connection.
  producer(std::shared_ptr<client::connection> conn, producer_options options);
  // close().
  ~producer();
  producer(const producer&) = delete;
  producer& operator=(const producer&) = delete;

  // Sends and waits for the broker's acknowledgement (after fsync). Errors: the broker's
  // non-retriable Error (UNKNOWN_TOPIC, MESSAGE_TOO_LARGE, INVALID_ARGUMENT, NOT_AUTHORIZED,
  // ...) with its text, at once; client::errc::delivery_timeout when retriable failures lasted
  // for the delivery timeout; client::errc::closed after close(); client::errc::invalid_argument
  // for a message without topic.
  [[nodiscard]] client::result<send_result> send(outgoing_message message);

  // Queues the message (blocking while max_in_flight_messages are in flight) and completes
  // the future / calls cb once with the outcome, as send() returns it.
  [[nodiscard]] std::future<client::result<send_result>> async_send(outgoing_message message);
  void async_send(outgoing_message message, callback cb);

  // The refusals async_send answers at once, without sending: no topic (invalid_argument), a
  // body above the broker's max_message_bytes once it is known (message_too_large). A caller
  // that queues several messages of a key before their callbacks run (txmq-relay) checks each
  // first: a message refused at once does not stop the later ones it queues after it.
  [[nodiscard]] client::result<void> check(const outgoing_message& message) const;

  // Sends what is lingering now, without waiting for anything: a caller that has just queued
  // a whole round of messages (txmq-relay) gains nothing from the linger.
  void send_now();

  // Sends what is lingering now and waits until no message is in flight. Errors:
  // client::errc::timeout if that did not happen within `timeout`.
  [[nodiscard]] client::result<void> flush(std::chrono::milliseconds timeout = std::chrono::milliseconds::max());

  // Flushes (each message still bounded by its delivery timeout), then stops. Later sends fail
  // with client::errc::closed. Idempotent. Must not be called from a completion callback.
  void close();

  [[nodiscard]] std::size_t in_flight() const noexcept;
  [[nodiscard]] const std::shared_ptr<client::connection>& conn() const noexcept;

 private:
  class impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace txmq::producer
