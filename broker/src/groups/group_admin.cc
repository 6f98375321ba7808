// The administration of consumer groups: CreateGroup, DescribeGroup, ListGroups, and the
// dead-letter queue's DlqList and DlqRedrive.

#include "groups/consumer_groups.h"

#include <map>

#include "io_thread.h"
#include "request_checks.h"
#include "webhooks/webhook_notifier.h"

namespace txmq::broker {

namespace {
constexpr std::uint32_t k_default_dlq_list = 100;
}  // namespace

v1::GroupInfo consumer_groups::describe(const std::string& name, group_entry& g) {
  v1::GroupInfo info;
  info.set_name(name);
  for (auto& t : g.tracker->topics()) info.add_topics(t);
  std::map<std::pair<std::string, std::uint32_t>, std::uint32_t> dead;
  std::uint64_t dead_total = 0;
  if (auto d = store_.dead_letters(name, 1'000'000)) {
    for (auto& l : d.value()) {
      ++dead[{l.topic, l.partition}];
      ++dead_total;
    }
  }
  if (auto st = store_.load_group(name)) info.set_created_ms(st.value().info.created_ms);
  for (auto& s : g.tracker->summary()) {
    auto* p = info.add_partitions();
    p->set_topic(s.topic);
    p->set_partition(s.partition);
    p->set_acked(s.acked);
    p->set_dispatched(s.dispatched);
    std::uint64_t end = 0;
    if (auto t = store_.topic(s.topic); t && s.partition < t->partitions.size()) end = t->partitions[s.partition].next_offset;
    p->set_end_offset(end);
    p->set_lag(end > s.acked ? end - s.acked : 0);
    p->set_in_flight(s.in_flight);
    p->set_waiting(s.waiting);
    p->set_dead(dead[{s.topic, s.partition}]);
  }
  info.set_dead_letters(dead_total);
  return info;
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
    v1::Frame out;
    out.set_correlation_id(corr);
    *out.mutable_group_info() = describe(name, *g.value());
    c->respond(std::move(out));
  });
}

void consumer_groups::describe_group(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& group) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no consumer group '" + group + "'");
  v1::Frame out;
  out.set_correlation_id(corr);
  *out.mutable_group_info() = describe(group, it->second);
  c->respond(std::move(out));
}

void consumer_groups::list_groups(const std::shared_ptr<responder>& c, std::uint64_t corr) {
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* resp = out.mutable_list_groups_response();
  for (auto& [name, g] : groups_) *resp->add_groups() = describe(name, g);
  c->respond(std::move(out));
}

void consumer_groups::dlq_list(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::DlqListRequest& req) {
  if (!groups_.count(req.group())) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no consumer group '" + req.group() + "'");
  const std::size_t limit = list_limit(req.limit(), k_default_dlq_list);
  std::optional<storage::message_ref> after;
  if (!req.after_topic().empty()) after = storage::message_ref{req.after_topic(), req.after_partition(), req.after_offset()};
  // One more than asked: whether another page follows.
  auto d = store_.dead_letters(req.group(), limit + 1, after);
  if (!d) return c->respond_error(corr, wire_code(d.error()), "reading dead letters failed: " + d.error().message);
  v1::Frame out;
  out.set_correlation_id(corr);
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
    // Dead letters carry their messages: the answer ends before it would pass the frame limit
    // (and says that more follow).
    if (!budget.take(entry.ByteSizeLong())) {
      resp->set_more(true);
      break;
    }
    *resp->add_dead_letters() = std::move(entry);
  }
  c->respond(std::move(out));
}

void consumer_groups::dlq_redrive(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& group) {
  if (!groups_.count(group)) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no consumer group '" + group + "'");
  auto d = store_.dead_letters(group, 1'000'000);
  if (!d) return c->respond_error(corr, wire_code(d.error()), "reading dead letters failed: " + d.error().message);
  storage::group_update u;
  u.group = group;
  u.sync = true;
  for (auto& l : d.value()) u.redrive.push_back({l.topic, l.partition, l.offset});
  auto refs = u.redrive;
  std::weak_ptr<responder> weak = c;
  store_.update_group(std::move(u), on_io<storage::group_update_result>(io_, [this, weak, corr, group, refs](result<storage::group_update_result> r) {
    auto c = weak.lock();
    if (r) {
      auto it = groups_.find(group);
      if (it != groups_.end()) {
        it->second.tracker->redriven(refs, now_ms());
        serve_waiters(it->second);
      }
    }
    if (!c) return;
    if (!r) return c->respond_error(corr, wire_code(r.error()), "redrive failed: " + r.error().message);
    v1::Frame out;
    out.set_correlation_id(corr);
    out.mutable_dlq_redrive_response()->set_redriven(refs.size());
    c->respond(std::move(out));
  }));
}

}  // namespace txmq::broker
