#pragma once

// One webhook subscription as the notifier holds it (private to webhook_notifier*.cc).

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "groups/group_tracker.h"
#include "webhooks/webhook_client.h"
#include "webhooks/webhook_notifier.h"
#include "webhooks/webhook_signer.h"

namespace txmq::broker {

// Whether `m` passes the key and header filter of the subscription `rec`. A free function so the
// admin worker can apply it to a copy of the record.
[[nodiscard]] inline bool webhook_matches(const v1::Webhook& rec, const v1::Message& m) {
  if (rec.has_filter_key() && (!m.has_key() || m.key() != rec.filter_key())) return false;
  for (auto& [k, v] : rec.filter_headers()) {
    auto it = m.headers().find(k);
    if (it == m.headers().end() || it->second != v) return false;
  }
  return true;
}

struct webhook_notifier::subscription {
  v1::Webhook rec;  // as stored: secrets and token included
  std::string group;
  delivery_settings delivery;
  std::unique_ptr<group_tracker> tracker;
  std::unique_ptr<webhook_endpoint> endpoint;
  std::uint32_t in_flight = 0;
  // Token bucket of the rate limit (unused when rate_per_second is 0).
  double tokens = 0;
  std::chrono::steady_clock::time_point refilled;
  std::deque<v1::Message> replays;
  bool deleted = false;
  bool pump_posted = false;  // a pump is queued on the io thread

  // The key and header filter: messages that fail it are settled without an attempt.
  [[nodiscard]] bool matches(const v1::Message& m) const { return webhook_matches(rec, m); }
};

}  // namespace txmq::broker
