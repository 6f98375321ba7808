// etcd + three brokers with replicated topics, and a keyed produce stream (replicated_cluster.h).

#include "replicated_cluster.h"

#include <algorithm>
#include <iostream>
#include <set>
#include <sstream>

#include "etcd_process.h"
#include "eventually.h"
#include "txmq/client/admin.h"
#include "txmq/producer/producer.h"
#include "txmq/protocol/partitioner.h"
#include "txmq/protocol/message_id.h"

namespace txmq::test {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using namespace std::chrono_literals;

std::shared_ptr<client::connection> connect_to(const std::string& address, milliseconds request_timeout) {
  client::connection_options o;
  o.address = address;
  o.connect_timeout = milliseconds(3000);
  o.request_timeout = request_timeout;
  auto c = client::connection::connect(o);
  if (!c) return nullptr;
  return c.value();
}

std::string key_for_partition(const std::string& prefix, std::uint32_t partition, std::uint32_t partitions) {
  for (int i = 0;; ++i) {
    std::string k = prefix + std::to_string(i);
    if (protocol::partition_for_key(k, partitions) == partition) return k;
  }
}

replicated_cluster::replicated_cluster(const std::string& etcd_url, const std::vector<std::string>& args) {
  for (int id = 1; id <= 3; ++id) {
    std::vector<std::string> a{"--cluster-etcd", etcd_url, "--node-id", std::to_string(id)};
    a.insert(a.end(), args.begin(), args.end());
    brokers_[id] = std::make_unique<broker_process>(a);
  }
}

replicated_cluster::~replicated_cluster() = default;

void replicated_cluster::start_all() {
  for (auto& [id, b] : brokers_) b->start();
}

std::string replicated_cluster::logs() const {
  std::string out;
  for (const auto& [id, b] : brokers_) {
    std::string l;
    std::istringstream in(b->log());
    for (std::string line; std::getline(in, line);) {
      if (line.find(" = ") == std::string::npos) l += line + "\n";
    }
    if (l.size() > 8000) l = "..." + l.substr(l.size() - 8000);
    out += "--- broker " + std::to_string(id) + "\n" + l;
  }
  return out;
}

std::string replicated_cluster::bootstrap() const {
  std::string s;
  for (const auto& [id, b] : brokers_) s += (s.empty() ? "" : ",") + b->address();
  return s;
}

std::optional<partition_view> replicated_cluster::view(const std::string& topic, std::int32_t partition, int from) {
  for (const auto& [id, b] : brokers_) {
    if (!b->running() || (from != 0 && id != from)) continue;
    auto c = connect_to(b->address(), 2000ms);
    if (!c) continue;
    v1::Frame f;
    f.mutable_metadata()->add_topics(topic);
    auto r = c->request(std::move(f), milliseconds(2000));
    if (!r || !r.value().has_metadata_response()) continue;
    for (const auto& t : r.value().metadata_response().topics()) {
      for (const auto& p : t.partition_info()) {
        if (static_cast<std::int32_t>(p.partition()) != partition) continue;
        partition_view v;
        v.leader = p.leader();
        v.epoch = p.leader_epoch();
        v.isr.assign(p.isr().begin(), p.isr().end());
        v.replicas.assign(p.replicas().begin(), p.replicas().end());
        return v;
      }
    }
  }
  return std::nullopt;
}

bool replicated_cluster::create_topic(const std::string& topic, std::int32_t partitions, std::int32_t replicas,
                                      std::string* why) {
  std::shared_ptr<client::connection> c;
  if (!eventually([&] {
        c = connect_to(brokers_.begin()->second->address(), 5000ms);
        if (!c) return false;
        v1::Frame f;
        f.mutable_metadata();
        auto r = c->request(std::move(f), milliseconds(2000));
        return r && r.value().metadata_response().nodes_size() == 3;
      }, 20s)) {
    *why = "three nodes never registered";
    return false;
  }
  client::admin admin(c);
  auto r = admin.create_topic({.name = topic, .partitions = static_cast<std::uint32_t>(partitions), .replicas = static_cast<std::uint32_t>(replicas)});
  if (!r) {
    *why = r.error().to_string();
    return false;
  }
  for (std::int32_t p = 0; p < partitions; ++p) {
    if (!eventually([&] {
          auto v = view(topic, p);
          return v && v->leader > 0 && static_cast<std::int32_t>(v->isr.size()) == replicas;
        }, 30s)) {
      *why = "partition " + std::to_string(p) + " has no leader with a whole ISR";
      return false;
    }
  }
  return true;
}

std::uint64_t replicated_cluster::end_offset(int id, const std::string& topic, std::int32_t partition) {
  auto c = connect_to(brokers_.at(id)->address(), 5000ms);
  if (!c) return 0;
  client::admin admin(c);
  auto info = admin.describe_topic(topic);
  if (!info) return 0;
  for (const auto& p : info.value().partition_info()) {
    if (static_cast<std::int32_t>(p.partition()) == partition) return p.end_offset();
  }
  return 0;
}

bool replicated_cluster::consume_all(int id, const std::string& topic, std::int32_t partition, history& h,
                                     const std::string& group) {
  auto c = connect_to(brokers_.at(id)->address());
  if (!c) return false;
  const std::uint64_t end = end_offset(id, topic, partition);
  std::set<std::uint64_t> seen;
  const bool all = eventually([&] {
    v1::Frame f;
    auto* fetch = f.mutable_fetch();
    fetch->set_group(group);
    fetch->add_topics(topic);
    fetch->set_max_messages(2000);
    fetch->set_max_wait_ms(100);
    fetch->set_ack_deadline_ms(600000);
    auto r = c->request(std::move(f), milliseconds(5000));
    if (r && r.value().has_fetch_response()) {
      // Acked at once: a group hands out a key's next message only after the previous is acked.
      v1::Frame ack;
      ack.mutable_ack()->set_group(group);
      for (const auto& d : r.value().fetch_response().deliveries()) {
        const auto& m = d.message();
        auto* ref = ack.mutable_ack()->add_refs();
        ref->set_topic(m.topic());
        ref->set_partition(m.partition());
        ref->set_offset(m.offset());
        if (static_cast<std::int32_t>(m.partition()) != partition) continue;
        h.consumed(m.id(), m.key(), m.body(), m.partition(), m.offset());
        seen.insert(m.offset());
      }
      if (ack.ack().refs_size() > 0) (void)c->request(std::move(ack), milliseconds(5000));
    }
    return seen.size() >= end;
  }, 120s);
  if (!all) {
    std::uint64_t first_missing = 0;
    while (seen.contains(first_missing)) ++first_missing;
    std::cerr << "consume_all: read " << seen.size() << " distinct offsets of " << end << " from broker " << id
              << " (the first missing: " << first_missing << ")\n";
  }
  return all;
}

std::vector<std::int64_t> replicated_cluster::nodes(int from) {
  std::vector<std::int64_t> out;
  auto c = connect_to(brokers_.at(from)->address(), 2000ms);
  if (!c) return out;
  v1::Frame f;
  f.mutable_metadata();
  auto r = c->request(std::move(f), milliseconds(2000));
  if (!r || !r.value().has_metadata_response()) return out;
  for (const auto& n : r.value().metadata_response().nodes()) out.push_back(n.id());
  return out;
}

std::optional<double> replicated_cluster::metric(int id, const std::string& name) {
  auto& b = *brokers_.at(id);
  const auto addr = b.address();
  const std::string host = addr.substr(0, addr.rfind(':'));
  const std::string page = http_get_from(host, b.http_port(), "/metrics");
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name, 0) != 0) continue;
    const auto rest = line.substr(name.size());
    // The name must end here: a space (no labels) or the labels' brace, or the labels given.
    if (!rest.empty() && rest[0] != ' ' && rest[0] != '{' && name.back() != '}') continue;
    const auto sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    try {
      return std::stod(line.substr(sp + 1));
    } catch (...) {
      return std::nullopt;
    }
  }
  return std::nullopt;
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
