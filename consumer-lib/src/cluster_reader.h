#pragma once

// A consumer's reads in cluster mode (docs/cluster.md "Consumers"): each partition's messages
// come from its leader, so the consumer fetches from every node that leads a partition of its
// topics, over one connection per node (client::leader_router, made from the consumer's own
// connection options: the same bootstrap list, TLS and token), and settles each delivery on
// the node that delivered it (that node holds the group's state for it).
//
// One long poll per node at a time. fetch() starts one on every leader node that has none and
// returns as soon as deliveries arrive (or when none is left running); answers that arrive
// later are kept and returned first by the next fetch(). They are leased by the broker like any
// delivery: a consumer that never fetches again lets their deadline pass and they are
// redelivered (at-least-once holds). Per-key order: each node's answer is kept in its order,
// and a broker never hands out a key's next message while one is in flight.
//
// Metadata is refreshed in the background every `refresh_every`, and at once after a node's
// fetch failed (connection lost, NOT_LEADER, UNKNOWN_TOPIC on a node that no longer leads), so
// leadership moves and epoch changes are followed without a Metadata round trip per fetch.
//
// Thread-safety: every member function may be called from any thread.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "txmq/client/leader_router.h"
#include "txmq/consumer/consumer.h"

namespace txmq::consumer::detail {

class cluster_reader : public std::enable_shared_from_this<cluster_reader> {
 public:
  // `router` has had one successful refresh that said cluster = true. Make with make_shared.
  cluster_reader(std::shared_ptr<client::leader_router> router, const consumer_options& options);

  [[nodiscard]] client::result<std::vector<delivery>> fetch(std::uint32_t max, std::chrono::milliseconds wait);
  // The connection for a delivery: the node that delivered it (ref.node), else the leader of
  // its partition now, else the bootstrap connection.
  [[nodiscard]] std::shared_ptr<client::connection> connection_for(const delivery_ref& ref);
  // Refresh Metadata at the next chance (a request to some node failed).
  void stale();
  // Fails the long polls in flight (closed) and drops what was kept.
  void close();

 private:
  // Per leader address, the consumer's topics it leads a partition of.
  [[nodiscard]] std::map<std::string, std::vector<std::string>> plan() const;
  void start_fetch(const std::string& address, const std::vector<std::string>& topics, std::uint32_t max,
                   std::chrono::milliseconds wait);
  void on_answer(const std::string& address, client::result<v1::Frame> r);
  void refresh_if_due();
  void log(const std::string& text) const;

  std::shared_ptr<client::leader_router> router_;
  std::string group_;
  std::vector<std::string> topics_;
  std::chrono::milliseconds ack_deadline_;
  std::chrono::milliseconds request_timeout_;
  std::chrono::milliseconds refresh_every_;
  std::function<void(std::string_view)> log_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<delivery> ready_;
  std::map<std::string, bool> in_flight_;    // per address: a long poll is running
  std::optional<client::error> failure_;     // the first failure since the last fetch() returned
  std::uint64_t answers_ = 0;                // fetch answers received (success)
  bool refreshing_ = false;
  bool refresh_now_ = false;
  std::chrono::steady_clock::time_point next_refresh_;
  bool closed_ = false;
};

}  // namespace txmq::consumer::detail
