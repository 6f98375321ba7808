// The dead-letter queue's administration: DlqList and DlqRedrive.
//
// Cluster mode (docs/cluster.md "Dead letters and admin reads"): a group's dead letters live
// with their partition, and the partition's leader is the one node whose copy is complete and
// whose changes replicate. So a node lists and redrives only the dead letters of the partitions
// it leads (ready under its epoch: `ownership_`), names them with their epochs in the answer
// (`served`), and answers a redrive once each partition's ISR holds it (the Ack gate). The
// clients (client/cluster_admin.h, hence the CLI) ask every leader and check that each
// partition was served by its leader at its current epoch.

#include <algorithm>

#include "groups/consumer_groups.h"
#include "io_thread.h"
#include "request_checks.h"

namespace txmq::broker {

namespace {

constexpr std::uint32_t k_default_dlq_list = 100;

template <class Response>
void add_served(const consumer_groups::owned_partitions& owned, Response& out) {
  for (const auto& [k, epoch] : owned) {
    auto* s = out.add_served();
    s->set_topic(k.first);
    s->set_partition(k.second);
    s->set_leader_epoch(epoch);
  }
}

bool served_here(const std::optional<consumer_groups::owned_partitions>& owned, const std::string& topic,
                 std::uint32_t partition) {
  return !owned || owned->contains({topic, partition});
}

}  // namespace

void consumer_groups::dlq_list(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::DlqListRequest& req) {
  std::optional<owned_partitions> owned;
  if (ownership_) owned = ownership_();
  // In a cluster a node that leads no partition of the group may hold no tracker of it: the
  // store (replicated group records) says whether the group exists.
  const bool tracked = groups_.count(req.group()) != 0;
  if (!tracked && !owned) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no consumer group '" + req.group() + "'");
  const std::size_t limit = list_limit(req.limit(), k_default_dlq_list);
  std::optional<storage::message_ref> after;
  if (!req.after_topic().empty()) after = storage::message_ref{req.after_topic(), req.after_partition(), req.after_offset()};
  std::weak_ptr<responder> weak = c;
  // A page reads up to `limit` messages: on the worker.
  reads_.run<v1::Frame>(
      [this, group = req.group(), limit, after, owned = std::move(owned), tracked]() -> result<v1::Frame> {
        if (!tracked && !store_.load_group(group)) return error(protocol::errc::unknown_group, "no consumer group '" + group + "'");
        // One more than asked: whether another page follows. In a cluster the store's pages are
        // filtered to the partitions led here, so they are read until enough are kept.
        std::vector<storage::dead_letter> kept;
        auto cursor = after;
        for (;;) {
          const std::size_t page_size = owned ? k_admin_scan_page : limit + 1;
          auto d = store_.dead_letters(group, page_size, cursor);
          if (!d) return error(d.error().code, "reading dead letters failed: " + d.error().message);
          for (auto& l : d.value()) {
            if (served_here(owned, l.topic, l.partition)) kept.push_back(std::move(l));
          }
          if (!owned || kept.size() > limit || d.value().size() < page_size) break;
          const auto& last = d.value().back();
          cursor = storage::message_ref{last.topic, last.partition, last.offset};
          if (reads_.stopping()) return error(protocol::errc::shutting_down, "the broker is shutting down");
        }
        v1::Frame out;
        auto* resp = out.mutable_dlq_list_response();
        resp->set_more(kept.size() > limit);
        if (kept.size() > limit) kept.resize(limit);
        if (owned) add_served(*owned, *resp);
        answer_budget budget(settings_.max_frame_bytes);
        for (auto& l : kept) {
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
  if (!groups_.count(group)) {
    if (!ownership_) return c->respond_error(corr, v1::UNKNOWN_GROUP, "no consumer group '" + group + "'");
    // Cluster mode: a node without a tracker of the group leads none of its partitions (a
    // leader reloads every group of a partition it starts leading), so it redrives nothing.
    std::weak_ptr<responder> weak = c;
    reads_.run<v1::Frame>(
        [this, group, owned = ownership_()]() -> result<v1::Frame> {
          if (!store_.load_group(group)) return error(protocol::errc::unknown_group, "no consumer group '" + group + "'");
          v1::Frame out;
          add_served(owned, *out.mutable_dlq_redrive_response());
          return out;
        },
        answer_admin_read(weak, corr));
    return;
  }
  redrive_page(c, corr, group, std::nullopt, 0);
}

// One page of a redrive: the worker reads up to k_admin_scan_page dead letters after `after`,
// the io thread writes them back to waiting (one synced update per page) and asks for the next
// page. A letter dead again meanwhile sorts before the cursor, so the redrive ends. In a cluster
// only the dead letters of partitions led here are redriven, and a page's answer waits for the
// ISR (the redrive is a group change like an ack).
void consumer_groups::redrive_page(const std::shared_ptr<responder>& c, std::uint64_t corr, const std::string& group,
                                   std::optional<storage::message_ref> after, std::uint64_t done_so_far) {
  std::weak_ptr<responder> weak = c;
  auto answer = [this, weak, corr](std::uint64_t redriven) {
    auto c = weak.lock();
    if (!c) return;
    v1::Frame out;
    out.set_correlation_id(corr);
    out.mutable_dlq_redrive_response()->set_redriven(redriven);
    if (ownership_) add_served(ownership_(), *out.mutable_dlq_redrive_response());
    c->respond(std::move(out));
  };
  auto fail = [weak, corr](const error& e, const std::string& what) {
    if (auto c = weak.lock()) c->respond_error(corr, wire_code(e), what + e.message);
  };
  reads_.run<std::vector<storage::dead_letter>>(
      [this, group, after] { return store_.dead_letters(group, k_admin_scan_page, after); },
      [this, weak, corr, group, done_so_far, answer, fail](result<std::vector<storage::dead_letter>> d) {
        if (!d) return fail(d.error(), "reading dead letters failed: ");
        if (d.value().empty() || !groups_.count(group)) return answer(done_so_far);
        const bool last_page = d.value().size() < k_admin_scan_page;
        const storage::message_ref page_end{d.value().back().topic, d.value().back().partition, d.value().back().offset};
        // Ownership is read when the write is made: a partition whose leadership moved since the
        // request began is the new leader's to redrive.
        std::optional<owned_partitions> owned;
        if (ownership_) owned = ownership_();
        storage::group_update u;
        u.group = group;
        u.sync = true;
        for (auto& l : d.value()) {
          if (served_here(owned, l.topic, l.partition)) u.redrive.push_back({l.topic, l.partition, l.offset});
        }
        auto next = [this, weak, corr, group, last_page, page_end, answer](std::uint64_t total) {
          auto c = weak.lock();
          if (!c) return;
          if (last_page) return answer(total);
          redrive_page(c, corr, group, page_end, total);
        };
        if (u.redrive.empty()) return next(done_so_far);
        auto refs = u.redrive;
        store_.update_group(std::move(u), on_io<storage::group_update_result>(io_, [this, group, refs, done_so_far, next,
                                                                                  fail](result<storage::group_update_result> r) {
          if (!r) return fail(r.error(), "redrive failed: ");
          auto it = groups_.find(group);
          if (it != groups_.end()) {
            it->second.tracker->redriven(refs, now_ms());
            serve_waiters(it->second);
          }
          const std::uint64_t total = done_so_far + refs.size();
          if (!gate_) return next(total);
          // Cluster mode: the page is answered (and the next one read) once the ISR of every
          // partition it changed holds the redrive: a redrive answered OK survives a failover.
          gate_(std::move(r.value().changes), [next, fail, total](result<void> g) {
            if (!g) return fail(g.error(), "redrive not replicated: ");
            next(total);
          });
        }));
      });
}

}  // namespace txmq::broker
