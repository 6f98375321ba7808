// The producer's batching, per-topic in-flight bound, retries, delivery timeouts and the
// ordered mode's cut share one lock and one sender thread's state: one piece, kept together so
// that the ordering rules (producer-lib/README.md "Ordering") are read in one place.
#include "txmq/producer/producer.h"

#include "txmq/client/leader_router.h"
#include "txmq/common/backoff.h"
#include "wire_message.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace txmq::producer {
namespace {

using clock = std::chrono::steady_clock;
using client::errc;
using client::error;

struct pending_message {
  v1::Message message;
  protocol::message_id id;
  clock::time_point deadline;
  producer::callback cb;
  std::size_t bytes = 0;
  // Its place among the topic's accepted messages (impl::accepted_), for the ordered mode's
  // cut (impl::cut_).
  std::uint64_t order = 0;
};

struct batch {
  std::string topic;
  // Cluster mode: the leader the batch goes to ("" = the bootstrap connection), and the queue
  // it belongs to (topic and leader: batches are grouped by leader, docs/cluster.md).
  std::string address;
  std::string queue;
  std::vector<pending_message> messages;
  std::size_t bytes = 0;
  clock::time_point linger_until;
  clock::time_point not_before;
  int attempts = 0;
  // Order of opening within the producer; the parts of a rerouted batch keep it. With a limit
  // on in-flight batches per topic, a topic's batches go out in this order whatever leader
  // queue they are in, so a batch rerouted after a failover is not overtaken by newer ones.
  std::uint64_t seq = 0;
  common::backoff retry_delay;  // between attempts of this batch
  std::optional<error> last_error;
};

struct topic_state {
  std::shared_ptr<batch> open;                // accumulating
  std::deque<std::shared_ptr<batch>> ready;   // sealed; retries go to the front
  std::size_t in_flight_batches = 0;
};

std::size_t approximate_bytes(const outgoing_message& m) {
  // Each wire message carries its topic too (batch_bytes_limit relies on not counting less).
  std::size_t n = m.body.size() + m.topic.size() + 32;
  if (m.key) n += m.key->size();
  for (const auto& [k, v] : m.headers) n += k.size() + v.size() + 4;
  return n;
}

}  // namespace

class producer::impl {
 public:
  impl(std::shared_ptr<client::connection> conn, producer_options options, bool owns_connection)
      : options_(std::move(options)), conn_(std::move(conn)), owns_connection_(owns_connection),
        router_(std::make_shared<client::leader_router>(conn_)) {
    // Leaders known before the first batch, when the broker is a cluster (a single broker
    // answers that it is not, and everything goes to conn_).
    router_->async_refresh([](client::result<void>) {});
    options_.batch_max_messages = std::max<std::size_t>(options_.batch_max_messages, 1);
    options_.max_in_flight_messages = std::max<std::size_t>(options_.max_in_flight_messages, 1);
    completion_thread_ = std::thread([this] { run_completions(); });
    sender_thread_ = std::thread([this] { run_sender(); });
  }

  ~impl() { close(); }

  void async_send(outgoing_message message, callback cb) {
    const auto start = clock::now();
    const auto deadline = start + options_.delivery_timeout;
    const auto server = conn_->server();
    if (auto refused = check(message, server); !refused) return complete_now(std::move(cb), refused.error());
    const std::size_t max_bytes = batch_bytes_limit(server);
    pending_message p;
    p.id = message.id.value_or(protocol::uuid::make_v7());
    p.deadline = deadline;
    p.cb = std::move(cb);
    p.bytes = approximate_bytes(message);
    const std::string topic_name = message.topic;
    const std::string address = router_->leader_for(message.topic, message.key);
    p.message = detail::to_wire(std::move(message), p.id);

    std::unique_lock lock(mutex_);
    // Back-pressure: wait for room, but never past the message's delivery timeout.
    const bool room = room_cv_.wait_until(lock, deadline, [&] { return closed_ || in_flight_ < options_.max_in_flight_messages; });
    if (closed_) {
      lock.unlock();
      return complete_now(std::move(p.cb), error(errc::closed, "the producer was closed"));
    }
    if (!room) {
      lock.unlock();
      return complete_now(std::move(p.cb),
                          error(errc::delivery_timeout, "no room for message " + p.id.to_string() + " to topic '" + topic_name +
                                                            "' within the delivery timeout of " +
                                                            std::to_string(options_.delivery_timeout.count()) + " ms: " +
                                                            std::to_string(options_.max_in_flight_messages) +
                                                            " messages stayed in flight (is the broker reachable?)"));
    }
    ++in_flight_;
    p.order = accepted_[topic_name]++;
    const std::string queue = queue_name(topic_name, address);
    auto& topic = topics_[queue];
    if (topic.open && (topic.open->messages.size() + 1 > options_.batch_max_messages ||
                       topic.open->bytes + p.bytes > max_bytes)) {
      seal(topic);
    }
    if (!topic.open) {
      topic.open = std::make_shared<batch>();
      // Numbered when opened (its first message's turn), not when sealed: the sender seals the
      // open batches of several leader queues in queue-name order.
      topic.open->seq = next_seq_++;
      topic.open->topic = topic_name;
      topic.open->address = address;
      topic.open->queue = queue;
      topic.open->linger_until = clock::now() + options_.linger;
      topic.open->retry_delay = common::backoff(options_.retry_backoff_initial, options_.retry_backoff_max);
    }
    topic.open->bytes += p.bytes;
    topic.open->messages.push_back(std::move(p));
    if (topic.open->messages.size() >= options_.batch_max_messages || topic.open->bytes >= max_bytes ||
        options_.linger.count() <= 0) {
      seal(topic);
    }
    lock.unlock();
    sender_cv_.notify_one();
  }

  client::result<void> check(const outgoing_message& message) const { return check(message, conn_->server()); }

  client::result<void> check(const outgoing_message& message, const std::optional<client::server_info>& server) const {
    if (message.topic.empty()) return error(errc::invalid_argument, "a message needs a topic");
    if (server && server->max_message_bytes != 0 && message.body.size() > server->max_message_bytes) {
      return error(protocol::errc::message_too_large,
                   "message body of " + std::to_string(message.body.size()) + " bytes to topic '" + message.topic +
                       "' is above the broker's max_message_bytes of " + std::to_string(server->max_message_bytes));
    }
    return outcome::success();
  }

  client::result<send_result> send(outgoing_message message) {
    if (std::this_thread::get_id() == completion_thread_.get_id()) {
      return error(errc::would_deadlock, "producer::send() called from a completion callback; use async_send()");
    }
    auto done = std::make_shared<std::promise<client::result<send_result>>>();
    auto future = done->get_future();
    async_send(std::move(message), [done](client::result<send_result> r) { done->set_value(std::move(r)); });
    return future.get();
  }

  void send_now() {
    {
      std::lock_guard lock(mutex_);
      for (auto& [name, topic] : topics_) seal(topic);
    }
    sender_cv_.notify_one();
  }

  client::result<void> flush(std::chrono::milliseconds timeout) {
    if (std::this_thread::get_id() == completion_thread_.get_id()) {
      return error(errc::would_deadlock, "producer::flush() called from a completion callback");
    }
    std::unique_lock lock(mutex_);
    ++flushing_;
    sender_cv_.notify_one();
    auto drained = [&] { return in_flight_ == 0; };
    bool ok = true;
    if (timeout == std::chrono::milliseconds::max()) {
      room_cv_.wait(lock, drained);
    } else {
      ok = room_cv_.wait_for(lock, timeout, drained);
    }
    --flushing_;
    if (!ok) {
      return error(errc::timeout, std::to_string(in_flight_) + " messages still in flight after " +
                                      std::to_string(timeout.count()) + " ms");
    }
    // Everything that was accepted has completed; wait until its callbacks have run too.
    lock.unlock();
    wait_completions_drained();
    return outcome::success();
  }

  void close() {
    if (std::this_thread::get_id() == completion_thread_.get_id()) return;
    std::unique_lock lock(mutex_);
    if (!stopped_) {
      closed_ = true;
      room_cv_.notify_all();
      ++flushing_;
      sender_cv_.notify_one();
      room_cv_.wait(lock, [&] { return in_flight_ == 0; });
      --flushing_;
      stopped_ = true;
    }
    lock.unlock();
    sender_cv_.notify_one();
    if (sender_thread_.joinable()) sender_thread_.join();
    {
      std::lock_guard clock_guard(completion_mutex_);
      completions_stop_ = true;
    }
    completion_cv_.notify_one();
    if (completion_thread_.joinable()) completion_thread_.join();
    router_->close();
    if (owns_connection_) conn_->close();
  }

  std::size_t in_flight() const noexcept {
    std::lock_guard lock(mutex_);
    return in_flight_;
  }

  const std::shared_ptr<client::connection>& conn() const noexcept { return conn_; }

 private:
  // batch_max_bytes, but never past the broker's frame limit once it is known: a request above
  // it fails as frame_too_large and is not retried. An eighth of the limit is left for what the
  // estimate (approximate_bytes) does not count: the frame's own fields, headers' framing.
  std::size_t batch_bytes_limit(const std::optional<client::server_info>& server) const {
    if (!server || server->max_frame_bytes == 0) return options_.batch_max_bytes;
    return std::min<std::size_t>(options_.batch_max_bytes, server->max_frame_bytes - server->max_frame_bytes / 8);
  }

  static std::string queue_name(const std::string& topic, const std::string& address) {
    return address.empty() ? topic : topic + '\n' + address;
  }

  // Under mutex_.
  void seal(topic_state& topic) {
    if (!topic.open) return;
    topic.ready.push_back(std::move(topic.open));
    topic.open.reset();
  }

  void run_sender() {
    std::unique_lock lock(mutex_);
    for (;;) {
      const auto now = clock::now();
      auto next_wake = clock::time_point::max();
      std::vector<std::shared_ptr<batch>> due;
      for (auto& [name, topic] : topics_) {
        if (topic.open) {
          if (topic.open->linger_until <= now || flushing_ > 0) {
            seal(topic);
          } else {
            next_wake = std::min(next_wake, topic.open->linger_until);
          }
        }
        if (options_.max_in_flight_batches_per_topic != 0) continue;  // picked below, in seq order
        while (!topic.ready.empty()) {
          auto& front = topic.ready.front();
          if (front->not_before > now) {
            next_wake = std::min(next_wake, front->not_before);
            break;
          }
          due.push_back(std::move(front));
          topic.ready.pop_front();
          ++topic.in_flight_batches;
        }
      }
      if (options_.max_in_flight_batches_per_topic != 0) {
        // Per topic, over all its leader queues: the oldest ready batch goes first, and only
        // while the topic has fewer than the limit in flight; an oldest batch not yet due holds
        // the newer ones back (per-key order across a change of leader).
        for (;;) {
          topic_state* best = nullptr;
          std::map<std::string, std::uint64_t> oldest;  // topic -> lowest seq ready
          for (auto& [name, topic] : topics_) {
            if (topic.ready.empty()) continue;
            const auto& f = topic.ready.front();
            auto [it, inserted] = oldest.try_emplace(f->topic, f->seq);
            if (!inserted) it->second = std::min(it->second, f->seq);
          }
          for (auto& [name, topic] : topics_) {
            if (topic.ready.empty()) continue;
            const auto& f = topic.ready.front();
            if (f->seq != oldest[f->topic]) continue;
            if (topic_in_flight_[f->topic] >= options_.max_in_flight_batches_per_topic) continue;
            if (f->not_before > now) {
              next_wake = std::min(next_wake, f->not_before);
              continue;
            }
            best = &topic;
            break;
          }
          if (!best) break;
          ++topic_in_flight_[best->ready.front()->topic];
          due.push_back(std::move(best->ready.front()));
          best->ready.pop_front();
          ++best->in_flight_batches;
        }
      }
      if (!due.empty()) {
        lock.unlock();
        for (auto& b : due) dispatch(std::move(b));
        lock.lock();
        continue;
      }
      if (stopped_) return;
      if (next_wake == clock::time_point::max()) {
        sender_cv_.wait(lock);
      } else {
        sender_cv_.wait_until(lock, next_wake);
      }
    }
  }

  // Sends one batch, after failing the messages whose delivery timeout has passed.
  void dispatch(std::shared_ptr<batch> b) {
    const auto now = clock::now();
    expire(*b, now);
    if (b->messages.empty()) {
      batch_done(*b);
      return;
    }
    auto earliest = b->messages.front().deadline;
    for (const auto& m : b->messages) earliest = std::min(earliest, m.deadline);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(earliest - now);
    const auto timeout = std::clamp(left, std::chrono::milliseconds(1), options_.request_timeout);

    v1::Frame frame;
    auto* request = frame.mutable_produce();
    request->set_topic(b->topic);
    // The batch's messages are lent to the request, not copied into it (a copy of every id,
    // topic, key and body, freed again once encoded, was a fifth of txmq-relay's CPU: issue #15,
    // thirteenth round): encoded before async_request_encoding_now returns, they are taken back
    // (without touching them: a failure answered at once may have freed them already) before the
    // frame is destroyed, which would delete them.
    auto* lent = request->mutable_messages();
    lent->Reserve(static_cast<int>(b->messages.size()));
    for (auto& m : b->messages) lent->UnsafeArenaAddAllocated(&m.message);
    struct take_back {
      google::protobuf::RepeatedPtrField<v1::Message>* field;
      ~take_back() { field->UnsafeArenaExtractSubrange(0, field->size(), nullptr); }
    } guard{lent};
    ++b->attempts;
    router_->connection_for(b->address)
        ->async_request_encoding_now(frame, [this, b](client::result<v1::Frame> r) { on_response(b, std::move(r)); }, timeout);
  }

  // Runs on the connection's io thread: decide the batch's fate without blocking.
  void on_response(const std::shared_ptr<batch>& b, client::result<v1::Frame> r) {
    if (r) {
      const v1::Frame& frame = r.value();
      if (!frame.has_produce_response() ||
          static_cast<std::size_t>(frame.produce_response().positions_size()) != b->messages.size()) {
        fail(*b, error(errc::unexpected_response, "the broker answered a ProduceRequest of " +
                                                     std::to_string(b->messages.size()) + " messages to topic '" + b->topic +
                                                     "' with a frame of body " + std::to_string(static_cast<int>(frame.body_case())) +
                                                     " and " + std::to_string(frame.produce_response().positions_size()) +
                                                     " positions"));
        batch_done(*b);
        return;
      }
      // One completion for the batch, calling each message's callback in order (not one queued
      // std::function, allocated and locked in and out, per message).
      std::vector<std::pair<callback, send_result>> acked;
      acked.reserve(b->messages.size());
      for (std::size_t i = 0; i < b->messages.size(); ++i) {
        const auto& pos = frame.produce_response().positions(static_cast<int>(i));
        acked.emplace_back(std::move(b->messages[i].cb), send_result{b->messages[i].id, pos.partition(), pos.offset(), pos.duplicate()});
      }
      const std::size_t n = b->messages.size();
      std::vector<std::function<void()>> done;
      done.push_back([acked = std::make_shared<decltype(acked)>(std::move(acked))] {
        for (auto& [cb, sr] : *acked) {
          try {
            cb(sr);
          } catch (...) {
            // As run_completions: one callback's exception must not stop the others.
          }
        }
      });
      finish(n, std::move(done));
      b->messages.clear();
      batch_done(*b);
      return;
    }
    const error& e = r.error();
    if (!e.retriable()) {
      fail(*b, e);
      batch_done(*b);
      return;
    }
    b->last_error = e;
    const auto meta = router_->metadata();
    if (e.code == protocol::errc::not_leader || (meta && meta->cluster())) {
      // Leadership moved (or the leader is gone): learn the leaders again, then send the same
      // messages, same ids, to theirs.
      router_->async_refresh([this, b](client::result<void>) { reroute(b); });
      return;
    }
    expire(*b, clock::now());
    std::lock_guard lock(mutex_);
    auto& topic = topics_[b->queue];
    --topic.in_flight_batches;
    --topic_in_flight_[b->topic];
    if (!b->messages.empty()) {
      b->not_before = clock::now() + b->retry_delay.next();
      topic.ready.push_front(b);
    }
    sender_cv_.notify_one();
  }

  void batch_done(const batch& b) {
    std::lock_guard lock(mutex_);
    --topics_[b.queue].in_flight_batches;
    --topic_in_flight_[b.topic];
    sender_cv_.notify_one();
  }

  // After a metadata refresh: the batch's messages, in order, regrouped by their leaders now,
  // each group first in its leader's queue after the retry delay. Runs on a connection's io thread.
  void reroute(const std::shared_ptr<batch>& b) {
    expire(*b, clock::now());
    std::vector<std::shared_ptr<batch>> parts;
    for (auto& m : b->messages) {
      const std::string address = router_->leader_for(
          b->topic, m.message.has_key() ? std::optional<std::string>(m.message.key()) : std::nullopt);
      auto it = std::find_if(parts.begin(), parts.end(), [&](const auto& p) { return p->address == address; });
      if (it == parts.end()) {
        auto part = std::make_shared<batch>();
        part->topic = b->topic;
        part->address = address;
        part->queue = queue_name(b->topic, address);
        part->attempts = b->attempts;
        part->seq = b->seq;
        part->retry_delay = b->retry_delay;
        part->last_error = b->last_error;
        parts.push_back(part);
        it = std::prev(parts.end());
      }
      (*it)->bytes += m.bytes;
      (*it)->messages.push_back(std::move(m));
    }
    std::lock_guard lock(mutex_);
    --topics_[b->queue].in_flight_batches;
    --topic_in_flight_[b->topic];
    const auto not_before = clock::now() + b->retry_delay.next();
    for (auto& part : parts) {
      part->not_before = not_before;
      topics_[part->queue].ready.push_front(part);
    }
    sender_cv_.notify_one();
  }

  // Fails the batch's messages whose delivery timeout has passed, and in the ordered mode also
  // every message of the topic accepted before a failure (cut_): the batch's later messages
  // and the topic's later batches. Their deadlines come later, but sending them after an earlier
  // message was given up would store them before it once the application sends it again (the
  // relay publishes a given-up row again; a round's later rows of its key were stored first).
  void expire(batch& b, clock::time_point now) {
    const bool ordered = options_.max_in_flight_batches_per_topic != 0;
    std::uint64_t cut = 0;
    if (ordered) {
      std::lock_guard lock(mutex_);
      if (auto it = cut_.find(b.topic); it != cut_.end()) cut = it->second;
    }
    std::vector<std::function<void()>> done;
    std::vector<pending_message> keep;
    bool gave_up = false;
    for (auto& m : b.messages) {
      const bool overtakes = ordered && (gave_up || m.order < cut);
      if (m.deadline > now && !overtakes) {
        keep.push_back(std::move(m));
        continue;
      }
      std::string text;
      if (m.deadline > now) {
        text = "message " + m.id.to_string() + " to topic '" + b.topic +
               "' was given up too: an earlier message of the topic was given up, and with "
               "max_in_flight_batches_per_topic set no later message is sent after that (it would be stored before "
               "the earlier one once that is sent again); send both again, in order";
      } else {
        gave_up = true;
        text = "message " + m.id.to_string() + " to topic '" + b.topic + "' was not acknowledged within the delivery timeout of " +
               std::to_string(options_.delivery_timeout.count()) + " ms (" + std::to_string(b.attempts) + " attempts)";
        if (b.last_error) text += "; last error: " + b.last_error->to_string();
      }
      done.push_back([cb = std::move(m.cb), e = error(errc::delivery_timeout, std::move(text))] { cb(e); });
    }
    b.messages = std::move(keep);
    b.bytes = 0;
    for (const auto& m : b.messages) b.bytes += m.bytes;
    if (gave_up) cut_topic(b.topic);
    const std::size_t n = done.size();
    if (n != 0) finish(n, std::move(done));
  }

  // Ordered mode: every message of the topic accepted so far and not yet acknowledged fails
  // when it is next looked at (expire), without being sent. Later messages go out as usual.
  void cut_topic(const std::string& topic) {
    if (options_.max_in_flight_batches_per_topic == 0) return;
    std::lock_guard lock(mutex_);
    cut_[topic] = accepted_[topic];
  }

  void fail(batch& b, const error& e) {
    std::vector<std::function<void()>> done;
    for (auto& m : b.messages) done.push_back([cb = std::move(m.cb), e] { cb(e); });
    const auto n = b.messages.size();
    b.messages.clear();
    if (n != 0) cut_topic(b.topic);
    finish(n, std::move(done));
  }

  // Queues the callbacks of n completed messages, then frees their room at once (so blocked
  // senders go on even while a callback is slow). In that order: close() waits for no message
  // in flight and then stops the completion thread, which runs what is queued before it ends;
  // freeing the room first let close() stop it before these callbacks were queued, and their
  // futures never resolved.
  void finish(std::size_t n, std::vector<std::function<void()>> callbacks) {
    {
      std::lock_guard lock(completion_mutex_);
      for (auto& c : callbacks) completions_.push_back(std::move(c));
    }
    completion_cv_.notify_one();
    {
      std::lock_guard lock(mutex_);
      in_flight_ -= n;
    }
    room_cv_.notify_all();
  }

  void complete_now(callback cb, error e) {
    {
      std::lock_guard lock(completion_mutex_);
      if (!completions_stop_) {
        completions_.push_back([cb = std::move(cb), e = std::move(e)] { cb(e); });
        completion_cv_.notify_one();
        return;
      }
    }
    // After close() there is no completion thread: answer on the caller's.
    cb(std::move(e));
  }

  void run_completions() {
    std::unique_lock lock(completion_mutex_);
    for (;;) {
      completion_cv_.wait(lock, [&] { return completions_stop_ || !completions_.empty(); });
      if (completions_.empty()) return;
      auto next = std::move(completions_.front());
      completions_.pop_front();
      running_completion_ = true;
      lock.unlock();
      try {
        next();
      } catch (...) {
        // A user callback's exception must not stop the other completions.
      }
      lock.lock();
      running_completion_ = false;
      completion_idle_cv_.notify_all();
    }
  }

  void wait_completions_drained() {
    std::unique_lock lock(completion_mutex_);
    completion_idle_cv_.wait(lock, [&] { return completions_.empty() && !running_completion_; });
  }

  producer_options options_;
  std::shared_ptr<client::connection> conn_;
  bool owns_connection_;
  std::shared_ptr<client::leader_router> router_;

  mutable std::mutex mutex_;
  std::condition_variable room_cv_;    // in_flight_ went down, or closed_
  std::condition_variable sender_cv_;  // work for the sender thread
  std::map<std::string, topic_state> topics_;
  // In-flight batches per topic over all its leader queues (the limit's count), and the next
  // batch sequence number (batch::seq); under mutex_.
  std::map<std::string, std::size_t> topic_in_flight_;
  std::uint64_t next_seq_ = 0;
  // Per topic: messages accepted so far (each message's `order`), and in the ordered mode the
  // cut: messages accepted before it fail unsent (expire), because an earlier one was given up.
  // Under mutex_.
  std::map<std::string, std::uint64_t> accepted_;
  std::map<std::string, std::uint64_t> cut_;
  std::size_t in_flight_ = 0;
  int flushing_ = 0;
  bool closed_ = false;
  bool stopped_ = false;

  std::mutex completion_mutex_;
  std::condition_variable completion_cv_;
  std::condition_variable completion_idle_cv_;
  std::deque<std::function<void()>> completions_;
  bool completions_stop_ = false;
  bool running_completion_ = false;

  std::thread completion_thread_;
  std::thread sender_thread_;
};

producer::producer(producer_options options) {
  auto conn = std::make_shared<client::connection>(options.connection);
  impl_ = std::make_unique<impl>(std::move(conn), std::move(options), true);
}

producer::producer(std::shared_ptr<client::connection> conn, producer_options options)
    : impl_(std::make_unique<impl>(std::move(conn), std::move(options), false)) {}

producer::~producer() = default;

client::result<send_result> producer::send(outgoing_message message) { return impl_->send(std::move(message)); }

std::future<client::result<send_result>> producer::async_send(outgoing_message message) {
  auto done = std::make_shared<std::promise<client::result<send_result>>>();
  auto future = done->get_future();
  impl_->async_send(std::move(message), [done](client::result<send_result> r) { done->set_value(std::move(r)); });
  return future;
}

void producer::async_send(outgoing_message message, callback cb) { impl_->async_send(std::move(message), std::move(cb)); }

client::result<void> producer::check(const outgoing_message& message) const { return impl_->check(message); }

void producer::send_now() { impl_->send_now(); }
client::result<void> producer::flush(std::chrono::milliseconds timeout) { return impl_->flush(timeout); }
void producer::close() { impl_->close(); }
std::size_t producer::in_flight() const noexcept { return impl_->in_flight(); }
const std::shared_ptr<client::connection>& producer::conn() const noexcept { return impl_->conn(); }

}  // namespace txmq::producer
