#pragma once

// What the code on the broker's io thread shares: the guarded loop that runs it, storage
// completions brought back to that thread, and the wall clock the stored times are written in.

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "txmq/common/log.h"
#include "txmq/common/metrics.h"
#include "txmq/storage/store.h"

namespace txmq::broker {

// Runs `io` until it is stopped or out of work. An exception that escapes a handler or timer is
// a bug, but one request's bug must not end the process and every other client's connection:
// it is logged, counted in `internal_errors` (txmq_internal_errors_total) and the loop runs
// again (Asio allows run() after a handler threw; the thrower's own state is what it left).
inline void run_guarded(boost::asio::io_context& io, common::counter& internal_errors) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      internal_errors.inc();
      common::log::error("internal error on the io thread (the broker keeps serving): ", e.what());
    } catch (...) {
      internal_errors.inc();
      common::log::error("internal error on the io thread (the broker keeps serving): a non-standard exception");
    }
  }
}

// Storage completions of one burst, gathered on the store's thread and posted to each io
// context as one handler (store_options::around_completions = gather_completions): a commit
// group of 1,000 produce requests costs the io thread one post, not 1,000 (each a lock of the
// scheduler and an operation to queue and run).
class completion_burst {
 public:
  struct task {
    virtual ~task() = default;
    virtual void run() = 0;
  };
  template <class F>
  struct task_of final : task {
    explicit task_of(F&& f) : fn(std::move(f)) {}
    void run() override { fn(); }
    F fn;
  };

  // The burst being gathered on this thread, if any.
  static completion_burst*& current() {
    static thread_local completion_burst* burst = nullptr;
    return burst;
  }

  void add(boost::asio::io_context& io, std::unique_ptr<task> t) {
    for (auto& [to, tasks] : posts_) {
      if (to == &io) return tasks.push_back(std::move(t));
    }
    posts_.emplace_back(&io, std::vector<std::unique_ptr<task>>{}).second.push_back(std::move(t));
  }

  // One post per io context, running the tasks in the order they completed.
  void post_all() {
    for (auto& [io, tasks] : posts_) post_tasks(*io, std::move(tasks), 0);
    posts_.clear();
  }

 private:
  // A task that throws is one request's bug (run_guarded logs it): the tasks after it still
  // run, in a handler of their own, as if each had been posted alone.
  static void post_tasks(boost::asio::io_context& io, std::vector<std::unique_ptr<task>> tasks, std::size_t from) {
    boost::asio::post(io, [&io, tasks = std::move(tasks), from]() mutable {
      for (std::size_t i = from; i < tasks.size(); ++i) {
        try {
          tasks[i]->run();
        } catch (...) {
          if (i + 1 < tasks.size()) post_tasks(io, std::move(tasks), i + 1);
          throw;
        }
      }
    });
  }

  std::vector<std::pair<boost::asio::io_context*, std::vector<std::unique_ptr<task>>>> posts_;
};

// store_options::around_completions: the completions that run() runs post to their io context
// through one burst.
inline void gather_completions(const std::function<void()>& run) {
  completion_burst burst;
  auto*& current = completion_burst::current();
  completion_burst* outer = current;
  current = &burst;
  try {
    run();
  } catch (...) {
    current = outer;
    burst.post_all();
    throw;
  }
  current = outer;
  burst.post_all();
}

// A storage completion that runs fn(result<T>) on `io`. The store completes on its own threads;
// the handlers' state lives on the io thread, which needs no locks because only it touches it.
// Inside a burst (gather_completions) the call joins the burst's one post.
template <class T, class Fn>
[[nodiscard]] storage::completion<T> on_io(boost::asio::io_context& io, Fn&& fn) {
  return [&io, fn = std::forward<Fn>(fn)](result<T> r) mutable {
    auto call = [fn = std::move(fn), r = std::move(r)]() mutable { fn(std::move(r)); };
    if (auto* burst = completion_burst::current()) {
      burst->add(io, std::make_unique<completion_burst::task_of<decltype(call)>>(std::move(call)));
      return;
    }
    boost::asio::post(io, std::move(call));
  };
}

// Unix milliseconds by the system clock: deadlines, due times and publish times are kept in it.
[[nodiscard]] inline std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace txmq::broker
