#pragma once

// A keyed produce stream for the cluster fault tests (issue 14): a producer thread sends
// messages of 8 keys ("k0".."k7", bodies "kN#SEQ") as fast as 200 in flight allow, records every
// attempt and its outcome in a history (history_checker.h), and keeps the time of every
// acknowledgement, for failover figures. Producer settings are the library's defaults but for
// the bootstrap list, a short linger, a long delivery timeout and, when given, the retry back-off.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "history_checker.h"
#include "txmq/producer/producer.h"

namespace txmq::test {

class keyed_stream {
 public:
  using clock = std::chrono::steady_clock;

  keyed_stream(const std::string& bootstrap, std::string topic, history& h,
               std::optional<std::chrono::milliseconds> retry_backoff_max = std::nullopt,
               client::connection_options connection = {})
      : topic_(std::move(topic)), h_(h) {
    producer::producer_options o;
    o.connection = std::move(connection);  // TLS and a token for a secured cluster
    o.connection.address = bootstrap;
    o.connection.connect_timeout = std::chrono::milliseconds(2000);
    o.delivery_timeout = std::chrono::milliseconds(40000);
    o.linger = std::chrono::milliseconds(1);
    if (retry_backoff_max) o.retry_backoff_max = *retry_backoff_max;
    o.max_in_flight_messages = 200;
    p_ = std::make_unique<producer::producer>(o);
    thread_ = std::thread([this] { run(); });
  }
  ~keyed_stream() { stop(); }
  keyed_stream(const keyed_stream&) = delete;
  keyed_stream& operator=(const keyed_stream&) = delete;

  // Stops sending and waits (up to a minute) for the outcome of everything sent.
  void stop() {
    if (stopping_.exchange(true)) return;
    thread_.join();
    (void)p_->flush(std::chrono::seconds(60));
    p_->close();
  }
  [[nodiscard]] std::uint64_t acks() const { return acks_.load(); }
  // The latest acknowledgement so far (the epoch of the clock when there is none).
  [[nodiscard]] clock::time_point last_ack() const {
    std::lock_guard lk(mu_);
    return ack_times_.empty() ? clock::time_point{} : ack_times_.back();
  }
  [[nodiscard]] std::optional<clock::time_point> first_ack_after(clock::time_point t) const {
    std::lock_guard lk(mu_);
    auto it = std::upper_bound(ack_times_.begin(), ack_times_.end(), t);
    if (it == ack_times_.end()) return std::nullopt;
    return *it;
  }
  // The longest time without an acknowledgement between `from` and `to` (both ends count as
  // the edges of the window): what a failover costs the stream.
  [[nodiscard]] std::chrono::milliseconds longest_silence(clock::time_point from, clock::time_point to) const {
    std::lock_guard lk(mu_);
    auto prev = from;
    clock::duration longest{0};
    for (auto a : ack_times_) {
      if (a <= from) continue;
      if (a > to) break;
      longest = std::max(longest, a - prev);
      prev = a;
    }
    longest = std::max(longest, to - prev);
    return std::chrono::duration_cast<std::chrono::milliseconds>(longest);
  }

 private:
  void run() {
    std::map<std::string, std::uint64_t> seq;
    std::uint64_t n = 0;
    while (!stopping_) {
      const std::string key = "k" + std::to_string(n % 8);
      const auto s = seq[key]++;
      producer::outgoing_message m;
      m.topic = topic_;
      m.key = key;
      m.body = key + "#" + std::to_string(s);
      m.id = protocol::uuid::make_v7();
      const std::string id(m.id->raw());
      h_.attempt(id, key, m.body, s);
      p_->async_send(std::move(m), [this, id](client::result<producer::send_result> r) {
        if (r) {
          h_.resolve(id, attempt_outcome::acknowledged);
          std::lock_guard lk(mu_);
          // Callbacks may come from several connections' threads: keep the times sorted.
          const auto now = clock::now();
          ack_times_.insert(std::upper_bound(ack_times_.begin(), ack_times_.end(), now), now);
          acks_.fetch_add(1);
        } else {
          // A delivery timeout or an error after retries: the write may or may not be kept.
          h_.resolve(id, attempt_outcome::unknown);
        }
      });
      ++n;
    }
  }

  std::string topic_;
  history& h_;
  std::unique_ptr<producer::producer> p_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> acks_{0};
  mutable std::mutex mu_;
  std::vector<clock::time_point> ack_times_;
};

}  // namespace txmq::test
