#pragma once

// One wake-up of a store's writer thread for many write requests submitted in a row.

namespace txmq::storage {

// While an object of this type lives on a thread, the write requests that thread submits to a
// RocksDB store (append, prepare, resolve, group updates, ...) are queued at once and in their
// order, as always, but the store's writer thread is not woken for each of them: the
// destructor wakes, once, every store that got requests meanwhile. (A writer that is awake
// takes them anyway.) The broker's io thread holds one across the frames of one socket read:
// a client pipelining 200 produce requests costs one wake-up of the writer — on a VM a
// cross-CPU wake-up is an interrupt between virtual CPUs — and the writer takes them as one
// commit group instead of starting on the first alone (issue #15, ninth round).
//
// Nests (the outermost wakes). Thread-local state: never keep one across a coroutine's
// suspension point (the other handlers run meanwhile on the thread would have their wake-ups
// held until it resumed), and never wait for a request's completion while one lives (its
// writer is not woken: it would only take it at its next periodic wake-up).
class batched_wakeups {
 public:
  batched_wakeups() noexcept;
  ~batched_wakeups();
  batched_wakeups(const batched_wakeups&) = delete;
  batched_wakeups& operator=(const batched_wakeups&) = delete;
};

}  // namespace txmq::storage
