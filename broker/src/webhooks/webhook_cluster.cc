// Webhooks in cluster mode (docs/cluster.md "Webhooks"): subscription records in etcd, taken by
// every node from each cluster state it reads; delivery by each partition's leader only, below
// its visible end (the tracker's visible_end hook), moving with leadership.

#include <google/protobuf/util/message_differencer.h>

#include "io_thread.h"
#include "txmq/common/log.h"
#include "webhooks/webhook_notifier.h"
#include "webhooks/webhook_payload.h"
#include "webhooks/webhook_subscription.h"

namespace txmq::broker {

void webhook_notifier::publish(const v1::Webhook& rec) {
  if (!cluster_) return;
  std::string bytes;
  rec.SerializeToString(&bytes);
  cluster_->put(rec.id(), std::move(bytes), false, [id = rec.id()](result<std::pair<bool, std::int64_t>> r) {
    if (!r) common::log::error("webhooks: writing ", id, "'s new state to etcd failed: ", r.error().message);
  });
}

void webhook_notifier::adopt(v1::Webhook rec) {
  const std::string id = rec.id();
  adopting_.insert(id);
  // As create() does: the record, then its group (from the earliest message: the group's own
  // replicated state, when it has one, decides where delivery stands).
  store_.put_webhook(rec, on_io<void>(io_, [this, rec, id](result<void> r) mutable {
    if (!r) {
      adopting_.erase(id);
      common::log::error("webhooks: storing ", id, " (made on another node) failed: ", r.error().message);
      return;
    }
    storage::group_info info{std::string(k_webhook_group_prefix) + id, {rec.topic()}, 0};
    store_.ensure_group(std::move(info), storage::group_start::earliest,
                        on_io<storage::group_state>(io_, [this, rec = std::move(rec), id](result<storage::group_state> g) mutable {
      adopting_.erase(id);
      if (stopped_ || subs_.contains(id)) return;
      if (!g) {
        common::log::error("webhooks: creating ", id, "'s group failed: ", g.error().message);
        return;
      }
      auto s = make_subscription(std::move(rec), g.value());
      if (!s) return;
      common::log::info("webhooks: ", id, " (made on another node) started for topic '", s.value()->rec.topic(), "'");
      pump(s.value());
    }));
  }));
}

void webhook_notifier::sync_cluster(const std::vector<std::pair<std::string, std::string>>& records,
                                    std::int64_t revision) {
  if (stopped_ || revision < own_revision_) return;
  std::set<std::string> present;
  for (const auto& [id, bytes] : records) {
    present.insert(id);
    v1::Webhook rec;
    if (!rec.ParseFromString(bytes) || rec.id() != id) {
      common::log::error("webhooks: etcd holds a record for ", id, " that is not a subscription");
      continue;
    }
    auto it = subs_.find(id);
    if (it == subs_.end()) {
      if (!adopting_.contains(id)) adopt(std::move(rec));
      continue;
    }
    auto& s = *it->second;
    if (disabling_.contains(id) && !rec.disabled()) {
      // Our 410's disable is on its way to etcd: take any other change (a rotated secret), not
      // the enabled flag of a state read before the disable lands.
      rec.set_disabled(true);
      rec.set_disabled_reason(s.rec.disabled_reason());
      rec.set_disabled_ms(s.rec.disabled_ms());
    }
    if (google::protobuf::util::MessageDifferencer::Equals(s.rec, rec)) continue;
    // A rotated secret or a disable made through another node.
    s.rec = rec;
    store_.put_webhook(rec, [id = id](result<void> r) {  // init-capture: clang 14 cannot capture a binding
      if (!r) common::log::error("webhooks: storing ", id, "'s new state failed: ", r.error().message);
    });
  }
  std::vector<std::string> gone;
  for (const auto& [id, s] : subs_) {
    if (!present.contains(id) && !adopting_.contains(id)) gone.push_back(id);
  }
  for (const auto& id : gone) {
    common::log::info("webhooks: ", id, " deleted in the cluster");
    remove(nullptr, 0, id, true);
  }
}

void webhook_notifier::partition_leadership(const std::string& topic, std::int32_t partition, bool leading) {
  const auto p = static_cast<std::uint32_t>(partition);
  for (auto& [id, s] : subs_) {
    if (s->rec.topic() != topic) continue;
    if (!leading) {
      s->tracker->drop_partition(topic, p);
      continue;
    }
    auto state = load_for_leadership(store_, s->group, topic, p);
    if (!state) {
      common::log::error("webhooks: ", id, ": cannot load its state of ", topic, "/", partition, ": ",
                         state.error().message);
      continue;
    }
    if (auto r = s->tracker->reload_partition(state.value(), topic, p, now_ms()); !r) {
      common::log::error("webhooks: ", id, ": cannot take its state of ", topic, "/", partition, ": ", r.error().message);
      continue;
    }
    pump(s);
  }
}

}  // namespace txmq::broker
