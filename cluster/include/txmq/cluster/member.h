#pragma once

// A node's part in the cluster's control plane (DESIGN.md §8): its session with etcd, and the
// controller role when it wins it.
//
// Session: a lease of `node_lease_ttl` (5 s), the node's key `nodes/<id>` on it (with the
// address clients should use), kept alive every ttl/3. A node that cannot renew its lease
// before it may have expired for the others ends the session itself (it steps down from the
// controller role at that moment, not later) and starts a new one when etcd answers again,
// revoking the old lease then.
//
// Controller: every node with a session campaigns for the `controller` key (created on its
// lease when absent, etcd compares create_revision); the holder's term is the key's
// create_revision. The controller reacts to every change under the prefix (a watch, resumed
// from its last revision after a break) and, at least every `reconcile_interval`, reads the
// whole state in one transaction and writes what must change, each partition by a fenced
// transaction (control_plane.h): partitions of new topics get replicas and a leader; a
// partition whose leader is gone gets the next live ISR member, epoch + 1; a partition whose
// whole ISR is gone stays without a leader and is reported (no unclean election).
//
// Thread-safety: start() and stop() on the executor's thread (or before it runs);
// snapshot(), is_controller() and registered() from any thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "txmq/cluster/control_plane.h"
#include "txmq/cluster/etcd_client.h"

namespace txmq::cluster {

namespace detail {
// Logs a failure once per run of failures with the same code, so that an etcd outage is one
// line, not one per retry.
class failure_log {
 public:
  void note(std::string_view what, const error& e);
  void clear() { last_ = {}; }

 private:
  std::error_code last_;
};
}  // namespace detail

struct member_options {
  std::string cluster_name = "txmq";
  node_id id = 0;
  std::string advertise;  // HOST:PORT clients use to reach this node
  std::chrono::seconds node_lease_ttl{5};
  std::chrono::milliseconds reconcile_interval{1000};
};

class member {
 public:
  // etcd.request_timeout is capped at a quarter of the lease TTL, so that a keep-alive that
  // hangs still leaves time for the next one before the lease can expire.
  member(boost::asio::any_io_executor ex, etcd_options etcd, member_options options);
  // Destroy only once the coroutines have ended: after stop() completed and its executor ran
  // out of work (or was stopped and will never run again).
  ~member();
  member(const member&) = delete;
  member& operator=(const member&) = delete;

  // Starts the session and controller loops on the executor.
  void start();
  // Ends the loops and revokes the lease (one attempt), so that the others see this node leave
  // now rather than after the TTL.
  boost::asio::awaitable<void> stop();

  [[nodiscard]] bool registered() const noexcept { return registered_.load(); }
  [[nodiscard]] bool is_controller() const noexcept { return controller_term_.load() != 0; }
  [[nodiscard]] node_id id() const noexcept { return options_.id; }
  [[nodiscard]] const key_layout& keys() const noexcept { return keys_; }
  // The last state read from etcd (nullptr before the first read). Refreshed on every change
  // under the prefix, by every node (not only the controller).
  [[nodiscard]] std::shared_ptr<const cluster_state> snapshot() const;
  // Leader changes this node made as controller (for txmq_leader_elections_total).
  [[nodiscard]] std::uint64_t leader_elections() const noexcept { return elections_.load(); }

 private:
  boost::asio::awaitable<void> session_loop();
  // Rounds of one session (campaign, read, reconcile) until it is over (session_end_ says why).
  boost::asio::awaitable<void> session_rounds();
  boost::asio::awaitable<void> control_round();
  // Beside the rounds, for one session (`generation`): renewals every ttl/3, and the step-down
  // at ttl/5 before the lease could have expired.
  boost::asio::awaitable<void> keepalive_loop(std::uint64_t generation);
  boost::asio::awaitable<void> watchdog(std::uint64_t generation);
  // Ends the session now: the controller role and the registration are given up at once.
  void over(const std::string& why);
  void end_session(const std::string& why);
  boost::asio::awaitable<void> watch_loop();
  boost::asio::awaitable<void> reconcile(const cluster_state& state);
  boost::asio::awaitable<void> pause(std::chrono::steady_clock::time_point until);
  void wake();

  boost::asio::any_io_executor ex_;
  etcd_client etcd_;
  member_options options_;
  key_layout keys_;
  boost::asio::steady_timer wake_timer_;
  boost::asio::steady_timer keepalive_timer_;
  boost::asio::steady_timer watchdog_timer_;
  std::uint64_t session_generation_ = 0;
  std::chrono::steady_clock::time_point valid_until_;
  bool session_over_ = false;
  std::string session_end_;
  bool dirty_ = false;  // a change arrived while the session loop was busy
  bool stopping_ = false;
  int loops_running_ = 0;
  std::int64_t lease_ = 0;
  std::shared_ptr<watch_stop> watch_stop_;
  detail::failure_log failures_;
  std::set<std::pair<std::string, std::int32_t>> reported_leaderless_;

  std::atomic<bool> registered_{false};
  std::atomic<std::int64_t> controller_term_{0};
  std::atomic<std::uint64_t> elections_{0};
  mutable std::mutex snapshot_mutex_;
  std::shared_ptr<const cluster_state> snapshot_;
};

}  // namespace txmq::cluster
