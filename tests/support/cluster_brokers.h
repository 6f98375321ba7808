#pragma once

// etcd and three txmq-broker processes for the cluster tests (issue 14): started on free
// loopback ports in temporary directories, stopped by PID when the object goes. Helpers read
// the cluster's view through Metadata, create topics, and read a broker's local offsets.
// Header-only; every wait is bounded.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "broker_process.h"
#include "etcd_process.h"
#include "eventually.h"
#include "txmq/client/admin.h"
#include "txmq/client/connection.h"

namespace txmq::test {

// A connection with short deadlines, or nullptr when the broker does not answer.
// `base` carries TLS and a token for a secured cluster (cluster_security_test).
inline std::shared_ptr<client::connection> connect_to(const std::string& address,
                                                      std::chrono::milliseconds request_timeout = std::chrono::seconds(15),
                                                      client::connection_options base = {}) {
  client::connection_options o = std::move(base);
  o.address = address;
  o.connect_timeout = std::chrono::milliseconds(3000);
  o.request_timeout = request_timeout;
  auto c = client::connection::connect(o);
  if (!c) return nullptr;
  return c.value();
}

struct partition_view {
  std::int64_t leader = -1;
  std::int64_t epoch = 0;
  std::string leader_address;
  std::vector<std::int64_t> isr;
};

class cluster_brokers {
 public:
  // Starts etcd (the caller checked etcd_process::available()).
  cluster_brokers() { etcd_.start(); }

  // Brokers 1-3 with `extra` flags after the cluster ones.
  void start(const std::vector<std::string>& extra = {}) {
    for (int id = 1; id <= 3; ++id) {
      std::vector<std::string> args{"--cluster-etcd", etcd_.url(), "--node-id", std::to_string(id)};
      args.insert(args.end(), extra.begin(), extra.end());
      brokers_[id] = std::make_unique<broker_process>(args);
      brokers_[id]->start();
    }
  }
  broker_process& broker(int id) { return *brokers_.at(id); }
  etcd_process& etcd() { return etcd_; }
  // TLS settings and token of every connection the helpers below make (a secured cluster).
  void set_client_options(client::connection_options o) { client_ = std::move(o); }
  std::shared_ptr<client::connection> connect(const std::string& address) {
    return connect_to(address, std::chrono::seconds(15), client_);
  }
  const std::map<int, std::unique_ptr<broker_process>>& all() const { return brokers_; }

  // Every broker's log without the settings lines, the last 8000 bytes of each.
  std::string logs() const {
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
  std::string bootstrap() const {
    std::string s;
    for (const auto& [id, b] : brokers_) s += (s.empty() ? "" : ",") + b->address();
    return s;
  }
  // The broker id listening on `address`, 0 if none.
  int id_of(const std::string& address) const {
    for (const auto& [id, b] : brokers_) {
      if (b->address() == address) return id;
    }
    return 0;
  }

  // A partition's state from any live broker's Metadata.
  std::optional<partition_view> view(const std::string& topic, std::int32_t partition = 0) {
    for (const auto& [id, b] : brokers_) {
      if (!b->running()) continue;
      auto c = connect(b->address());
      if (!c) continue;
      v1::Frame f;
      f.mutable_metadata()->add_topics(topic);
      auto r = c->request(std::move(f), std::chrono::milliseconds(2000));
      if (!r || !r.value().has_metadata_response()) continue;
      for (const auto& t : r.value().metadata_response().topics()) {
        for (const auto& p : t.partition_info()) {
          if (static_cast<std::int32_t>(p.partition()) != partition) continue;
          partition_view v;
          v.leader = p.leader();
          v.epoch = p.leader_epoch();
          v.leader_address = p.leader_address();
          v.isr.assign(p.isr().begin(), p.isr().end());
          return v;
        }
      }
    }
    return std::nullopt;
  }

  // Creates the topic once three nodes are live and waits until every partition has a leader
  // and a whole ISR. Returns false (and says why in `why`) when that does not happen in 20 s.
  bool create_topic(const std::string& name, std::uint32_t partitions, std::uint32_t replicas, std::string& why) {
    std::shared_ptr<client::connection> c;
    if (!eventually([&] {
          c = connect(brokers_.at(1)->address());
          if (!c) return false;
          v1::Frame f;
          f.mutable_metadata();
          auto r = c->request(std::move(f), std::chrono::milliseconds(2000));
          return r && r.value().metadata_response().nodes_size() == 3;
        })) {
      why = "three nodes never live\n" + logs();
      return false;
    }
    client::admin admin(c);
    auto r = admin.create_topic({.name = name, .partitions = partitions, .replicas = replicas});
    if (!r) {
      why = r.error().to_string();
      return false;
    }
    if (!eventually([&] {
          for (std::uint32_t p = 0; p < partitions; ++p) {
            auto v = view(name, static_cast<std::int32_t>(p));
            if (!v || v->leader <= 0 || v->isr.size() != replicas) return false;
          }
          return true;
        })) {
      why = "partitions never led with a whole ISR\n" + logs();
      return false;
    }
    return true;
  }

  // Broker `id`'s local end offset of the partition (DescribeTopic), 0 when it cannot say.
  std::uint64_t end_offset(int id, const std::string& topic, std::uint32_t partition = 0) {
    auto c = connect(brokers_.at(id)->address());
    if (!c) return 0;
    client::admin admin(c);
    auto info = admin.describe_topic(topic);
    if (!info || info.value().partition_info_size() <= static_cast<int>(partition)) return 0;
    return info.value().partition_info(static_cast<int>(partition)).end_offset();
  }

 private:
  etcd_process etcd_;
  std::map<int, std::unique_ptr<broker_process>> brokers_;
  client::connection_options client_;
};

}  // namespace txmq::test
