#include "txmq/consumer/consumer.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <span>
#include <mutex>
#include <optional>
#include <thread>

#include "cluster_reader.h"
#include "txmq/client/leader_router.h"
#include "txmq/common/backoff.h"

namespace txmq::consumer {
namespace {

using steady = std::chrono::steady_clock;
using client::errc;
using client::error;
using std::chrono::milliseconds;

// A delivery run() has fetched and not yet acked or nacked.
struct tracked {
  delivery d;
  milliseconds lease{0};        // how long the broker gave (or options.ack_deadline)
  steady::time_point next_extend;
};

void fill_refs(google::protobuf::RepeatedPtrField<v1::DeliveryRef>* out, std::span<const delivery_ref> refs) {
  for (const auto& r : refs) {
    auto* ref = out->Add();
    ref->set_topic(r.topic);
    ref->set_partition(r.partition);
    ref->set_offset(r.offset);
    ref->set_attempt(r.attempt);
  }
}

std::string describe(const delivery_ref& r) {
  return r.topic + "/" + std::to_string(r.partition) + "@" + std::to_string(r.offset);
}

}  // namespace

protocol::message_id delivery::id() const {
  auto id = protocol::uuid::from_bytes(message.id());
  return id ? id.value() : protocol::message_id{};
}

class consumer::impl {
 public:
  impl(std::shared_ptr<client::connection> conn, consumer_options options)
      : conn_(std::move(conn)), options_(std::move(options)) {
    options_.concurrency = std::max<std::size_t>(options_.concurrency, 1);
  }

  ~impl() {
    std::shared_ptr<detail::cluster_reader> reader;
    std::shared_ptr<client::leader_router> router;
    {
      std::lock_guard lock(mode_mutex_);
      reader = std::move(cluster_);
      router = std::move(router_);
    }
    if (reader) reader->close();
    if (router) router->close();
  }

  client::result<std::vector<delivery>> fetch(std::uint32_t max, milliseconds wait) {
    auto reader = discover();
    if (!reader) return reader.error();
    if (reader.value()) return reader.value()->fetch(max, wait);
    v1::Frame f;
    auto* r = f.mutable_fetch();
    r->set_group(options_.group);
    for (const auto& t : options_.topics) r->add_topics(t);
    r->set_max_messages(max);
    r->set_max_wait_ms(static_cast<std::uint32_t>(wait.count()));
    r->set_ack_deadline_ms(static_cast<std::uint32_t>(options_.ack_deadline.count()));
    auto answer = conn_->request(std::move(f), wait + conn_->options().request_timeout);
    if (!answer) return answer.error();
    if (!answer.value().has_fetch_response()) {
      return error(errc::unexpected_response, "the broker answered a FetchRequest of group '" + options_.group +
                                                  "' with frame body " + std::to_string(static_cast<int>(answer.value().body_case())));
    }
    std::vector<delivery> out;
    for (auto& d : *answer.value().mutable_fetch_response()->mutable_deliveries()) {
      delivery x;
      x.message = std::move(*d.mutable_message());
      x.deadline = std::chrono::system_clock::time_point(milliseconds(d.deadline_ms()));
      out.push_back(std::move(x));
    }
    return out;
  }

  client::result<per_ref_results> settle(client::connection& conn, v1::Frame f, std::size_t n, const char* what) {
    return results_of(conn.request(std::move(f)), n, what);
  }

  // The broker's answer to an Ack, Nack or Extend of n refs, one result per ref.
  client::result<per_ref_results> results_of(const client::result<v1::Frame>& answer, std::size_t n, const char* what) const {
    if (!answer) return answer.error();
    const v1::Frame& a = answer.value();
    if (!a.has_delivery_results() || static_cast<std::size_t>(a.delivery_results().results_size()) != n) {
      return error(errc::unexpected_response, std::string("the broker answered ") + what + " of " + std::to_string(n) +
                                                  " refs with frame body " + std::to_string(static_cast<int>(a.body_case())) +
                                                  " and " + std::to_string(a.delivery_results().results_size()) + " results");
    }
    per_ref_results out;
    for (int code : a.delivery_results().results()) {
      if (code == v1::ERROR_CODE_UNSPECIFIED) {
        out.emplace_back(outcome::success());
      } else if (code == v1::UNKNOWN_DELIVERY) {
        out.emplace_back(error(protocol::errc::unknown_delivery,
                               "not in flight for group '" + options_.group +
                                   "': already acked, or its ack deadline passed and it was handed out again"));
      } else {
        out.emplace_back(client::from_wire(code, std::string(what) + " of this ref failed"));
      }
    }
    return out;
  }

  client::result<per_ref_results> ack(std::span<const delivery_ref> refs) {
    return settle_on_nodes(refs, "Ack", [&](std::span<const delivery_ref> some) { return ack_frame(some); });
  }

  client::result<per_ref_results> nack(std::span<const delivery_ref> refs, milliseconds delay) {
    return settle_on_nodes(refs, "Nack", [&](std::span<const delivery_ref> some) { return nack_frame(some, delay); });
  }

  client::result<per_ref_results> extend(std::span<const delivery_ref> refs, milliseconds by) {
    return settle_on_nodes(refs, "Extend", [&](std::span<const delivery_ref> some) {
      v1::Frame f;
      f.mutable_extend()->set_group(options_.group);
      f.mutable_extend()->set_extend_ms(static_cast<std::uint32_t>(by.count()));
      fill_refs(f.mutable_extend()->mutable_refs(), some);
      return f;
    });
  }

  client::result<void> run(const handler& handle, std::stop_token stop) {
    run_state state;
    const std::size_t window = options_.concurrency + options_.prefetch;
    std::vector<std::thread> workers;
    for (std::size_t i = 0; i < options_.concurrency; ++i) {
      workers.emplace_back([&] { work(state, handle); });
    }
    std::thread lease_keeper([&] { keep_leases(state); });

    client::result<void> outcome_of_run = outcome::success();
    common::backoff retry_delay(options_.retry_backoff_initial, options_.retry_backoff_max);
    while (!stop.stop_requested()) {
      std::size_t want;
      {
        std::unique_lock lock(state.mutex);
        if (!state.space_cv.wait(lock, stop, [&] { return state.outstanding.size() < window; })) break;
        want = std::min<std::size_t>(options_.max_messages, window - state.outstanding.size());
      }
      auto fetched = fetch(static_cast<std::uint32_t>(want), options_.max_wait);
      if (!fetched) {
        if (!fetched.error().retriable()) {
          outcome_of_run = fetched.error();
          break;
        }
        log("fetch for group '" + options_.group + "' failed, retrying: " + fetched.error().to_string());
        std::unique_lock lock(state.mutex);
        state.space_cv.wait_for(lock, stop, retry_delay.next(), [] { return false; });
        continue;
      }
      retry_delay.reset();
      if (fetched.value().empty()) continue;
      const std::size_t n = fetched.value().size();
      bool extend_sooner = false;
      {
        std::lock_guard lock(state.mutex);
        const auto now_sys = std::chrono::system_clock::now();
        const auto now = steady::now();
        for (auto& d : fetched.value()) {
          auto t = std::make_shared<tracked>();
          auto given = std::chrono::duration_cast<milliseconds>(d.deadline - now_sys);
          t->lease = options_.ack_deadline.count() > 0 ? options_.ack_deadline : std::max(given, milliseconds(100));
          t->next_extend = now + std::max(given, milliseconds(0)) / 2;
          extend_sooner = extend_sooner || t->next_extend < state.keeper_wakes_at;
          t->d = std::move(d);
          state.outstanding.push_back(t);
          state.queue.push_back(std::move(t));
        }
      }
      // One wake-up per delivery, not one for every thread: at a low rate each delivery used to
      // wake every worker, the lease keeper and this thread (docs/BENCHMARKS.md, "Eighteenth
      // round"). The lease keeper only needs waking for a lease due before its alarm.
      if (n >= options_.concurrency) {
        state.work_cv.notify_all();
      } else {
        for (std::size_t i = 0; i < n; ++i) state.work_cv.notify_one();
      }
      if (extend_sooner) state.lease_cv.notify_one();
    }
    {
      std::lock_guard lock(state.mutex);
      state.stopping = true;
    }
    state.work_cv.notify_all();
    state.lease_cv.notify_all();
    // Handlers in progress finish and are acked or nacked; fetched ones still queued run too.
    for (auto& w : workers) w.join();
    lease_keeper.join();
    return outcome_of_run;
  }

  const std::shared_ptr<client::connection>& conn() const noexcept { return conn_; }
  const consumer_options& options() const noexcept { return options_; }

 private:
  v1::Frame ack_frame(std::span<const delivery_ref> refs) const {
    v1::Frame f;
    f.mutable_ack()->set_group(options_.group);
    fill_refs(f.mutable_ack()->mutable_refs(), refs);
    return f;
  }

  v1::Frame nack_frame(std::span<const delivery_ref> refs, milliseconds delay) const {
    v1::Frame f;
    f.mutable_nack()->set_group(options_.group);
    f.mutable_nack()->set_delay_ms(static_cast<std::uint32_t>(delay.count()));
    fill_refs(f.mutable_nack()->mutable_refs(), refs);
    return f;
  }

  // One condition per kind of waiter, so that a change wakes only the thread it concerns.
  struct run_state {
    std::mutex mutex;
    std::condition_variable work_cv;        // workers: a delivery queued, or stopping
    std::condition_variable_any space_cv;   // the fetch loop: the window has room (or its stop)
    std::condition_variable lease_cv;       // the lease keeper: an earlier lease, or stopping
    steady::time_point keeper_wakes_at = steady::time_point::min();  // its alarm; min while awake
    std::deque<std::shared_ptr<tracked>> queue;         // fetched, waiting for a worker
    std::list<std::shared_ptr<tracked>> outstanding;    // fetched, not yet acked or nacked
    bool stopping = false;
  };

  void log(const std::string& text) const {
    if (options_.log) options_.log(text);
  }

  // nullptr: a single broker (read over conn_ as always). Decided once, by one Metadata round
  // trip on the first fetch; a broker older than Metadata answers UNKNOWN_REQUEST: single.
  client::result<std::shared_ptr<detail::cluster_reader>> discover() {
    std::lock_guard lock(mode_mutex_);
    if (mode_known_) return cluster_;
    auto router = std::make_shared<client::leader_router>(conn_);
    auto m = router->refresh(conn_->options().request_timeout);
    if (!m && !m.error().is(protocol::errc::unknown_request)) return m.error();
    mode_known_ = true;
    if (m && m.value().cluster()) {
      router_ = std::move(router);
      cluster_ = std::make_shared<detail::cluster_reader>(router_, options_);
    }
    return cluster_;
  }

  std::shared_ptr<detail::cluster_reader> known_cluster_reader() {
    std::lock_guard lock(mode_mutex_);
    return cluster_;
  }

  // Sends the refs' Ack/Nack/Extend (`make` builds the frame for some of them): over conn_ with
  // a single broker (or before the first fetch), else one request per node that delivered them.
  template <class Make>
  client::result<per_ref_results> settle_on_nodes(std::span<const delivery_ref> refs, const char* what, Make make) {
    auto reader = known_cluster_reader();
    if (!reader) return settle(*conn_, make(refs), refs.size(), what);
    std::map<std::shared_ptr<client::connection>, std::vector<std::size_t>> by_node;
    for (std::size_t i = 0; i < refs.size(); ++i) by_node[reader->connection_for(refs[i])].push_back(i);
    std::vector<std::optional<client::result<void>>> slots(refs.size());
    for (const auto& [conn, indexes] : by_node) {
      std::vector<delivery_ref> some;
      for (auto i : indexes) some.push_back(refs[i]);
      client::result<per_ref_results> r = per_ref_results{};
      if (!conn->is_connected()) {
        // Waiting for it to come back would hold the caller for the request timeout; its broker
        // redelivers these (the connection that fetched them is gone) whatever we do.
        r = error(errc::not_connected, "the node " + conn->options().address + " that delivered " +
                                           std::to_string(some.size()) + " of these is not connected; it redelivers them");
      } else {
        r = settle(*conn, make(some), some.size(), what);
      }
      if (!r) {
        reader->stale();
        if (by_node.size() == 1) return r.error();
        for (auto i : indexes) slots[i] = r.error();
        continue;
      }
      for (std::size_t k = 0; k < indexes.size(); ++k) slots[indexes[k]] = std::move(r.value()[k]);
    }
    per_ref_results out;
    for (auto& slot : slots) out.push_back(std::move(*slot));
    return out;
  }

  void work(run_state& state, const handler& handle) {
    for (;;) {
      std::shared_ptr<tracked> t;
      {
        std::unique_lock lock(state.mutex);
        state.work_cv.wait(lock, [&] { return !state.queue.empty() || state.stopping; });
        if (state.queue.empty()) return;
        t = std::move(state.queue.front());
        state.queue.pop_front();
      }
      const delivery_ref ref = t->d.ref();
      handler_result outcome_of_handler = outcome::success();
      try {
        outcome_of_handler = handle(t->d);
      } catch (const std::exception& e) {
        outcome_of_handler = error(errc::handler_failed, std::string("the handler threw: ") + e.what());
      } catch (...) {
        outcome_of_handler = error(errc::handler_failed, "the handler threw a non-std exception");
      }
      const std::span<const delivery_ref> refs(&ref, 1);
      if (!outcome_of_handler) {
        log("handler failed on " + describe(ref) + " (attempt " + std::to_string(t->d.attempt()) +
            "), nacking: " + outcome_of_handler.error().to_string());
      }
      // The ack (or nack) is sent and the worker goes on; the delivery stays outstanding (it
      // holds its slot of the window, its lease is kept) until the answer, which settles it on
      // the connection's io thread. Waiting here cost every message a sleep and a wake-up of the
      // worker. In a cluster it goes to the node that delivered it, as settle_on_nodes() does.
      const char* what = outcome_of_handler ? "ack" : "nack";
      v1::Frame f = outcome_of_handler ? ack_frame(refs) : nack_frame(refs, options_.nack_delay);
      auto reader = known_cluster_reader();
      auto conn = reader ? reader->connection_for(ref) : conn_;
      if (reader && !conn->is_connected()) {
        // Its broker redelivers it (the connection that fetched it is gone) whatever we do.
        report(what, ref, error(errc::not_connected, "the node " + conn->options().address +
                                                         " that delivered it is not connected; it redelivers it"));
        reader->stale();
        settled(state, t);
        continue;
      }
      conn->async_request(std::move(f), [this, &state, t, what, reader](client::result<v1::Frame> answer) {
        auto results = results_of(answer, 1, what);
        if (!results && reader) reader->stale();
        report(what, t->d.ref(), results);
        settled(state, t);
      });
    }
  }

  // The delivery's ack or nack was answered (or failed): its slot is free. Everything under the
  // lock: run() may return, and `state` go, as soon as the last one is settled.
  static void settled(run_state& state, const std::shared_ptr<tracked>& t) {
    std::lock_guard lock(state.mutex);
    state.outstanding.remove(t);
    state.space_cv.notify_one();
    if (state.stopping && state.outstanding.empty()) state.lease_cv.notify_one();  // the keeper exits
  }

  void report(const char* what, const delivery_ref& ref, const client::result<per_ref_results>& r) {
    if (!r) {
      // The broker redelivers it after its deadline (or did so already, with the connection).
      log(std::string(what) + " of " + describe(ref) + " failed: " + r.error().to_string());
      return;
    }
    if (!r.value().empty() && !r.value()[0]) {
      log(std::string(what) + " of " + describe(ref) + " failed: " + r.value()[0].error().to_string());
    }
  }

  void keep_leases(run_state& state) {
    std::unique_lock lock(state.mutex);
    for (;;) {
      if (state.stopping && state.outstanding.empty()) return;
      const auto now = steady::now();
      std::vector<delivery_ref> due;
      std::vector<milliseconds> by;
      auto next = steady::time_point::max();
      for (auto& t : state.outstanding) {
        if (t->next_extend <= now) {
          due.push_back(t->d.ref());
          by.push_back(t->lease);
          t->next_extend = now + t->lease / 2;
        }
        next = std::min(next, t->next_extend);
      }
      if (!due.empty()) {
        lock.unlock();
        extend_all(due, by);
        lock.lock();
        continue;
      }
      state.keeper_wakes_at = next;
      if (next == steady::time_point::max()) {
        state.lease_cv.wait(lock);
      } else {
        state.lease_cv.wait_until(lock, next);
      }
      state.keeper_wakes_at = steady::time_point::min();
    }
  }

  // One Extend per distinct lease length (usually one).
  void extend_all(const std::vector<delivery_ref>& refs, const std::vector<milliseconds>& by) {
    std::map<milliseconds, std::vector<delivery_ref>> groups;
    for (std::size_t i = 0; i < refs.size(); ++i) groups[by[i]].push_back(refs[i]);
    for (const auto& [lease, group] : groups) {
      auto r = extend(group, lease);
      if (!r) {
        log("extending " + std::to_string(group.size()) + " deliveries failed: " + r.error().to_string());
        continue;
      }
      for (std::size_t i = 0; i < group.size() && i < r.value().size(); ++i) {
        if (!r.value()[i]) log("lease of " + describe(group[i]) + " lost: " + r.value()[i].error().to_string());
      }
    }
  }

  std::shared_ptr<client::connection> conn_;
  consumer_options options_;
  std::mutex mode_mutex_;
  bool mode_known_ = false;
  std::shared_ptr<client::leader_router> router_;           // cluster mode only
  std::shared_ptr<detail::cluster_reader> cluster_;         // cluster mode only
};

consumer::consumer(consumer_options options) {
  auto conn = std::make_shared<client::connection>(options.connection);
  impl_ = std::make_unique<impl>(std::move(conn), std::move(options));
}

consumer::consumer(std::shared_ptr<client::connection> conn, consumer_options options)
    : impl_(std::make_unique<impl>(std::move(conn), std::move(options))) {}

consumer::~consumer() = default;

client::result<std::vector<delivery>> consumer::fetch(std::uint32_t max, milliseconds wait) { return impl_->fetch(max, wait); }
client::result<consumer::per_ref_results> consumer::ack(std::span<const delivery_ref> refs) { return impl_->ack(refs); }
client::result<consumer::per_ref_results> consumer::nack(std::span<const delivery_ref> refs, milliseconds delay) {
  return impl_->nack(refs, delay);
}
client::result<consumer::per_ref_results> consumer::extend(std::span<const delivery_ref> refs, milliseconds by) {
  return impl_->extend(refs, by);
}
client::result<void> consumer::run(const handler& handle, std::stop_token stop) { return impl_->run(handle, std::move(stop)); }
const std::shared_ptr<client::connection>& consumer::conn() const noexcept { return impl_->conn(); }
const consumer_options& consumer::options() const noexcept { return impl_->options(); }

}  // namespace txmq::consumer
