#pragma once

// An etcd v3 client over etcd 3.4's JSON gateway (`/v3/...` over HTTP/1.1, Boost.Beast, C++20
// coroutines), the one way txmq talks to etcd (DESIGN.md §8). Keys and values are bytes here;
// the base64 of the gateway's JSON stays inside.
//
// What it covers: range, put, delete, txn (compares on version, create_revision, mod_revision
// or value; put, range and delete in either branch), lease grant, keep-alive (one round per
// call) and revoke, and watch (a stream of events that resumes from a revision).
//
// Endpoints: a request goes to the endpoint that answered last; when it cannot be reached the
// next ones are tried in order, within the one request deadline. Unary requests reuse idle
// keep-alive connections; a watch holds a connection of its own for as long as it runs.
//
// Errors (errc.h): etcd_unavailable when no endpoint answered within `request_timeout`
// (retriable), etcd_error with etcd's own text when etcd refused, bad_response for JSON that
// is not etcd's, lease_not_found for a keep-alive or grant on a lease that is gone.
//
// Thread-safety: none. Every call runs on the executor given at construction (one io thread);
// several calls may be in flight at once (each has its own connection).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "txmq/common/address.h"
#include "txmq/protocol/result.h"

namespace txmq::cluster {

struct key_value {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;  // revision of the put that created the key
  std::int64_t mod_revision = 0;     // revision of the last change
  std::int64_t version = 0;          // changes since creation (1 after the first put)
  std::int64_t lease = 0;            // the lease the key is attached to, 0 for none
};

struct range_result {
  std::int64_t revision = 0;  // the store's revision when it answered
  std::vector<key_value> kvs;
};

enum class compare_target { version, create_revision, mod_revision, value };
enum class compare_result { equal, greater, less, not_equal };

// One condition of a txn: `target` of `key` compared with `number` (or `value`). A key that
// does not exist has version, create_revision and mod_revision 0: `create_revision == 0` is
// "the key is absent".
struct compare {
  std::string key;
  compare_target target = compare_target::mod_revision;
  compare_result result = compare_result::equal;
  std::int64_t number = 0;
  std::string value;
};

struct op_put {
  std::string key;
  std::string value;
  std::int64_t lease = 0;
};
struct op_range {
  std::string key;
  std::string range_end;  // empty: the one key; prefix_end(p): every key starting with p
};
struct op_delete {
  std::string key;
  std::string range_end;
};
using txn_op = std::variant<op_put, op_range, op_delete>;

struct txn_request {
  std::vector<compare> compares;  // all must hold (AND)
  std::vector<txn_op> success;    // run when they do
  std::vector<txn_op> failure;    // run when one does not
};

struct txn_result {
  bool succeeded = false;
  std::int64_t revision = 0;          // the revision after the txn (its puts carry it)
  std::vector<range_result> ranges;   // the answers of the branch's range ops, in order
};

struct lease_grant_result {
  std::int64_t id = 0;
  std::chrono::seconds ttl{0};
};

struct watch_event {
  enum class kind { put, del };
  kind type = kind::put;
  key_value kv;  // for a delete: the key and the deletion's mod_revision
};

// Stops a running watch from outside it (its owner's shutdown, a session that ended): the
// watch's connection is closed and watch() returns. Same thread as the client.
class watch_stop {
 public:
  void stop();
  [[nodiscard]] bool stopped() const noexcept { return stopped_; }

 private:
  friend class etcd_client;
  bool stopped_ = false;
  std::function<void()> close_;
};

// The range end that selects every key starting with `prefix` (etcd's "prefix + 1" rule).
[[nodiscard]] std::string prefix_end(std::string_view prefix);

struct etcd_options {
  std::vector<common::host_port> endpoints;  // etcd client URLs' HOST:PORT (loopback or IP)
  std::chrono::milliseconds request_timeout{2000};
};

// Parses "http://127.0.0.1:2379,http://10.0.0.2:2379" (or without http://) into endpoints.
// Errors: errc::invalid_argument naming the bad part (https is not supported yet, and says so).
[[nodiscard]] result<std::vector<common::host_port>> parse_etcd_endpoints(std::string_view urls);

class etcd_client {
 public:
  etcd_client(boost::asio::any_io_executor ex, etcd_options options);
  ~etcd_client();
  etcd_client(const etcd_client&) = delete;
  etcd_client& operator=(const etcd_client&) = delete;

  // The keys in [key, range_end) (just `key` when range_end is empty), sorted by key.
  boost::asio::awaitable<result<range_result>> range(std::string key, std::string range_end = {});
  // Writes key = value (attached to `lease` when non-zero); the new revision.
  boost::asio::awaitable<result<std::int64_t>> put(std::string key, std::string value, std::int64_t lease = 0);
  // Deletes [key, range_end); how many keys were deleted.
  boost::asio::awaitable<result<std::int64_t>> remove(std::string key, std::string range_end = {});
  // One atomic compare-and-act. A compare that fails is not an error: succeeded == false.
  boost::asio::awaitable<result<txn_result>> txn(const txn_request& request);

  boost::asio::awaitable<result<lease_grant_result>> lease_grant(std::chrono::seconds ttl);
  // One keep-alive round: the lease's TTL restarted, its new TTL. errc::lease_not_found when
  // the lease has expired or was revoked.
  boost::asio::awaitable<result<std::chrono::seconds>> lease_keepalive(std::int64_t id);
  // Ends the lease now; its keys are deleted. Revoking a lease that is gone is not an error.
  boost::asio::awaitable<result<void>> lease_revoke(std::int64_t id);

  // Streams the changes of [key, range_end) from `start_revision` (0: from now) to `on_events`
  // (called with the events of one revision batch, in order) until the stream breaks or the
  // coroutine is cancelled. Returns why it ended; `next_revision` is then the revision to pass
  // as start_revision to resume without missing or repeating an event. A start revision that
  // etcd has compacted away ends it with errc::etcd_error naming the compaction: read the
  // state anew then.
  boost::asio::awaitable<error> watch(std::string key, std::string range_end, std::int64_t start_revision,
                                      std::function<void(const std::vector<watch_event>&)> on_events,
                                      std::int64_t& next_revision,
                                      std::shared_ptr<watch_stop> stop = nullptr);

  // Closes idle connections; calls in flight end with errors.
  void close();

 private:
  struct connection;
  boost::asio::awaitable<result<std::string>> post(std::string_view target, std::string body);
  boost::asio::awaitable<result<std::unique_ptr<connection>>> connect(std::chrono::steady_clock::time_point deadline);

  boost::asio::any_io_executor ex_;
  etcd_options options_;
  std::size_t current_ = 0;  // the endpoint that answered last
  std::vector<std::unique_ptr<connection>> idle_;
};

}  // namespace txmq::cluster
