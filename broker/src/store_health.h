#pragma once

// What the operator sees of the store's health: /healthz answers 503 with the store's reason
// while it is failed or its disk is below min_free_disk_bytes, and the gauge
// txmq_store_healthy is 1 or 0.

#include <optional>
#include <string>

#include "txmq/common/admin_http.h"
#include "txmq/common/metrics.h"
#include "txmq/storage/store.h"

namespace txmq::broker {

// Healthy only while the store takes every write; otherwise the store's reason ("the store
// stopped taking writes after: ..." or "... bytes free, below the minimum of ...").
[[nodiscard]] common::health_status store_health_status(const storage::store& store);

// Registers the gauge txmq_store_healthy and the /healthz check on `http`. The store must
// outlive both (both read it on the admin server's thread, at request time: never the disk).
void watch_store_health(const storage::store& store, common::metrics_registry& registry,
                        common::admin_http_server& http);

// The log line for a change of the store's health since `before` (nullopt: no change), so the
// reason reaches the log once, when it starts, and the recovery too.
[[nodiscard]] std::optional<std::string> store_health_change(storage::store_health::state before,
                                                             const storage::store_health& now);

}  // namespace txmq::broker
