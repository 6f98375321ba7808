#include "txmq/cluster/member.h"

#include <algorithm>
#include <sstream>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "txmq/cluster/errc.h"
#include "txmq/common/backoff.h"
#include "txmq/common/log.h"

namespace txmq::cluster {
namespace asio = boost::asio;
namespace log = common::log;
using clock = std::chrono::steady_clock;

namespace {

etcd_options capped(etcd_options o, std::chrono::seconds ttl) {
  const auto cap = std::chrono::duration_cast<std::chrono::milliseconds>(ttl) / 4;
  o.request_timeout = std::min(o.request_timeout, cap);
  return o;
}

std::string list(const std::vector<node_id>& ids) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
  out << ']';
  return out.str();
}

std::string leader_name(node_id id) { return id == k_no_leader ? "none" : std::to_string(id); }

}  // namespace

void detail::failure_log::note(std::string_view what, const error& e) {
  if (e.code == last_) return;
  last_ = e.code;
  log::warn("cluster: ", what, ": ", e.to_string());
}

member::member(asio::any_io_executor ex, etcd_options etcd, member_options options)
    : ex_(ex),
      etcd_(ex, capped(std::move(etcd), options.node_lease_ttl)),
      options_(std::move(options)),
      keys_(options_.cluster_name),
      wake_timer_(ex),
      keepalive_timer_(ex),
      watchdog_timer_(ex) {}

member::~member() = default;

std::shared_ptr<const cluster_state> member::snapshot() const {
  std::lock_guard lock(snapshot_mutex_);
  return snapshot_;
}

void member::wake() {
  dirty_ = true;
  wake_timer_.cancel();
}

asio::awaitable<void> member::pause(clock::time_point until) {
  if (dirty_ || stopping_) co_return;
  wake_timer_.expires_at(until);
  boost::system::error_code ec;
  co_await wake_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

namespace {
auto log_end(const char* what) {
  return [what](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      log::error("cluster: the ", what, " loop failed: ", x.what());
    }
  };
}
}  // namespace

void member::start() {
  loops_running_ = 2;
  asio::co_spawn(ex_, session_loop(), log_end("session"));
  asio::co_spawn(ex_, watch_loop(), log_end("watch"));
}

asio::awaitable<void> member::stop() {
  stopping_ = true;
  wake();
  keepalive_timer_.cancel();
  watchdog_timer_.cancel();
  if (watch_stop_) watch_stop_->stop();
  // The session loop revokes its lease on the way out; wait for both loops (each checks
  // stopping_ between two etcd calls, and a call lasts at most the request timeout).
  asio::steady_timer t(ex_);
  while (loops_running_ > 0) {
    t.expires_after(std::chrono::milliseconds(10));
    co_await t.async_wait(asio::use_awaitable);
  }
}

asio::awaitable<void> member::session_loop() {
  struct done {
    member* self;
    ~done() { --self->loops_running_; }
  } on_exit{this};
  common::backoff retry(std::chrono::milliseconds(200), std::chrono::seconds(2), 0.2);
  std::int64_t stale_lease = 0;
  while (!stopping_) {
    const auto sent = clock::now();
    auto grant = co_await etcd_.lease_grant(options_.node_lease_ttl);
    if (!grant) {
      failures_.note("cannot start a session", grant.error());
      co_await pause(clock::now() + retry.next());
      dirty_ = false;
      continue;
    }
    lease_ = grant.value().id;
    if (stale_lease != 0) {
      // The previous session's lease may have outlived our giving up on it (etcd restarted and
      // renewed it): revoke it so its keys (an old controller key) go now.
      (void)co_await etcd_.lease_revoke(stale_lease);
      stale_lease = 0;
    }
    // Named, not a temporary inside the co_await expression: GCC 12 destroys such a braced
    // temporary twice.
    const std::string entry = encode(node_info{options_.id, options_.advertise});
    auto put = co_await etcd_.put(keys_.node(options_.id), entry, lease_);
    if (!put) {
      failures_.note("cannot register", put.error());
      stale_lease = lease_;
      co_await pause(clock::now() + retry.next());
      dirty_ = false;
      continue;
    }
    failures_.clear();
    retry.reset();
    registered_ = true;
    log::info("cluster: node ", options_.id, " registered as ", keys_.node(options_.id), " (lease ", lease_, ", ttl ",
              options_.node_lease_ttl.count(), "s)");
    const auto generation = ++session_generation_;
    session_over_ = false;
    valid_until_ = sent + grant.value().ttl;
    // Keep-alives and the watchdog run beside the control rounds, so that a round blocked on a
    // hung etcd delays neither the renewals nor the step-down.
    loops_running_ += 2;
    asio::co_spawn(ex_, keepalive_loop(generation), log_end("keep-alive"));
    asio::co_spawn(ex_, watchdog(generation), log_end("lease watchdog"));
    co_await session_rounds();
    ++session_generation_;
    keepalive_timer_.cancel();
    watchdog_timer_.cancel();
    end_session(session_end_);
    if (stopping_) {
      (void)co_await etcd_.lease_revoke(lease_);
      log::info("cluster: node ", options_.id, " left the cluster (lease revoked)");
      break;
    }
    stale_lease = lease_;
  }
}

void member::end_session(const std::string& why) {
  registered_ = false;
  if (controller_term_ != 0)
    log::info("cluster: node ", options_.id, " steps down as controller (term ", controller_term_.load(), "): ", why);
  controller_term_ = 0;
}

asio::awaitable<void> member::control_round() {
  if (controller_term_ == 0 && !session_over_) {
    auto c = co_await campaign(etcd_, keys_, options_.id, lease_);
    // Won on a lease the watchdog has meanwhile given up: the key goes with the lease, and this
    // node must not act on it.
    if (session_over_) co_return;
    if (c && c.value()) {
      controller_term_ = c.value()->create_revision;
      reported_leaderless_.clear();
      log::info("cluster: node ", options_.id, " is the controller (term ", controller_term_.load(), ")");
    } else if (!c) {
      failures_.note("campaign", c.error());
    }
  }
  auto st = co_await read_cluster_state(etcd_, keys_);
  if (!st) {
    failures_.note("reading the cluster state", st.error());
    co_return;
  }
  failures_.clear();
  {
    std::lock_guard lock(snapshot_mutex_);
    snapshot_ = std::make_shared<const cluster_state>(st.value());
  }
  if (controller_term_ != 0) co_await reconcile(st.value());
}

asio::awaitable<void> member::session_rounds() {
  while (!stopping_ && !session_over_) {
    dirty_ = false;
    co_await control_round();
    if (stopping_ || session_over_) break;
    co_await pause(clock::now() + options_.reconcile_interval);
  }
  if (stopping_ && !session_over_) session_end_ = "stopping";
}

asio::awaitable<void> member::keepalive_loop(std::uint64_t generation) {
  struct done {
    member* self;
    ~done() { --self->loops_running_; }
  } on_exit{this};
  const auto every = std::chrono::duration_cast<std::chrono::milliseconds>(options_.node_lease_ttl) / 3;
  auto next = clock::now() + every;
  while (!stopping_ && generation == session_generation_) {
    keepalive_timer_.expires_at(next);
    boost::system::error_code ec;
    co_await keepalive_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (stopping_ || generation != session_generation_) break;
    if (clock::now() < next) continue;  // woken for another session's timer
    const auto sent = clock::now();
    auto ka = co_await etcd_.lease_keepalive(lease_);
    if (generation != session_generation_) break;
    if (ka) {
      // The others count the TTL from etcd's renewal, which came after we sent the request.
      valid_until_ = sent + ka.value();
      next = clock::now() + every;
    } else if (ka.error().is(errc::lease_not_found)) {
      over("its lease expired in etcd");
      break;
    } else {
      failures_.note("keep-alive", ka.error());
      next = clock::now() + std::chrono::milliseconds(250);
    }
  }
}

asio::awaitable<void> member::watchdog(std::uint64_t generation) {
  struct done {
    member* self;
    ~done() { --self->loops_running_; }
  } on_exit{this};
  // Give the role up a margin before the lease can have expired for the others, whatever the
  // control round is waiting for.
  const auto margin = std::chrono::duration_cast<std::chrono::milliseconds>(options_.node_lease_ttl) / 5;
  while (!stopping_ && generation == session_generation_) {
    const auto deadline = valid_until_ - margin;
    if (clock::now() >= deadline) {
      over("etcd was not reached before the lease could expire");
      break;
    }
    watchdog_timer_.expires_at(deadline);
    boost::system::error_code ec;
    co_await watchdog_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

void member::over(const std::string& why) {
  if (session_over_) return;
  session_over_ = true;
  session_end_ = why;
  // At once, not when the control round returns: the controller role ends here.
  if (controller_term_ != 0)
    log::warn("cluster: node ", options_.id, " steps down as controller (term ", controller_term_.load(), "): ", why);
  controller_term_ = 0;
  registered_ = false;
  if (!stopping_) log::warn("cluster: node ", options_.id, " lost its session: ", why, "; starting a new one");
  wake();
}

asio::awaitable<void> member::watch_loop() {
  struct done {
    member* self;
    ~done() { --self->loops_running_; }
  } on_exit{this};
  std::int64_t next = 0;
  detail::failure_log failures;
  while (!stopping_) {
    watch_stop_ = std::make_shared<watch_stop>();
    const auto root = keys_.root();
    std::function<void(const std::vector<watch_event>&)> on_events = [this](const std::vector<watch_event>&) { wake(); };
    auto why = co_await etcd_.watch(root, prefix_end(root), next, std::move(on_events), next, watch_stop_);
    if (stopping_) break;
    failures.note("watch", why);
    // A compacted start revision: start from now, and re-read everything.
    if (why.is(errc::etcd_error)) next = 0;
    wake();
    asio::steady_timer t(ex_, std::chrono::milliseconds(250));
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

asio::awaitable<void> member::reconcile(const cluster_state& st) {
  std::set<node_id> live;
  for (const auto& n : st.nodes) live.insert(n.id);
  std::vector<node_id> live_list(live.begin(), live.end());
  const auto term = controller_term_.load();

  auto lost = [&](const result<std::int64_t>& r) {
    if (r || !r.error().is(errc::not_controller)) return false;
    log::warn("cluster: ", r.error().message);
    controller_term_ = 0;
    return true;
  };

  for (const auto& t : st.topics) {
    for (std::int32_t p = 0; p < t.partitions; ++p) {
      if (st.partitions.contains({t.name, p})) continue;
      const auto s = initial_state(assign_replicas(t.name, p, t.replicas, live_list));
      auto r = co_await write_partition_state(etcd_, keys_, t.name, p, s, 0, term);
      if (lost(r)) co_return;
      if (r) log::info("cluster: partition ", t.name, "/", p, " created: leader ", s.leader, ", replicas ", list(s.replicas));
    }
  }

  for (const auto& [key, entry] : st.partitions) {
    const auto& [topic, p] = key;
    const auto next = after_membership_change(entry.state, live);
    if (next) {
      auto r = co_await write_partition_state(etcd_, keys_, topic, p, *next, entry.mod_revision, term);
      if (lost(r)) co_return;
      if (!r) {
        log::warn("cluster: ", r.error().to_string());
        continue;
      }
      if (next->leader != entry.state.leader) {
        ++elections_;
        log::info("cluster: partition ", topic, "/", p, " leader ", leader_name(entry.state.leader), " -> ",
                  leader_name(next->leader), " (epoch ", next->leader_epoch, ", isr ", list(next->isr), ")");
      }
    }
    const auto& now = next ? *next : entry.state;
    if (now.leader == k_no_leader) {
      if (reported_leaderless_.insert(key).second)
        log::warn("cluster: partition ", topic, "/", p, " has no leader: every member of its ISR ", list(now.isr),
                  " is down, and no other replica may lead (no unclean election); it serves again when one returns");
    } else {
      reported_leaderless_.erase(key);
    }
  }
}

}  // namespace txmq::cluster
