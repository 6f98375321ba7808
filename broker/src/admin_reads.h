#pragma once

// Heavy admin reads off the io thread (DESIGN.md §7): a request that scans more than a bounded
// amount of the store (a group's dead letters, a topic for replay or reconciliation, the
// webhook attempt log) does the scan here, on one worker thread, and its answer is built back on
// the io thread. The io thread meanwhile keeps serving produce, fetch and acks: a describe of
// a group with a million dead letters costs its caller the scan, not every other client.
//
// Store reads are thread-safe (storage/store.h). What runs on the worker must touch nothing of
// the io thread's (trackers, subscriptions, connections): the caller copies what it needs
// first, and `done` runs on the io thread. One thread: admin reads are rare, and queueing them
// keeps one admin client from taking both cores.
//
// Lifetime: stop() (on the io thread, before the objects that `done` refers to go away) waits
// for the read that runs and drops those queued; a `done` posted before it is then skipped.

#include <atomic>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <string_view>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "txmq/common/admin_http.h"
#include "txmq/protocol/errc.h"
#include "txmq/protocol/result.h"
#include "txmq/storage/store.h"

namespace txmq::broker {

class admin_reads {
 public:
  explicit admin_reads(boost::asio::io_context& io) : io_(io) {}
  ~admin_reads() { stop(); }
  admin_reads(const admin_reads&) = delete;
  admin_reads& operator=(const admin_reads&) = delete;

  // Runs work() on the worker, then done(its result) on the io thread. An exception from work
  // reaches done as an error (the request gets an answer; nothing else is affected).
  template <class T>
  void run(std::function<result<T>()> work, std::function<void(result<T>)> done) {
    if (stopping_->load()) return;
    boost::asio::post(pool_, [&io = io_, stopping = stopping_, work = std::move(work), done = std::move(done)]() mutable {
      auto r = guarded(work);
      boost::asio::post(io, [stopping, done = std::move(done), r = std::move(r)]() mutable {
        if (!stopping->load()) done(std::move(r));
      });
    });
  }

  // The same for a coroutine on the io thread (the admin HTTP handlers): co_await runs work on
  // the worker and resumes the coroutine with the result. The coroutine parks on a timer that
  // the completion (on the io thread) cancels, as the HTTP gateway waits for an answer.
  // Defined in admin_reads.cc: GCC 12 inlining this coroutine into its callers warned of a
  // mismatched operator delete on the coroutine frame.
  [[nodiscard]] boost::asio::awaitable<result<common::http_response>> await(
      std::function<result<common::http_response>()> work);

  // Whether stop() was called: long scans check it between pages and give up.
  [[nodiscard]] bool stopping() const noexcept { return stopping_->load(); }

  void stop() {
    stopping_->store(true);
    pool_.stop();
    pool_.join();
  }

 private:
  template <class T>
  static result<T> guarded(std::function<result<T>()>& work) {
    try {
      return work();
    } catch (const std::exception& e) {
      return error(protocol::errc::internal, std::string("internal error: ") + e.what());
    } catch (...) {
      return error(protocol::errc::internal, "internal error");
    }
  }

  boost::asio::io_context& io_;
  std::shared_ptr<std::atomic<bool>> stopping_ = std::make_shared<std::atomic<bool>>(false);
  boost::asio::thread_pool pool_{1};
};

// A group's dead letters counted per (topic, partition), read a page at a time (never the whole
// queue in memory). For the worker: it gives up with SHUTTING_DOWN when `reads` stops.
struct dead_letter_counts {
  std::map<std::pair<std::string, std::uint32_t>, std::uint64_t> per_partition;
  std::uint64_t total = 0;
};
[[nodiscard]] result<dead_letter_counts> count_dead_letters(const storage::store& store, std::string_view group,
                                                            const admin_reads& reads);

// How many entries a worker reads from the store per page of a scan.
inline constexpr std::size_t k_admin_scan_page = 10'000;

}  // namespace txmq::broker
