// The thread-local scope of txmq/storage/batched_wakeups.h: which stores wait for a wake-up.

#include "txmq/storage/batched_wakeups.h"

#include <algorithm>
#include <vector>

#include "rocksdb_store.h"

namespace txmq::storage {
namespace detail {
namespace {

struct held_wakeups {
  int depth = 0;
  std::vector<rocksdb_store*> stores;  // usually one: the broker's store
};

held_wakeups& held() {
  static thread_local held_wakeups h;
  return h;
}

}  // namespace

bool hold_writer_wakeup(rocksdb_store* store) {
  auto& h = held();
  if (h.depth == 0) return false;
  if (std::find(h.stores.begin(), h.stores.end(), store) == h.stores.end()) h.stores.push_back(store);
  return true;
}

}  // namespace detail

batched_wakeups::batched_wakeups() noexcept { ++detail::held().depth; }

batched_wakeups::~batched_wakeups() {
  auto& h = detail::held();
  if (--h.depth > 0) return;
  for (auto* store : h.stores) store->wake_writer();
  h.stores.clear();
}

}  // namespace txmq::storage
