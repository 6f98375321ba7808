// The administration of consumer groups: CreateGroup, DescribeGroup, ListGroups, and the
// dead-letter queue's DlqList and DlqRedrive.

#include "groups/consumer_groups.h"

#include <map>

#include "admin_reads.h"
#include "io_thread.h"
#include "request_checks.h"
#include "webhooks/webhook_notifier.h"

namespace txmq::broker {

namespace {
constexpr std::uint32_t k_default_dlq_list = 100;
}  // namespace

consumer_groups::group_snapshot consumer_groups::snapshot(const std::string& name, const group_entry& g) const {
  return group_snapshot{name, g.tracker->topics(), g.tracker->summary()};
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
    auto d = dead.per_partition.find({s.topic, s.partition});
    p->set_dead(d == dead.per_partition.end() ? 0 : static_cast<std::uint32_t>(d->second));
  }
  info.set_dead_letters(dead.total);
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

void consumer_groups::dlq_list(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::DlqListRequest& req) {
  if (!groups_.count(req.group())) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no consumer group '" + req.group() + "'");
  const std::size_t limit = list_limit(req.limit(), k_default_dlq_list);
  std::optional<storage::message_ref> after;
  if (!req.after_topic().empty()) after = storage::message_ref{req.after_topic(), req.after_partition(), req.after_offset()};
  std::weak_ptr<responder> weak = c;
  // A page reads up to `limit` messages: on the worker.
  reads_.run<v1::Frame>(
      [this, group = req.group(), limit, after]() -> result<v1::Frame> {
        // One more than asked: whether another page follows.
        auto d = store_.dead_letters(group, limit + 1, after);
        if (!d) return error(d.error().code, "reading dead letters failed: " + d.error().message);
        v1::Frame out;
        auto* resp = out.mutable_dlq_list_response();
        resp->set_more(d.value().size() > limit);
        if (d.value().size() > limit) d.value().resize(limit);
        answer_budget budget(settings_.max_frame_bytes);
        for (auto& l : d.value()) {
          v1::DeadLetter entry;
          storage::read_request rr;
          rr.topic = l.topic;
          rr.partition = l.partition;
          rr.from_offset = l.offset;
          rr.max_messages = 1;
          if (auto r = store_.read(rr); r && !r.value().messages.empty() && r.value().messages.front().offset() == l.offset) {
            *entry.mutable_message() = std::move(r.value().messages.front());
          } else {
            entry.mutable_message()->set_topic(l.topic);
            entry.mutable_message()->set_partition(l.partition);
            entry.mutable_message()->set_offset(l.offset);
          }
          entry.set_attempts(l.attempts);
          entry.set_dead_at_ms(l.dead_at_ms);
          entry.set_reason(l.reason);
          // Dead letters carry their messages: the answer ends before it would pass the frame
          // limit (and says that more follow).
          if (!budget.take(entry.ByteSizeLong())) {
            resp->set_more(true);
            break;
          }
          *resp->add_dead_letters() = std::move(entry);
        }
        return out;
      },
      answer_admin_read(weak, corr));
}

void consumer_groups::dlq_redrive(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& group) {
  if (!groups_.count(group)) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no consumer group '" + group + "'");
  redrive_page(c, corr, group, std::nullopt, 0);
}

// One page of a redrive: the worker reads up to k_admin_scan_page dead letters after `after`,
// the io thread writes them back to waiting (one synced update per page) and asks for the next
// page. A letter dead again meanwhile sorts before the cursor, so the redrive ends.
void consumer_groups::redrive_page(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& group,
                                   std::optional<storage::message_ref> after, std::uint64_t done_so_far) {
  std::weak_ptr<responder> weak = c;
  auto answer = [weak, corr](std::uint64_t redriven) {
    auto c = weak.lock();
    if (!c) return;
    v1::Frame out;
    out.set_correlation_id(corr);
    out.mutable_dlq_redrive_response()->set_redriven(redriven);
    c->respond(std::move(out));
  };
  reads_.run<std::vector<storage::dead_letter>>(
      [this, group, after] { return store_.dead_letters(group, k_admin_scan_page, after); },
      [this, weak, corr, group, done_so_far, answer](result<std::vector<storage::dead_letter>> d) {
        if (!d) {
          if (auto c = weak.lock()) c->respond_error(corr, wire_code(d.error()), "reading dead letters failed: " + d.error().message);
          return;
        }
        if (d.value().empty() || !groups_.count(group)) return answer(done_so_far);
        storage::group_update u;
        u.group = group;
        u.sync = true;
        for (auto& l : d.value()) u.redrive.push_back({l.topic, l.partition, l.offset});
        const bool last_page = d.value().size() < k_admin_scan_page;
        auto refs = u.redrive;
        store_.update_group(std::move(u), on_io<storage::group_update_result>(io_, [this, weak, corr, group, refs, last_page,
                                                                                  done_so_far, answer](result<storage::group_update_result> r) {
          if (r) {
            auto it = groups_.find(group);
            if (it != groups_.end()) {
              it->second.tracker->redriven(refs, now_ms());
              serve_waiters(it->second);
            }
          }
          auto c = weak.lock();
          if (!c) return;
          if (!r) return c->respond_error(corr, wire_code(r.error()), "redrive failed: " + r.error().message);
          const std::uint64_t total = done_so_far + refs.size();
          if (last_page) return answer(total);
          redrive_page(c, corr, group, refs.back(), total);
        }));
      });
}

}  // namespace txmq::broker
