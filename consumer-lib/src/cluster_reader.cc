#include "cluster_reader.h"

#include <algorithm>

namespace txmq::consumer::detail {
namespace {

using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long fetch() waits past a long poll's own wait for its answer to travel back. A node that
// has not answered by then (down, reconnecting) keeps its poll running but no longer holds up
// fetch().
constexpr milliseconds k_answer_grace{1000};
// After a failed Metadata refresh, the next one is tried this soon.
constexpr milliseconds k_refresh_retry{200};

}  // namespace

cluster_reader::cluster_reader(std::shared_ptr<client::leader_router> router, const consumer_options& options)
    : router_(std::move(router)),
      group_(options.group),
      topics_(options.topics),
      ack_deadline_(options.ack_deadline),
      request_timeout_(router_->bootstrap()->options().request_timeout),
      refresh_every_(options.metadata_refresh),
      log_(options.log),
      next_refresh_(steady::now() + options.metadata_refresh) {}

void cluster_reader::log(const std::string& text) const {
  if (log_) log_(text);
}

std::map<std::string, std::vector<std::string>> cluster_reader::plan() const {
  std::map<std::string, std::vector<std::string>> out;
  const auto m = router_->metadata();
  if (!m) return out;
  for (const auto& topic : topics_) {
    for (const auto& t : m->topics()) {
      if (t.name() != topic) continue;
      for (const auto& p : t.partition_info()) {
        if (p.leader_address().empty()) continue;  // no leader now: nothing to read until it has one
        auto& topics = out[p.leader_address()];
        if (std::find(topics.begin(), topics.end(), topic) == topics.end()) topics.push_back(topic);
      }
    }
  }
  return out;
}

void cluster_reader::refresh_if_due() {
  {
    std::lock_guard lock(mutex_);
    if (closed_ || refreshing_) return;
    if (!refresh_now_ && steady::now() < next_refresh_) return;
    refreshing_ = true;
    refresh_now_ = false;
  }
  router_->async_refresh(
      [self = shared_from_this()](client::result<void> r) {
        {
          std::lock_guard lock(self->mutex_);
          self->refreshing_ = false;
          self->next_refresh_ = steady::now() + (r ? self->refresh_every_ : k_refresh_retry);
          if (!r) self->refresh_now_ = true;
        }
        if (!r) self->log("metadata refresh for group '" + self->group_ + "' failed: " + r.error().to_string());
        self->cv_.notify_all();
      },
      request_timeout_);
}

void cluster_reader::stale() {
  {
    std::lock_guard lock(mutex_);
    refresh_now_ = true;
  }
  refresh_if_due();
}

void cluster_reader::start_fetch(const std::string& address, const std::vector<std::string>& topics, std::uint32_t max,
                                 milliseconds wait) {
  v1::Frame f;
  auto* r = f.mutable_fetch();
  r->set_group(group_);
  for (const auto& t : topics) r->add_topics(t);
  r->set_max_messages(max);
  r->set_max_wait_ms(static_cast<std::uint32_t>(wait.count()));
  r->set_ack_deadline_ms(static_cast<std::uint32_t>(ack_deadline_.count()));
  router_->connection_for(address)->async_request(
      std::move(f), [self = shared_from_this(), address](client::result<v1::Frame> a) { self->on_answer(address, std::move(a)); },
      wait + request_timeout_);
}

void cluster_reader::on_answer(const std::string& address, client::result<v1::Frame> r) {
  bool refresh = false;
  {
    std::lock_guard lock(mutex_);
    in_flight_[address] = false;
    if (closed_) return;
    if (!r) {
      refresh = true;
      // A node that no longer leads (UNKNOWN_TOPIC: it never had the topic; NOT_LEADER) only
      // means the metadata is stale: the refresh moves the poll to the new leader.
      const bool moved = r.error().is(protocol::errc::unknown_topic) || r.error().is(protocol::errc::not_leader);
      if (!moved && !failure_) failure_ = client::error(r.error().code, "fetch from " + address + ": " + r.error().message);
    } else if (!r.value().has_fetch_response()) {
      if (!failure_) {
        failure_ = client::error(client::errc::unexpected_response,
                                 "node " + address + " answered a FetchRequest of group '" + group_ + "' with frame body " +
                                     std::to_string(static_cast<int>(r.value().body_case())));
      }
    } else {
      ++answers_;
      for (auto& d : *r.value().mutable_fetch_response()->mutable_deliveries()) {
        delivery x;
        x.message = std::move(*d.mutable_message());
        x.deadline = std::chrono::system_clock::time_point(milliseconds(d.deadline_ms()));
        x.node = address;
        ready_.push_back(std::move(x));
      }
    }
  }
  cv_.notify_all();
  if (refresh) stale();
}

client::result<std::vector<delivery>> cluster_reader::fetch(std::uint32_t max, milliseconds wait) {
  refresh_if_due();
  const auto targets = plan();
  std::unique_lock lock(mutex_);
  if (closed_) return client::error(client::errc::closed, "the consumer was closed");
  const auto answers_before = answers_;
  if (ready_.empty()) {
    if (targets.empty()) {
      // No partition of the topics has a leader now (a topic just made, its leaders down): wait
      // for the metadata to name one rather than spin.
      refresh_now_ = true;
      lock.unlock();
      refresh_if_due();
      lock.lock();
      cv_.wait_for(lock, wait, [&] { return closed_ || !ready_.empty(); });
    } else {
      std::vector<std::string> started;
      for (const auto& [address, topics] : targets) {
        if (in_flight_[address]) continue;
        // Not to a node that was connected and is not now (down, restarting): a poll queued
        // for it would be written when it is back and could time out here right after, while
        // the node leases the deliveries it made for it to this live consumer until their ack
        // deadline. A new connection (never connected yet) is waited for, as on a first fetch.
        const auto conn = router_->connection_for(address);
        if (!conn->is_connected() && conn->connects() > 0) continue;
        in_flight_[address] = true;
        started.push_back(address);
        lock.unlock();
        start_fetch(address, topics, max, wait);
        lock.lock();
      }
      // Polls left running by an earlier call (one stuck on a node that is down) do not hold
      // this one up: it waits for its own, or for any deliveries. With none of its own (every
      // leader's poll still running), it waits for those.
      if (started.empty()) {
        for (const auto& [address, running] : in_flight_) {
          if (running) started.push_back(address);
        }
      }
      const auto own_in_flight = [&] {
        return std::any_of(started.begin(), started.end(), [&](const auto& a) { return in_flight_[a]; });
      };
      if (started.empty()) {
        // Every leader is unreachable now: wait as a long poll would rather than spin.
        cv_.wait_for(lock, wait, [&] { return closed_ || !ready_.empty(); });
      } else {
        cv_.wait_until(lock, steady::now() + wait + k_answer_grace,
                       [&] { return closed_ || !ready_.empty() || !own_in_flight(); });
      }
    }
  }
  std::vector<delivery> out;
  while (!ready_.empty() && out.size() < max) {
    out.push_back(std::move(ready_.front()));
    ready_.pop_front();
  }
  auto failure = std::move(failure_);
  failure_.reset();
  const bool nothing_answered = answers_ == answers_before;
  lock.unlock();
  // A failure is the caller's business only when nothing else answered (it backs off then).
  if (out.empty() && failure && nothing_answered) return *failure;
  if (failure) log("group '" + group_ + "': " + failure->to_string());
  return out;
}

std::shared_ptr<client::connection> cluster_reader::connection_for(const delivery_ref& ref) {
  if (!ref.node.empty()) return router_->connection_for(ref.node);
  if (const auto m = router_->metadata()) {
    for (const auto& t : m->topics()) {
      if (t.name() != ref.topic) continue;
      for (const auto& p : t.partition_info()) {
        if (p.partition() == ref.partition && !p.leader_address().empty()) return router_->connection_for(p.leader_address());
      }
    }
  }
  return router_->bootstrap();
}

void cluster_reader::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    ready_.clear();
  }
  cv_.notify_all();
}

}  // namespace txmq::consumer::detail
