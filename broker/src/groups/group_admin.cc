// The administration of consumer groups: CreateGroup, DescribeGroup, ListGroups (the
// dead-letter queue's DlqList and DlqRedrive: dead_letter_admin.cc).

#include "groups/consumer_groups.h"

#include <map>

#include "admin_reads.h"
#include "io_thread.h"
#include "request_checks.h"
#include "webhooks/webhook_notifier.h"

namespace txmq::broker {

consumer_groups::group_snapshot consumer_groups::snapshot(const std::string& name, const group_entry& g) const {
  group_snapshot out{name, g.tracker->topics(), g.tracker->summary(), std::nullopt};
  if (ownership_) out.owned = ownership_();
  return out;
}

// On the admin worker: the group's dead letters are counted a page at a time and its creation
// time read from the store (both scale with the group, not with the request).
result<v1::GroupInfo> consumer_groups::describe(const storage::store& store, const admin_reads& reads,
                                                const group_snapshot& g) {
  v1::GroupInfo info;
  info.set_name(g.name);
  for (auto& t : g.topics) info.add_topics(t);
  TXMQ_TRY(auto dead, count_dead_letters(store, g.name, reads));
  if (auto st = store.load_group(g.name)) info.set_created_ms(st.value().info.created_ms);
  std::uint64_t served_dead = 0;
  for (auto& s : g.summary) {
    auto* p = info.add_partitions();
    p->set_topic(s.topic);
    p->set_partition(s.partition);
    p->set_acked(s.acked);
    p->set_dispatched(s.dispatched);
    // In cluster mode the tracker gave the deliverable end (0 for a partition led elsewhere: its
    // lag is its leader's to report).
    std::uint64_t end = s.end_offset.value_or(0);
    if (!s.end_offset) {
      if (auto t = store.topic(s.topic); t && s.partition < t->partitions.size()) end = t->partitions[s.partition].next_offset;
    }
    p->set_end_offset(end);
    p->set_lag(end > s.acked ? end - s.acked : 0);
    p->set_in_flight(s.in_flight);
    p->set_waiting(s.waiting);
    // In a cluster a partition led elsewhere is its leader's to report (this node's copy of
    // its dead letters may lag).
    const bool served = !g.owned || g.owned->contains({s.topic, s.partition});
    auto d = dead.per_partition.find({s.topic, s.partition});
    const std::uint64_t n = d == dead.per_partition.end() || !served ? 0 : d->second;
    p->set_dead(static_cast<std::uint32_t>(n));
    served_dead += n;
  }
  info.set_dead_letters(g.owned ? served_dead : dead.total);
  if (g.owned) {
    for (const auto& [k, epoch] : *g.owned) {
      auto* s = info.add_served();
      s->set_topic(k.first);
      s->set_partition(k.second);
      s->set_leader_epoch(epoch);
    }
  }
  return info;
}

void consumer_groups::answer_describe(const std::shared_ptr<responder>& c, std::uint64_t corr, group_snapshot g) {
  std::weak_ptr<responder> weak = c;
  reads_.run<v1::GroupInfo>(
      [this, g = std::move(g)] { return describe(store_, reads_, g); },
      [weak, corr](result<v1::GroupInfo> info) {
        auto c = weak.lock();
        if (!c) return;
        if (!info) return c->respond_error(corr, wire_code(info.error()), "describing the group failed: " + info.error().message);
        v1::Frame out;
        out.set_correlation_id(corr);
        *out.mutable_group_info() = std::move(info.value());
        c->respond(std::move(out));
      });
}

void consumer_groups::create_group(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::CreateGroupRequest& req) {
  if (auto bad = bad_name("group", req.group())) return c->respond_error(corr, v1::INVALID_ARGUMENT, *bad);
  if (is_webhook_group(req.group())) return c->respond_error(corr, v1::INVALID_ARGUMENT, reserved_group(req.group()));
  if (!store_.topic(req.topic())) return c->respond_error(corr, v1::UNKNOWN_TOPIC, "no topic '" + req.topic() + "'");
  std::weak_ptr<responder> weak = c;
  with_group(req.group(), {req.topic()}, req.from_latest() ? storage::group_start::latest : storage::group_start::earliest,
             [this, weak, corr, name = req.group()](result<group_entry*> g) {
    auto c = weak.lock();
    if (!c) return;
    if (!g) return c->respond_error(corr, wire_code(g.error()), "group '" + name + "': " + g.error().message);
    answer_describe(c, corr, snapshot(name, *g.value()));
  });
}

void consumer_groups::describe_group(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& group) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no consumer group '" + group + "'");
  answer_describe(c, corr, snapshot(group, it->second));
}

void consumer_groups::list_groups(const std::shared_ptr<responder>& c, std::uint64_t corr) {
  // The trackers' state is copied here (bounded by the groups' partitions); the store is read
  // on the worker.
  std::vector<group_snapshot> all;
  all.reserve(groups_.size());
  for (auto& [name, g] : groups_) all.push_back(snapshot(name, g));
  std::weak_ptr<responder> weak = c;
  reads_.run<v1::Frame>(
      [this, all = std::move(all)]() -> result<v1::Frame> {
        v1::Frame out;
        auto* resp = out.mutable_list_groups_response();
        for (auto& g : all) {
          TXMQ_TRY(auto info, describe(store_, reads_, g));
          *resp->add_groups() = std::move(info);
        }
        return out;
      },
      answer_admin_read(weak, corr, "listing the groups failed: "));
}

}  // namespace txmq::broker
