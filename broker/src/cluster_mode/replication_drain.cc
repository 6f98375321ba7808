// Replication, a draining leader (replication.h drain(), docs/cluster.md "Draining a broker"):
// on SIGTERM the node hands the replicated partitions it leads to caught-up ISR members before
// it leaves, so that producers move at once instead of after the controller notices it gone.

#include <algorithm>

#include "cluster_mode/cluster_node.h"
#include "cluster_mode/replication.h"
#include "io_thread.h"
#include "txmq/common/log.h"
#include "txmq/protocol/errc.h"

namespace txmq::broker::cluster_mode {

namespace asio = boost::asio;

void replication::drain(std::chrono::milliseconds wait, std::function<void()> done) {
  if (drain_) return done();
  drain_ = std::make_unique<drain_state>();
  drain_->deadline = clock::now() + wait;
  drain_->done = std::move(done);
  common::log::info("draining: handing the leaderships of replicated partitions over to in-sync replicas");
  // The followers parked on a led partition learn the end at once.
  for (auto& [k, lp] : leading_) {
    (void)lp;
    wake_parked(k, true);
  }
  drain_step();
}

void replication::drain_step() {
  if (!drain_ || !drain_->done) return;  // not draining, or finished
  state_ = node_.snapshot();
  const auto now = clock::now();
  const bool late = now >= drain_->deadline;
  for (auto& [k, lp] : leading_) {
    if (drain_->handled.contains(k)) continue;
    const auto* e = entry_of(k);
    if (!e || e->state.leader != node_.id() || !lp.epoch_recorded || lp.epoch != e->state.leader_epoch) {
      drain_->handled.insert(k);
      continue;
    }
    // Ready when every live ISR follower has fsynced the whole log (no new write comes now):
    // the new leader then has every message, acknowledged or not, and nothing is truncated.
    const std::uint64_t end = local_end(k.first, k.second);
    bool caught_up = true;
    for (auto m : e->state.isr) {
      if (m == node_.id()) continue;
      auto f = lp.followers.find(m);
      if (f == lp.followers.end() || !f->second.reported || f->second.durable < end) caught_up = false;
    }
    // Late: the ISR followers hold every acknowledged write whatever they reported since.
    if (caught_up || late) hand_over(k);
  }
  if (drain_->writes_pending > 0 && !late) return;
  bool all = true;
  for (auto& [k, lp] : leading_) {
    (void)lp;
    if (!drain_->handled.contains(k)) all = false;
  }
  if (!all && !late) return;
  // Done (or out of time): produce waits still open go to the new leader.
  auto waiters = std::move(waiters_);
  waiters_.clear();
  for (auto& w : waiters) {
    w.done(error(protocol::errc::not_leader,
                 "node " + std::to_string(node_.id()) + " is shutting down and handed its leadership of '" + w.topic +
                     "' over; resend the same ids to the new leader (refresh metadata)"));
  }
  auto done = std::move(drain_->done);
  drain_->done = nullptr;
  if (done) done();
}

void replication::hand_over(const key& k) {
  drain_->handled.insert(k);
  const auto* e = entry_of(k);
  auto lp = leading_.find(k);
  if (!e || lp == leading_.end() || !state_) return;
  // The live ISR member that fsynced the most (any ISR member holds every acknowledged write).
  cluster::node_id next = cluster::k_no_leader;
  std::uint64_t best = 0;
  for (auto m : e->state.isr) {
    if (m == node_.id()) continue;
    const bool live = std::any_of(state_->nodes.begin(), state_->nodes.end(), [&](const auto& n) { return n.id == m; });
    if (!live) continue;
    auto f = lp->second.followers.find(m);
    const std::uint64_t durable = f == lp->second.followers.end() || !f->second.reported ? 0 : f->second.durable;
    if (next == cluster::k_no_leader || durable > best) {
      next = m;
      best = durable;
    }
  }
  if (next == cluster::k_no_leader) {
    common::log::warn("draining: partition ", k.first, "/", k.second,
                      " has no other live in-sync replica; it has no leader once this node leaves");
    return;
  }
  auto state = e->state;
  state.leader = next;
  state.leader_epoch += 1;
  std::erase(state.isr, node_.id());
  common::log::info("draining: partition ", k.first, "/", k.second, " handed over to node ", next, " at epoch ",
                    state.leader_epoch, " (written to etcd at revision ", e->mod_revision, ")");
  ++drain_->writes_pending;
  std::weak_ptr<bool> alive = alive_;
  node_.write_isr(k.first, k.second, state, e->mod_revision, [this, alive, k](result<void> r) {  // cluster thread
    asio::post(io_, [this, alive, k, r = std::move(r)] {
      if (alive.expired() || !*alive.lock() || !drain_) return;
      --drain_->writes_pending;
      if (!r) {
        common::log::warn("draining: partition ", k.first, "/", k.second, " not handed over: ", r.error().message);
      }
      drain_step();
    });
  });
}

}  // namespace txmq::broker::cluster_mode
