#pragma once

// etcd and three txmq-broker processes for the cluster tests (issue 14): started on free
// loopback ports (or a test network's addresses: set_launch) in temporary directories, stopped
// by PID when the object goes. Helpers read the cluster's view through Metadata, create topics
// and wait for them, read a broker's local offsets, its whole local log (consume_all) and its
// /metrics. Every wait is bounded. The one fixture of the cluster tests: a keyed produce
// stream with positions is positioned_stream.h, the unpaced one keyed_stream.h.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "broker_process.h"
#include "etcd_process.h"
#include "history_checker.h"
#include "txmq/client/connection.h"

namespace txmq::test {

// A connection with short deadlines, or nullptr when the broker does not answer.
// `base` carries TLS and a token for a secured cluster (cluster_security_test).
std::shared_ptr<client::connection> connect_to(const std::string& address,
                                               std::chrono::milliseconds request_timeout = std::chrono::seconds(15),
                                               client::connection_options base = {});

struct partition_view {
  std::int64_t leader = -1;
  std::int64_t epoch = 0;
  std::string leader_address;
  std::vector<std::int64_t> isr;
  std::vector<std::int64_t> replicas;
};

// The flags of the transaction tests: a 3 s lease, quick check-backs (1 s to the first, then
// every 500 ms), `tx_max_checks` high enough that nothing is abandoned during a test, and then
// `extra`.
inline std::vector<std::string> tx_test_flags(std::vector<std::string> extra = {}) {
  std::vector<std::string> flags{"--node-lease-ttl", "3s", "--replica-lag-max", "4s", "--replication-timeout", "10s",
                                 "--tx-timeout", "1s", "--tx-check-schedule", "500ms", "--tx-check-answer-timeout",
                                 "2s", "--tx-max-checks", "100000"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return flags;
}

class cluster_brokers {
 public:
  // Starts etcd (the caller checked etcd_process::available()); with `etcd_host` (e.g. a test
  // bridge's address) etcd listens there too and brokers are pointed at it.
  explicit cluster_brokers(const std::string& etcd_host = "");
  ~cluster_brokers();
  cluster_brokers(const cluster_brokers&) = delete;
  cluster_brokers& operator=(const cluster_brokers&) = delete;

  // Makes brokers 1-3 with `extra` flags after the cluster ones, without starting them (a
  // test may set_launch() each first); start_all() starts them.
  void make(const std::vector<std::string>& extra = {});
  void start_all();
  // make(extra) and start_all().
  void start(const std::vector<std::string>& extra = {});

  broker_process& broker(int id) { return *brokers_.at(id); }
  const std::map<int, std::unique_ptr<broker_process>>& all() const { return brokers_; }
  etcd_process& etcd() { return etcd_; }
  // TLS settings and token of every connection the helpers below make (a secured cluster).
  void set_client_options(client::connection_options o) { client_ = std::move(o); }
  std::shared_ptr<client::connection> connect(const std::string& address,
                                              std::chrono::milliseconds request_timeout = std::chrono::seconds(15)) {
    return connect_to(address, request_timeout, client_);
  }

  // Every broker's log without the settings lines, the last 8000 bytes of each.
  [[nodiscard]] std::string logs() const;
  // "A,B,C": every broker's client address.
  [[nodiscard]] std::string bootstrap() const;
  // The broker id listening on `address`, 0 if none.
  [[nodiscard]] int id_of(const std::string& address) const;

  // The partition's state as broker `from` sees it (its own Metadata), or as the first running
  // broker that answers sees it (`from` 0).
  std::optional<partition_view> view(const std::string& topic, std::int32_t partition = 0, int from = 0);
  // Creates the topic once three nodes are live and waits until every running broker sees each
  // partition with the same leader and epoch and a whole ISR; false (and says why in `why`,
  // with the logs) when that does not happen within 30 s a partition.
  bool create_topic(const std::string& name, std::uint32_t partitions, std::uint32_t replicas, std::string& why,
                    std::uint64_t retention_bytes = 0);
  // Broker `id`'s local end offset of the partition (DescribeTopic), 0 when it cannot say.
  std::uint64_t end_offset(int id, const std::string& topic, std::uint32_t partition = 0);
  // Its local start offset (what retention left), 0 when it cannot say.
  std::uint64_t start_offset(int id, const std::string& topic, std::uint32_t partition = 0);
  // Reads partition `partition` of broker `id`'s own store into `h` through consumer group
  // `group` (acking each delivery), until it has read every offset from start_offset() to
  // end_offset(); false
  // when it does not within 120 s (and says how far it got on stderr).
  // Leaves early (false) when the broker answers NOT_LEADER. `read_before`: offsets of the
  // partition the group read earlier (from a previous leader); they count as read, and the
  // offsets read here are added to them.
  bool consume_all(int id, const std::string& topic, std::int32_t partition, history& h, const std::string& group,
                   std::set<std::uint64_t>* read_before = nullptr);
  // consume_all from the partition's leader, asked again (up to 3 times) when leadership moves
  // during the read; the group's progress moves with the partition.
  bool consume_all_from_leader(const std::string& topic, std::int32_t partition, history& h, const std::string& group);
  // The nodes Metadata lists (registered in etcd), as broker `from` sees them.
  std::vector<std::int64_t> nodes(int from);
  // GET /metrics of broker `id`: the value of the first sample whose line starts with `name`
  // (a family name, or a name with labels), or nullopt.
  std::optional<double> metric(int id, const std::string& name);

 private:
  etcd_process etcd_;
  std::map<int, std::unique_ptr<broker_process>> brokers_;
  client::connection_options client_;
};

}  // namespace txmq::test
