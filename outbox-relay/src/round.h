#pragma once

// A round of the relay (relay.cc's drain): the oldest `batch` rows of some shards, read with one
// query, published together (the broker's fsync is shared by all shards of the round, not paid
// once per shard) and deleted with one statement. Rows are ordered by seq (over all shards) and
// the producer keeps a topic's messages in the order given, so each shard's order holds.
// take_rows() turns a read's result into one; apart from the loop so a test can drive it.

#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "txmq/client/error.h"
#include "txmq/common/metrics.h"
#include "round_reader.h"
#include "txmq/producer/producer.h"

namespace txmq::relay::detail {

// The outcomes of a round's messages, filled by the producers' completion callbacks (one
// callback per row, not a std::future with its own shared state, mutex and condition
// variable per row: the relay's allocation was a third of its profile, issue #15).
// Each callback writes only its own slot; the count says when all have (the mutex only
// carries the last one's wake-up).
struct round_acks {
  std::mutex mutex;
  std::condition_variable all_done;
  std::vector<std::optional<client::result<producer::send_result>>> results;
  std::atomic<std::size_t> done{0};
};

struct round {
  std::map<int, int> rows;               // per shard read, the rows taken (0 for a shard with nothing)
  // Per shard read, the highest seq taken, or where its read started when it took none: the next
  // read of an unfinished shard starts there.
  std::map<int, std::int64_t> last_seq;
  std::set<int> unfinished;  // shards that may have rows past those taken (round_reader.h)
  std::vector<producer::outgoing_message> messages;
  std::vector<int> shards;  // per message
  // Per message its topic, as an index into topic_names (a short vector: no string per row).
  std::vector<std::uint32_t> topic_of;
  std::vector<std::string> topic_names;
  std::string ids;          // per message its id's 16 bytes, one after the other (no string per row)
  std::vector<std::chrono::system_clock::time_point> created;
  std::shared_ptr<round_acks> acks;  // set by send_round
  std::size_t sent = 0;
  // Shards stopped at a row that cannot be sent, with the reason naming the row: its earlier rows
  // were taken, it and the shard's later rows were not (README "Failures and back-off").
  std::map<int, client::error> stopped;
  std::chrono::steady_clock::time_point read_at = std::chrono::steady_clock::now();
  std::uint64_t read_no = 0;  // round_reader's
  bool deferred = false;      // nothing read: read again once the round in flight is deleted
};

// Whether a decoded message of `shard` can be sent (producer::check of the shard's publisher).
using send_check = std::function<client::result<void>(int shard, const producer::outgoing_message&)>;

// Takes the rows of a read up to its ceiling (read_result::order, round_reader.h) into `out`, in
// publish order, with the shards it left unfinished and where each shard's read started,
// each shard up to its first row that cannot be read (headers that are not a JSON object) or
// sent (`check`: a body over the broker's max_message_bytes). That row stops its shard
// (out.stopped) rather than being skipped or sent: skipped it would be lost, sent the refusal
// comes at once while the shard's later rows, queued after it, are stored before it is fixed.
// The other shards go on.
void take_rows(const read_result& read, round& out, const send_check& check);

struct settled {
  std::string acked;  // the acked ids, 16 bytes each
  std::optional<client::error> failed;
};

// Waits for every ack of a sent round (each callback runs: the producer gives up on a message
// after its delivery timeout). Returns the acked ids and the first failure; each acked row's age
// goes to `row_age`.
settled settle(round& r, common::histogram& row_age);

// Whether the broker's answer to a ProduceRequest refuses its topic's messages until an operator
// acts, not the broker being unavailable: NOT_AUTHORIZED (no produce grant on the topic),
// UNKNOWN_TOPIC (auto_create_topics off), INVALID_ARGUMENT (a topic name or headers it does not
// take), MESSAGE_TOO_LARGE (its max_message_bytes lowered since the producer learnt it). A
// ProduceRequest carries one topic (the producer batches per topic), so the refusal concerns
// exactly the topic of the messages it fails; the broker refuses the whole request before
// storing any of it. Everything else (connection, timeout, STORE_UNAVAILABLE, STORE_FULL,
// NOT_LEADER, SHUTTING_DOWN, ...) is the broker's trouble: the round failed, back off.
[[nodiscard]] bool refuses_topic(const client::error& e) noexcept;

struct round_failures {
  std::set<int> refused;                      // shards stopped by a refusal of their row's topic
  std::optional<client::error> broker_error;  // the first failure that is not such a refusal
};

// After a round is settled with failures: a shard whose first unacknowledged row targets a topic
// the broker refused (refuses_topic) stops there, as take_rows' stops do (out.stopped, the reason
// names the row, the topic and the code). The topic's later rows of the round were not sent either
// (the producer gives up, unsent, the topic's messages queued after a refusal), so failures of a
// refused topic are never the broker's; any other failure is.
round_failures sort_failures(round& r);

}  // namespace txmq::relay::detail
