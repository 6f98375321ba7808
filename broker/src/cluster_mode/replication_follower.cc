// Replication, the follower's side (replication.h): one coroutine per leader node this node
// follows partitions from (a fetch session), on the io thread, with its own connection to it.

#include <algorithm>
#include <array>
#include <span>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "cluster_mode/cluster_node.h"
#include "cluster_mode/fetch_session.h"
#include "cluster_mode/peer_connection.h"
#include "cluster_mode/replication.h"
#include "cluster_mode/routing.h"
#include "txmq/common/address.h"
#include "txmq/common/log.h"
#include "txmq/protocol/errc.h"
#include "txmq/protocol/frame_codec.h"

// GCC 12 warns that the coroutine frame of run_follower is freed by Asio's awaitable frame
// operator delete after Asio's own aligned operator new allocated it: the two are a matched
// pair inside Asio (thread_info_base recycling); GCC only sees one of them inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace txmq::broker::cluster_mode {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// The follower's appends submitted to the store and not yet completed (fsynced): the follower
// fetches the next messages while these are fsynced (a pipeline), and reports `durable`, the end
// of what completed, in its next fetch. Shared with the store's completions, which may run
// after the coroutine ended: they touch only this object (and `waiting` only while the
// coroutine waits on it).
struct append_pipeline {
  std::uint64_t durable = 0;   // fsynced end offset (what the follower reports)
  std::uint64_t appended = 0;  // end offset once every submitted append is applied (what it fetches next)
  std::size_t pending = 0;
  std::optional<error> failed;  // the first failed append since the last reset
  asio::steady_timer* waiting = nullptr;
};

// Waits until fewer than `limit` appends of `p` are pending (0: all completed).
asio::awaitable<void> drain_appends(asio::io_context& io, const std::shared_ptr<append_pipeline>& p, std::size_t limit) {
  while (p->pending > limit) {
    asio::steady_timer wake(io, asio::steady_timer::time_point::max());
    p->waiting = &wake;
    boost::system::error_code ec;
    co_await wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    p->waiting = nullptr;
  }
}

// A store call as an awaitable: its completion (on a store thread) resumes the coroutine on io.
template <class T, class Start>
asio::awaitable<result<T>> await_store(asio::io_context& io, Start start) {
  auto slot = std::make_shared<std::optional<result<T>>>();
  asio::steady_timer wake(io, asio::steady_timer::time_point::max());
  start([&io, slot, &wake](result<T> r) {
    asio::post(io, [slot, &wake, r = std::move(r)]() mutable {
      slot->emplace(std::move(r));
      wake.cancel();
    });
  });
  boost::system::error_code ec;
  co_await wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return std::move(**slot);
}

asio::awaitable<void> pause(asio::io_context& io, std::chrono::milliseconds d) {
  asio::steady_timer t(io, d);
  boost::system::error_code ec;
  co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

}  // namespace

// One partition this node follows (from the session of its leader).
struct replication::follower_task {
  bool stop = false;
  cluster::node_id leader = cluster::k_no_leader;  // its session's; the task ends when it changes
  std::int64_t epoch = -1;                         // the epoch it truncated under
  bool need_truncate = true;
  // The partition's group state is taken whole from each new leader, then followed change by
  // change (a follower may hold changes the new leader never made: they go with the snapshot).
  bool need_group_snapshot = true;
  std::shared_ptr<append_pipeline> pipe = std::make_shared<append_pipeline>();
};

// The fetch session with one leader node: its connection and the coroutine that pulls every
// partition this node follows from it.
struct replication::fetch_session {
  std::shared_ptr<peer_link> link;
  std::string logged_refusal;  // the last connection failure logged (logged once until it changes)
  bool logged_refused_session = false;
};

void replication::follow_tick(const cluster::cluster_state& state) {
  // A partition's leader changed (this node may lead now, or the old leader is dead): drop the
  // old leader's session connection so that its coroutine ends the partition's task at once
  // instead of waiting on a held fetch. An epoch change under the same leader needs no drop:
  // that leader answers the held fetch when its epoch changes.
  for (auto& [k, t] : following_) {
    auto pe = state.partitions.find(k);
    const bool moved = pe == state.partitions.end() || pe->second.state.leader != t->leader;
    if (!moved) continue;
    if (auto s = sessions_.find(t->leader); s != sessions_.end() && s->second->link) s->second->link->close();
  }
  for (const auto& [k, e] : state.partitions) {
    const auto& reps = e.state.replicas;
    if (replicas_of(k.first) <= 1 || e.state.leader == node_.id() || e.state.leader == cluster::k_no_leader ||
        std::find(reps.begin(), reps.end(), node_.id()) == reps.end()) {
      continue;
    }
    // A draining node is about to leave: it follows nothing new (a partition it handed over
    // would otherwise be followed, and the new leader would put it back into the ISR).
    if (following_.contains(k) || drain_) continue;
    auto task = std::make_shared<follower_task>();
    task->leader = e.state.leader;
    following_[k] = task;
    // The consumer groups stop serving the partition: its group state now comes from the leader.
    group_leadership(k, false);
    auto& session = sessions_[e.state.leader];
    if (!session) {
      session = std::make_shared<fetch_session>();
      asio::co_spawn(io_, run_session(e.state.leader, session), asio::detached);
    }
  }
}

asio::awaitable<void> replication::run_session(cluster::node_id leader, std::shared_ptr<fetch_session> s) {
  auto alive = alive_;
  const auto request_deadline = std::chrono::milliseconds(3000);
  using member = std::pair<key, std::shared_ptr<follower_task>>;
  while (*alive) {
    auto st = node_.snapshot();
    if (!st) {
      co_await pause(io_, std::chrono::milliseconds(100));
      continue;
    }
    // The partitions of this session, and those that leave it (their leader changed, this node
    // leads them now, or follows them no more): a leaving task's appends complete before it
    // ends, as a leader of the partition records its epoch only once no follower task of it
    // remains (lead_tick). follow_tick starts it again in its new leader's session.
    std::vector<member> members;
    std::vector<member> leaving;
    for (const auto& [k, t] : following_) {
      if (t->leader != leader) continue;
      auto pe = st->partitions.find(k);
      const bool stays = !t->stop && pe != st->partitions.end() && pe->second.state.leader == leader &&
                         std::find(pe->second.state.replicas.begin(), pe->second.state.replicas.end(), node_.id()) !=
                             pe->second.state.replicas.end();
      (stays ? members : leaving).emplace_back(k, t);
    }
    if (!leaving.empty()) {
      for (auto& [k, t] : leaving) {
        co_await drain_appends(io_, t->pipe, 0);
        if (!*alive) co_return;  // stopped: the replication object may be gone
        if (auto it = following_.find(k); it != following_.end() && it->second == t) following_.erase(it);
      }
      continue;
    }
    if (members.empty()) {
      if (auto it = sessions_.find(leader); it != sessions_.end() && it->second == s) sessions_.erase(it);
      if (s->link) s->link->close();
      co_return;
    }
    if (!s->link || !s->link->is_open()) {
      // Start over from what the logs hold: the appends in flight complete first.
      for (auto& [k, t] : members) co_await drain_appends(io_, t->pipe, 0);
      if (!*alive) co_return;
      s->link.reset();
      const auto address = address_of(*st, leader);
      if (address.empty()) {
        co_await pause(io_, std::chrono::milliseconds(100));
        continue;
      }
      // TLS and the cluster identity when the cluster uses them (peer_connection.h).
      auto link = co_await connect_peer(io_, settings_.peer, address, request_deadline);
      if (!*alive) co_return;
      if (!link) {
        // Logged once per failure: a misconfigured peer (TLS, token) says why, and a dead one is
        // what the control plane is about to notice.
        if (s->logged_refusal != link.error().message) {
          common::log::warn("replication from node ", leader, " (", members.size(), " partition(s)): ",
                            link.error().message);
          s->logged_refusal = link.error().message;
        }
        co_await pause(io_, std::chrono::milliseconds(200));
        continue;
      }
      s->logged_refusal.clear();
      s->link = std::move(link).value();
    }
    auto link = s->link;
    // Each partition ready to fetch: truncated under its current epoch, its group state taken.
    v1::Frame f;
    auto* session_req = f.mutable_replica_fetch();
    session_req->set_node_id(node_.id());
    std::vector<member> fetched;
    for (auto& [k, t] : members) {
      if (!link->is_open()) break;
      auto pe = st->partitions.find(k);
      const auto& e = pe->second.state;
      auto& pipe = *t->pipe;
      const std::string& topic = k.first;
      const auto p = static_cast<std::uint32_t>(k.second);
      if (e.leader_epoch != t->epoch) {
        co_await drain_appends(io_, t->pipe, 0);
        t->need_truncate = t->need_group_snapshot = true;
        t->epoch = e.leader_epoch;
      }
      if (pipe.failed) {
        // An append failed (and every one submitted after it, as their base offsets follow it):
        // ask the leader again where this log diverges.
        co_await drain_appends(io_, t->pipe, 0);
        common::log::warn("partition ", topic, "/", k.second, ": replicated batch not appended: ", pipe.failed->message);
        pipe.failed.reset();
        t->need_truncate = true;
        continue;
      }
      if (t->need_truncate && !co_await truncate_to_leader(k, *t, link)) continue;
      if (!*alive) co_return;
      if (t->need_group_snapshot && store_.has_topic(topic)) {
        if (!co_await take_group_snapshot(k, link, e.leader_epoch)) continue;
        t->need_group_snapshot = false;
      }
      if (!*alive) co_return;
      // At most fetch_pipeline appends in flight; with none, what the store holds is the truth.
      co_await drain_appends(io_, t->pipe, std::max<std::size_t>(settings_.fetch_pipeline, 1) - 1);
      if (!*alive) co_return;
      if (pipe.failed) continue;
      if (pipe.pending == 0) pipe.durable = pipe.appended = store_.has_topic(topic) ? local_end(topic, k.second) : 0;
      auto* req = session_req->add_partition_fetches();
      req->set_node_id(node_.id());
      req->set_topic(topic);
      req->set_partition(p);
      req->set_fetch_offset(pipe.appended);
      req->set_leader_epoch(e.leader_epoch);
      // Below fetch_offset while appends are in flight: the leader then answers at once.
      req->set_durable_offset(pipe.durable);
      if (!t->need_group_snapshot) {
        req->set_groups(true);
        req->set_group_seq(local_group_end(topic, k.second));
      }
      fetched.emplace_back(k, t);
    }
    if (fetched.empty() || !link->is_open()) {
      co_await pause(io_, std::chrono::milliseconds(100));
      continue;
    }
    auto a = co_await link->exchange(f, request_deadline + settings_.fetch_wait);
    if (!*alive) co_return;
    if (!a) {
      link->close();
      co_await pause(io_, std::chrono::milliseconds(100));
      continue;
    }
    if (a.value().has_error() || !a.value().has_replica_fetch_response() ||
        a.value().replica_fetch_response().partition_answers_size() == 0) {
      // A leader of this version answers a session per partition, never as a whole: this one
      // refused it (a leader of a txmq before fetch sessions answers NOT_LEADER for "/0").
      // Mixed versions are not supported in a cluster (docs/cluster.md "Replication").
      if (!s->logged_refused_session) {
        common::log::error("replication from node ", leader, ": the leader refused the fetch session (",
                           a.value().has_error() ? a.value().error().message() : std::string("no partition answers"),
                           "); every node of a cluster must run the same txmq version (fetch sessions)");
        s->logged_refused_session = true;
      }
      co_await pause(io_, std::chrono::milliseconds(1000));
      continue;
    }
    s->logged_refused_session = false;
    // Each partition's batches stay in their stored encoding (split_partition_answer): they go
    // to the store as they are, no message parsed or encoded again (replica_append_request::raw).
    std::map<key, std::pair<v1::ReplicaFetchResponse, std::vector<raw_batch>>> answers;
    bool garbled = false;
    for (const auto& bytes : a.value().replica_fetch_response().partition_answers()) {
      v1::ReplicaFetchResponse ans;
      std::vector<raw_batch> batches;
      if (!split_partition_answer(bytes, ans, batches)) {
        garbled = true;
        break;
      }
      const key k{ans.topic(), static_cast<std::int32_t>(ans.partition())};
      answers.emplace(k, std::pair{std::move(ans), std::move(batches)});
    }
    if (garbled) {
      common::log::warn("replication from node ", leader, ": a partition answer could not be parsed; reconnecting");
      link->close();
      continue;
    }
    auto now = node_.snapshot();
    std::size_t taken = 0;
    for (auto& [k, t] : fetched) {
      auto ans = answers.find(k);
      if (ans == answers.end()) continue;  // not answered: fetched again next time
      // The leader or epoch changed while the fetch was out (this node may lead now): what the
      // old leader sent is not appended (it may be a zombie's write nobody else holds).
      bool unchanged = false;
      if (now) {
        auto pn = now->partitions.find(k);
        unchanged = pn != now->partitions.end() && pn->second.state.leader == t->leader &&
                    pn->second.state.leader_epoch == t->epoch;
      }
      if (!unchanged) continue;
      // FENCED or NOT_LEADER: one of the two views of the partition is stale; the state read
      // from etcd settles it (the partition is fetched again with the next request).
      if (ans->second.first.error_code() != v1::ERROR_CODE_UNSPECIFIED) continue;
      ++taken;
      co_await take_answer(k, *t, ans->second.first, ans->second.second);
      if (!*alive) co_return;
    }
    // Every partition refused (the leader answers such a session at once): wait as after a
    // refused single fetch instead of asking again at once.
    if (taken == 0) co_await pause(io_, std::chrono::milliseconds(100));
  }
}

asio::awaitable<bool> replication::truncate_to_leader(const key& k, follower_task& t,
                                                      const std::shared_ptr<peer_link>& link) {
  const std::string& topic = k.first;
  const auto p = static_cast<std::uint32_t>(k.second);
  co_await drain_appends(io_, t.pipe, 0);
  const bool have_topic = store_.has_topic(topic);
  std::vector<storage::epoch_entry> epochs;
  if (have_topic) {
    auto r = store_.leader_epochs(topic, p);
    if (r) epochs = std::move(r).value();
  }
  v1::Frame q;
  auto* req = q.mutable_replica_fetch();
  req->set_node_id(node_.id());
  req->set_topic(topic);
  req->set_partition(p);
  req->set_leader_epoch(t.epoch);
  req->set_epoch_query(true);
  req->set_last_epoch(epochs.empty() ? -1 : static_cast<std::int64_t>(epochs.back().epoch));
  auto a = co_await link->exchange(q, std::chrono::milliseconds(3000));
  if (!a || !a.value().has_replica_fetch_response()) {
    if (!a) link->close();
    co_return false;
  }
  const auto& ans = a.value().replica_fetch_response();
  if (have_topic) {
    const std::uint64_t end = local_end(topic, k.second);
    std::uint64_t target = std::min(end, ans.epoch_end_offset());
    if (ans.epoch_end_epoch() >= 0) {
      // Where the epoch the leader answered ends in this log (KIP-279: it may be older
      // than the follower's last one).
      auto own = storage::end_offset_for_epoch(epochs, static_cast<std::uint32_t>(ans.epoch_end_epoch()), end);
      target = std::min(target, own.end_offset);
    }
    // Never below this log's own start (retention, or a log restarted at the leader's
    // start with no epoch entry yet): what is below is gone, and the truncation would
    // move the start back over offsets this log does not hold.
    storage::read_request sr;
    sr.topic = topic;
    sr.partition = p;
    sr.max_messages = 0;
    if (auto rs = store_.read(sr)) target = std::max(target, std::min(end, rs.value().start_offset));
    if (target < end) {
      common::log::info("partition ", topic, "/", k.second, ": truncating from ", end, " to ", target, " (leader ",
                        t.leader, ", epoch ", t.epoch, ")");
      auto r = co_await await_store<std::uint64_t>(io_, [&](auto done) { store_.truncate(topic, p, target, done); });
      if (!r) {
        common::log::error("partition ", topic, "/", k.second, ": truncation failed: ", r.error().message);
        co_return false;
      }
    }
  }
  t.need_truncate = false;
  t.pipe->durable = t.pipe->appended = store_.has_topic(topic) ? local_end(topic, k.second) : 0;
  co_return true;
}

asio::awaitable<void> replication::take_answer(const key& k, follower_task& t, const v1::ReplicaFetchResponse& ans,
                                               std::vector<raw_batch>& batches) {
  const std::string& topic = k.first;
  const std::int32_t partition = k.second;
  const auto p = static_cast<std::uint32_t>(partition);
  auto pipe = t.pipe;
  if (!store_.has_topic(topic) && ans.partitions() > 0) {
    // The follower creates the topic before it appends anything: with the retention the
    // topic's etcd record sets (docs/cluster.md "Topic settings"; the store's auto-creation
    // on the first message would take the broker's defaults), and because an empty partition
    // (no message yet) may already carry group or transaction changes (a transaction homed
    // here, docs/cluster.md "Transactions") that need the topic. This answer's messages are
    // fetched again.
    storage::topic_config cfg;
    cfg.name = topic;
    cfg.partitions = ans.partitions();
    cfg.retention_ms = settings_.default_retention_ms;
    cfg.retention_bytes = settings_.default_retention_bytes;
    if (state_) {
      for (const auto& tc : state_->topics) {
        if (tc.name != topic) continue;
        if (tc.retention_ms > 0) cfg.retention_ms = tc.retention_ms;
        if (tc.retention_bytes > 0) cfg.retention_bytes = tc.retention_bytes;
      }
    }
    auto made = co_await await_store<storage::topic_info>(io_, [&](auto done) { store_.create_topic(cfg, done); });
    if (!made && !store_.has_topic(topic)) {
      common::log::warn("partition ", topic, "/", partition, ": creating the followed topic failed: ", made.error().message);
      co_await pause(io_, std::chrono::milliseconds(500));
    }
    co_return;
  }
  if (batches.empty() && ans.log_start() > pipe->appended) {
    // Retention on the leader removed messages this log never got: it cannot continue from
    // its own end. Discard it and start where the leader's log starts (Kafka's log start
    // offset); the group state stays the leader's snapshot and changes.
    co_await drain_appends(io_, pipe, 0);
    common::log::warn("partition ", topic, "/", partition, ": this log ends at ", pipe->appended,
                      ", below the leader's start offset ", ans.log_start(),
                      ": discarding it and copying the leader's log from there");
    const auto start = ans.log_start();
    auto r = co_await await_store<std::uint64_t>(io_, [&](auto done) {
      store_.restart_log(topic, p, start, ans.partitions(), done);
    });
    if (!r) {
      common::log::error("partition ", topic, "/", partition, ": restarting the log failed: ", r.error().message);
      co_return;
    }
    pipe->durable = pipe->appended = start;
    co_return;
  }
  if (batches.empty()) {
    // No messages; group changes may still have come (acks of messages fetched before).
    if (!t.need_group_snapshot && !co_await apply_group_part(k, ans)) t.need_group_snapshot = true;
    // Nothing new: wait for the appends in flight, so that the next fetch reports them (and
    // is held by the leader until it has more).
    co_await drain_appends(io_, pipe, 0);
    co_return;
  }
  for (auto& b : batches) {
    if (b.messages.base_offset != pipe->appended || b.messages.count == 0) {
      pipe->failed = error(protocol::errc::internal, "the leader answered offset " +
                                                         std::to_string(b.messages.base_offset) + " to a fetch from " +
                                                         std::to_string(pipe->appended));
      break;
    }
    storage::replica_append_request ra;
    ra.topic = topic;
    ra.partition = p;
    ra.base_offset = b.messages.base_offset;
    ra.leader_epoch = static_cast<std::uint32_t>(b.leader_epoch);
    const std::uint64_t count = b.messages.count;
    // The leader's stored bytes, stored as they are (moved out of the answer).
    ra.raw = std::move(b.messages);
    if (ans.partitions() > 0) ra.auto_create_partitions = ans.partitions();
    pipe->appended = ra.base_offset + count;
    ++pipe->pending;
    store_.replica_append(std::move(ra), [&io = io_, pipe](result<std::uint64_t> r) {  // on a store thread
      asio::post(io, [pipe, r = std::move(r)] {
        --pipe->pending;
        if (r) {
          pipe->durable = std::max(pipe->durable, r.value());
        } else if (!pipe->failed) {
          pipe->failed = r.error();
        }
        if (pipe->waiting) pipe->waiting->cancel();
      });
    });
  }
  if (!pipe->failed && !t.need_group_snapshot && !co_await apply_group_part(k, ans)) t.need_group_snapshot = true;
}

asio::awaitable<bool> replication::take_group_snapshot(const key& k, std::shared_ptr<peer_link> sock,
                                                      std::int64_t epoch) {
  // Staged in memory page by page and installed in one store write once the last page came:
  // a follower never holds (or serves after a failover) half of the leader's group state.
  v1::GroupSnapshot staged;
  std::uint64_t from = 0;
  std::uint64_t id = 0;
  std::size_t pages = 0;
  do {
    v1::Frame q;
    auto* req = q.mutable_replica_fetch();
    req->set_node_id(node_.id());
    req->set_topic(k.first);
    req->set_partition(static_cast<std::uint32_t>(k.second));
    req->set_leader_epoch(epoch);
    req->set_group_snapshot(true);
    req->set_group_snapshot_from(from);
    req->set_group_snapshot_id(id);
    auto a = co_await sock->exchange(q, std::chrono::milliseconds(10'000));
    if (!a) {
      sock->close();
      co_return false;
    }
    if (!a.value().has_replica_fetch_response() || a.value().replica_fetch_response().group_snapshot_needed()) co_return false;
    auto& ans = *a.value().mutable_replica_fetch_response();
    if (from != 0 && ans.group_snapshot_id() != id) co_return false;  // another snapshot: start over
    id = ans.group_snapshot_id();
    staged.set_next_seq(ans.group_snapshot().next_seq());
    for (auto& part : *ans.mutable_group_snapshot()->mutable_groups()) {
      // A group cut between two pages continues in the next one.
      if (staged.groups_size() > 0 && staged.groups(staged.groups_size() - 1).group() == part.group()) {
        auto* last = staged.mutable_groups(staged.groups_size() - 1);
        for (auto& d : *part.mutable_deliveries()) *last->add_deliveries() = std::move(d);
        for (auto& d : *part.mutable_dead()) *last->add_dead() = std::move(d);
      } else {
        *staged.add_groups() = std::move(part);
      }
    }
    for (auto& t : *ans.mutable_group_snapshot()->mutable_txs()) staged.add_txs(std::move(t));
    from = ans.group_snapshot_next();
    ++pages;
  } while (from != 0 && *alive_);
  const std::size_t groups = static_cast<std::size_t>(staged.groups_size());
  auto r = co_await await_store<std::uint64_t>(io_, [&](auto done) {
    store_.install_group_snapshot(k.first, static_cast<std::uint32_t>(k.second), std::move(staged), done);
  });
  if (!r) {
    common::log::error("partition ", k.first, "/", k.second, ": installing the leader's group snapshot failed: ",
                       r.error().message);
    co_return false;
  }
  common::log::info("partition ", k.first, "/", k.second, ": group state of ", groups, " group(s) taken from the leader in ",
                    pages, " page(s) at change ", r.value());
  co_return true;
}

asio::awaitable<bool> replication::apply_group_part(const key& k, const v1::ReplicaFetchResponse& ans) {
  if (ans.group_snapshot_needed()) co_return false;
  if (ans.group_changes().empty()) co_return true;
  std::vector<v1::GroupChange> changes(ans.group_changes().begin(), ans.group_changes().end());
  auto r = co_await await_store<std::uint64_t>(io_, [&](auto done) {
    store_.apply_group_changes(k.first, static_cast<std::uint32_t>(k.second), std::move(changes), done);
  });
  if (!r) {
    common::log::warn("partition ", k.first, "/", k.second, ": group changes not applied (", r.error().message,
                      "): taking a snapshot");
    co_return false;
  }
  co_return true;
}

void replication::stop() {
  if (!*alive_) return;
  *alive_ = false;
  snapshot_reads_.stop();  // waits for a snapshot being read; drops those queued
  for (auto& [k, t] : following_) t->stop = true;
  for (auto& [leader, session] : sessions_) {
    if (session->link) session->link->close();
  }
  for (auto& w : waiters_) w.done(error(protocol::errc::shutting_down, "broker is shutting down"));
  waiters_.clear();
}

}  // namespace txmq::broker::cluster_mode
