// etcd + three brokers for the cluster tests (cluster_brokers.h).

#include "cluster_brokers.h"

#include <iostream>
#include <set>
#include <sstream>

#include "eventually.h"
#include "txmq/client/admin.h"

namespace txmq::test {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

std::shared_ptr<client::connection> connect_to(const std::string& address, milliseconds request_timeout,
                                               client::connection_options base) {
  client::connection_options o = std::move(base);
  o.address = address;
  o.connect_timeout = milliseconds(3000);
  o.request_timeout = request_timeout;
  auto c = client::connection::connect(o);
  if (!c) return nullptr;
  return c.value();
}

cluster_brokers::cluster_brokers(const std::string& etcd_host) : etcd_(etcd_host) { etcd_.start(); }

void cluster_brokers::make(const std::vector<std::string>& extra) {
  brokers_.clear();
  for (int id = 1; id <= 3; ++id) {
    std::vector<std::string> a{"--cluster-etcd", etcd_.url(), "--node-id", std::to_string(id)};
    a.insert(a.end(), extra.begin(), extra.end());
    brokers_[id] = std::make_unique<broker_process>(a);
  }
}

void cluster_brokers::start(const std::vector<std::string>& extra) {
  make(extra);
  start_all();
}

cluster_brokers::~cluster_brokers() = default;

void cluster_brokers::start_all() {
  for (auto& [id, b] : brokers_) b->start();
}

std::string cluster_brokers::logs() const {
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

int cluster_brokers::id_of(const std::string& address) const {
  for (const auto& [id, b] : brokers_) {
    if (b->address() == address) return id;
  }
  return 0;
}

std::string cluster_brokers::bootstrap() const {
  std::string s;
  for (const auto& [id, b] : brokers_) s += (s.empty() ? "" : ",") + b->address();
  return s;
}

std::optional<partition_view> cluster_brokers::view(const std::string& topic, std::int32_t partition, int from) {
  for (const auto& [id, b] : brokers_) {
    if (!b->running() || (from != 0 && id != from)) continue;
    auto c = connect(b->address(), 2000ms);
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
        v.leader_address = p.leader_address();
        v.isr.assign(p.isr().begin(), p.isr().end());
        v.replicas.assign(p.replicas().begin(), p.replicas().end());
        return v;
      }
    }
  }
  return std::nullopt;
}

bool cluster_brokers::create_topic(const std::string& name, std::uint32_t partitions, std::uint32_t replicas,
                                   std::string& why, std::uint64_t retention_bytes) {
  std::shared_ptr<client::connection> c;
  if (!eventually([&] {
        c = connect(brokers_.begin()->second->address(), 5000ms);
        if (!c) return false;
        v1::Frame f;
        f.mutable_metadata();
        auto r = c->request(std::move(f), milliseconds(2000));
        return r && r.value().metadata_response().nodes_size() == 3;
      }, 20s)) {
    why = "three nodes never registered\n" + logs();
    return false;
  }
  client::admin admin(c);
  auto r = admin.create_topic({.name = name, .partitions = partitions, .retention_bytes = retention_bytes, .replicas = replicas});
  if (!r) {
    why = r.error().to_string();
    return false;
  }
  // Each broker refreshes its copy of the cluster state on its own: one may still lack the
  // topic, or hold it without its partitions (leader -1), after another has seen the leader.
  // A test that asks view() next must get the same answer from whichever broker replies, so
  // wait until every running broker sees the same leader and epoch with a whole ISR (CI once
  // read leader -1 here and indexed the brokers with it).
  for (std::uint32_t p = 0; p < partitions; ++p) {
    if (!eventually([&] {
          std::optional<partition_view> first;
          for (const auto& [id, b] : brokers_) {
            if (!b->running()) continue;
            auto v = view(name, static_cast<std::int32_t>(p), id);
            if (!v || v->leader <= 0 || v->isr.size() != replicas) return false;
            if (!first) first = v;
            else if (v->leader != first->leader || v->epoch != first->epoch) return false;
          }
          return first.has_value();
        }, 30s)) {
      why = "partition " + std::to_string(p) + " has no leader with a whole ISR on every broker\n" + logs();
      return false;
    }
  }
  return true;
}

namespace {
// Broker `address`'s DescribeTopic of the partition, nullopt when it cannot say.
std::optional<v1::PartitionInfo> describe(const std::string& address, const std::string& topic, std::uint32_t partition,
                                          const client::connection_options& options) {
  auto c = connect_to(address, 5000ms, options);
  if (!c) return std::nullopt;
  client::admin admin(c);
  auto info = admin.describe_topic(topic);
  if (!info) return std::nullopt;
  for (const auto& p : info.value().partition_info()) {
    if (p.partition() == partition) return p;
  }
  return std::nullopt;
}
}  // namespace

std::uint64_t cluster_brokers::end_offset(int id, const std::string& topic, std::uint32_t partition) {
  auto p = describe(brokers_.at(id)->address(), topic, partition, client_);
  return p ? p->end_offset() : 0;
}

std::uint64_t cluster_brokers::start_offset(int id, const std::string& topic, std::uint32_t partition) {
  auto p = describe(brokers_.at(id)->address(), topic, partition, client_);
  return p ? p->start_offset() : 0;
}

bool cluster_brokers::consume_all(int id, const std::string& topic, std::int32_t partition, history& h,
                                     const std::string& group, std::set<std::uint64_t>* read_before) {
  auto c = connect(brokers_.at(id)->address());
  if (!c) return false;
  const std::uint64_t end = end_offset(id, topic, static_cast<std::uint32_t>(partition));
  const std::uint64_t start = start_offset(id, topic, static_cast<std::uint32_t>(partition));
  std::set<std::uint64_t> own;
  auto& seen = read_before != nullptr ? *read_before : own;
  // For the failure message: a read-back that stalls says whether its requests failed, timed
  // out or came back empty (seen once in a SIGKILL run, unexplained).
  int fetches = 0, empty = 0, fetch_failures = 0, ack_failures = 0;
  std::string last_failure;
  bool moved = false;
  const bool found = eventually([&] {
    v1::Frame f;
    auto* fetch = f.mutable_fetch();
    fetch->set_group(group);
    fetch->add_topics(topic);
    fetch->set_max_messages(2000);
    fetch->set_max_wait_ms(100);
    fetch->set_ack_deadline_ms(600000);
    auto r = c->request(std::move(f), milliseconds(5000));
    ++fetches;
    if (!r) {
      ++fetch_failures;
      last_failure = "fetch: " + r.error().to_string();
      // Leadership moved (the controller reassigns a partition whose leader's session lapsed
      // during an etcd outage, seconds after etcd returns): this broker will not serve it again.
      if (r.error().is(protocol::errc::not_leader)) {
        moved = true;
        return true;
      }
    } else if (!r.value().has_fetch_response()) {
      ++fetch_failures;
      last_failure = "fetch answered with " + r.value().ShortDebugString().substr(0, 200);
    } else if (r.value().fetch_response().deliveries().empty()) {
      ++empty;
    }
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
      if (ack.ack().refs_size() > 0) {
        auto a = c->request(std::move(ack), milliseconds(5000));
        if (!a) {
          ++ack_failures;
          last_failure = "ack: " + a.error().to_string();
        } else if (a.value().has_error()) {
          ++ack_failures;
          last_failure = "ack answered with " + a.value().error().ShortDebugString().substr(0, 200);
        }
      }
    }
    return seen.size() >= end - std::min(end, start);
  }, 120s);
  const bool all = found && !moved;
  if (!all) {
    std::uint64_t first_missing = start;
    while (seen.contains(first_missing)) ++first_missing;
    std::cerr << "consume_all: read " << seen.size() << " distinct offsets of [" << start << ", " << end << ")" << " from broker " << id
              << " (the first missing: " << first_missing << "); " << fetches << " fetches, " << empty << " empty, "
              << fetch_failures << " failed, " << ack_failures << " acks failed" << (last_failure.empty() ? "" : "; last: ")
              << last_failure << "\n";
  }
  return all;
}

bool cluster_brokers::consume_all_from_leader(const std::string& topic, std::int32_t partition, history& h,
                                              const std::string& group) {
  // The offsets read (and acked) through the old leader count: the group's progress moved with
  // the partition, so the new leader does not hand them out again (seen once: 817 offsets read
  // from broker 2, then NOT_LEADER, then the other 9,344 from broker 3).
  std::set<std::uint64_t> seen;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const auto v = view(topic, partition);
    if (v && v->leader > 0 && consume_all(static_cast<int>(v->leader), topic, partition, h, group, &seen)) return true;
  }
  return false;
}

std::vector<std::int64_t> cluster_brokers::nodes(int from) {
  std::vector<std::int64_t> out;
  auto c = connect(brokers_.at(from)->address(), 2000ms);
  if (!c) return out;
  v1::Frame f;
  f.mutable_metadata();
  auto r = c->request(std::move(f), milliseconds(2000));
  if (!r || !r.value().has_metadata_response()) return out;
  for (const auto& n : r.value().metadata_response().nodes()) out.push_back(n.id());
  return out;
}

std::optional<double> cluster_brokers::metric(int id, const std::string& name) {
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

}  // namespace txmq::test
