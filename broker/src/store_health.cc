#include "store_health.h"

namespace txmq::broker {

common::health_status store_health_status(const storage::store& store) {
  auto h = store.health();
  if (h.status == storage::store_health::state::ok) return {};
  return {false, std::move(h.reason)};
}

void watch_store_health(const storage::store& store, common::metrics_registry& registry,
                        common::admin_http_server& http) {
  registry.add_gauge_callback(
      "txmq_store_healthy",
      "1 while the store takes every write; 0 while it is failed or below min_free_disk_bytes (see /healthz)", {},
      [&store] { return store.health().status == storage::store_health::state::ok ? 1.0 : 0.0; });
  http.set_health_check([&store] { return store_health_status(store); });
}

}  // namespace txmq::broker
