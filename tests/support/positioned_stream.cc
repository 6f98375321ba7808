// A paced keyed produce stream that records where each write was acknowledged
// (positioned_stream.h).

#include "positioned_stream.h"

#include <algorithm>
#include <map>

#include "txmq/producer/producer.h"
#include "txmq/protocol/message_id.h"
#include "txmq/protocol/partitioner.h"

namespace txmq::test {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string key_for_partition(const std::string& prefix, std::uint32_t partition, std::uint32_t partitions) {
  for (int i = 0;; ++i) {
    std::string k = prefix + std::to_string(i);
    if (protocol::partition_for_key(k, partitions) == partition) return k;
  }
}

positioned_stream::positioned_stream(const std::string& bootstrap, history& h, options o) : h_(h), o_(std::move(o)) {
  if (o_.keys.empty()) {
    // 32 keys: a group hands out one message per key at a time, so reading the log back takes
    // (messages / keys) fetches.
    for (int i = 0; i < 32; ++i) o_.keys.push_back("k" + std::to_string(i));
  }
  producer::producer_options po;
  po.connection.address = bootstrap;
  po.connection.connect_timeout = 2000ms;
  po.delivery_timeout = o_.delivery_timeout;
  // Short: a request queued on the connection to a dead leader's address waits for the
  // reconnect until this passes (the client's behaviour), which bounds the failover time.
  po.request_timeout = o_.request_timeout;
  po.linger = 1ms;
  po.retry_backoff_max = 300ms;
  po.max_in_flight_messages = 200;
  p_ = std::make_unique<producer::producer>(po);
  thread_ = std::thread([this] { run(); });
}

positioned_stream::~positioned_stream() { stop(); }

void positioned_stream::stop() {
  if (stopping_.exchange(true)) return;
  thread_.join();
  (void)p_->flush(60s);
  p_->close();
}

steady_clock::time_point positioned_stream::last_ack() const {
  std::lock_guard lk(mu_);
  return acks_at_.empty() ? steady_clock::time_point{} : acks_at_.back().at;
}

std::optional<steady_clock::time_point> positioned_stream::first_ack_after(steady_clock::time_point t) const {
  std::lock_guard lk(mu_);
  for (const auto& a : acks_at_) {
    if (a.at > t) return a.at;
  }
  return std::nullopt;
}

std::optional<steady_clock::time_point> positioned_stream::first_ack_after(steady_clock::time_point t,
                                                                      std::uint32_t partition) const {
  std::lock_guard lk(mu_);
  for (const auto& a : acks_at_) {
    if (a.at > t && a.partition == partition) return a.at;
  }
  return std::nullopt;
}

std::uint64_t positioned_stream::acks_between(steady_clock::time_point from, steady_clock::time_point to) const {
  std::lock_guard lk(mu_);
  return static_cast<std::uint64_t>(
      std::count_if(acks_at_.begin(), acks_at_.end(), [&](const ack& a) { return a.at >= from && a.at < to; }));
}

std::uint64_t positioned_stream::acks_of_attempts(steady_clock::time_point from, steady_clock::time_point to,
                                             std::optional<std::uint32_t> partition) const {
  std::lock_guard lk(mu_);
  return static_cast<std::uint64_t>(std::count_if(acks_at_.begin(), acks_at_.end(), [&](const ack& a) {
    return a.attempted >= from && a.at < to && (!partition || a.partition == *partition);
  }));
}

milliseconds positioned_stream::longest_gap(steady_clock::time_point from, steady_clock::time_point to,
                                       std::optional<std::uint32_t> partition) const {
  std::lock_guard lk(mu_);
  auto prev = from;
  steady_clock::duration longest{0};
  for (const auto& a : acks_at_) {
    if (a.at < from || (partition && a.partition != *partition)) continue;
    if (a.at >= to) break;
    longest = std::max(longest, a.at - prev);
    prev = a.at;
  }
  longest = std::max(longest, to - prev);
  return std::chrono::duration_cast<milliseconds>(longest);
}

void positioned_stream::run() {
  std::map<std::string, std::uint64_t> seq;
  std::uint64_t n = 0;
  const auto started = steady_clock::now();
  while (!stopping_) {
    if (o_.per_second > 0) {
      // A rate limit, not a synchronization: attempt n is due n / per_second after the start.
      const auto due = started + milliseconds(n * 1000 / static_cast<std::uint64_t>(o_.per_second));
      if (due > steady_clock::now()) {
        std::this_thread::sleep_until(std::min(due, steady_clock::now() + 50ms));
        continue;
      }
    }
    const std::string& key = o_.keys[n % o_.keys.size()];
    const auto s = seq[key]++;
    producer::outgoing_message m;
    m.topic = o_.topic;
    m.key = key;
    m.body = key + "#" + std::to_string(s);
    m.id = protocol::uuid::make_v7();
    const std::string id(m.id->raw());
    h_.attempt(id, key, m.body, s);
    const auto attempted = steady_clock::now();
    p_->async_send(std::move(m), [this, id, attempted](client::result<producer::send_result> r) {
      if (r) {
        h_.acknowledged_at(id, r.value().partition, r.value().offset);
        h_.resolve(id, attempt_outcome::acknowledged);
        std::lock_guard lk(mu_);
        acks_at_.push_back({steady_clock::now(), r.value().partition, attempted});
        acks_.fetch_add(1);
      } else {
        // A delivery timeout or an error after retries: the write may or may not be kept.
        h_.resolve(id, attempt_outcome::unknown);
      }
    });
    ++n;
  }
}

}  // namespace txmq::test
