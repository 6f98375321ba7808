#include "background_priority.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

namespace txmq::storage::detail {

namespace {

bool set_nice(pid_t tid, int nice) { return ::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), nice) == 0; }

}  // namespace

bool background_priority::can_raise_back() {
  // On a thread of its own: the probe must not leave the caller lowered if raising fails.
  bool ok = false;
  std::thread probe([&] {
    const pid_t self = ::gettid();
    errno = 0;
    const int own = ::getpriority(PRIO_PROCESS, static_cast<id_t>(self));
    if (errno != 0 || own >= k_low_nice) return;
    ok = set_nice(self, own + 1) && set_nice(self, own);
  });
  probe.join();
  return ok;
}

void background_priority::OnStallConditionsChanged(const rocksdb::WriteStallInfo& info) {
  std::lock_guard lk(mu_);
  const bool was_held_up = !held_up_.empty();
  if (info.condition.cur == rocksdb::WriteStallCondition::kNormal) {
    held_up_.erase(info.cf_name);
  } else {
    held_up_.insert(info.cf_name);
  }
  const bool held_up = !held_up_.empty();
  if (held_up == was_held_up) return;
  if (held_up) raised_.fetch_add(1, std::memory_order_relaxed);
  apply_locked(held_up ? normal_nice_ : k_low_nice);
}

background_priority::~background_priority() {
  std::lock_guard lk(mu_);
  apply_locked(normal_nice_);
}

bool background_priority::lowered() const {
  std::lock_guard lk(mu_);
  return held_up_.empty();
}

void background_priority::adopt_calling_thread() {
  const pid_t self = ::gettid();
  std::lock_guard lk(mu_);
  if (!threads_.insert(self).second) return;
  (void)set_nice(self, held_up_.empty() ? k_low_nice : normal_nice_);
}

void background_priority::apply_locked(int nice) {
  // A thread that has ended (RocksDB shrank its pool) fails with ESRCH: forgotten.
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (!set_nice(*it, nice) && errno == ESRCH) {
      it = threads_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace txmq::storage::detail
