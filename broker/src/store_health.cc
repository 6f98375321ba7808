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

std::optional<std::string> store_health_change(storage::store_health::state before,
                                               const storage::store_health& now) {
  using state = storage::store_health::state;
  if (now.status == before) return std::nullopt;
  switch (now.status) {
    case state::ok: return std::string("the store takes writes again");
    case state::full: return "produce and Prepare are refused (STORE_FULL): " + now.reason;
    case state::failed: return "the store refuses every write (STORE_UNAVAILABLE): " + now.reason;
  }
  return std::nullopt;
}

}  // namespace txmq::broker
