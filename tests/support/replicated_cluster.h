#pragma once

// etcd and three txmq-broker processes with replicated topics, for the cluster fault tests
// (tests/cluster_faults_test.cc, tests/cluster_isolation_test.cc): Metadata views of a
// partition, a topic created and waited for (leader, whole ISR), a broker's local log read
// into a history, /metrics read, and a keyed produce stream recorded in a history
// (history_checker.h) with the time and position of every acknowledgement. Every wait is
// bounded; the processes are stopped by PID by their owners (broker_process, etcd_process).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "broker_process.h"
#include "history_checker.h"
#include "txmq/client/connection.h"

namespace txmq::producer {
class producer;
}

namespace txmq::test {

struct partition_view {
  std::int64_t leader = -1;
  std::int64_t epoch = 0;
  std::vector<std::int64_t> isr;
  std::vector<std::int64_t> replicas;
};

// A connection with short timeouts, or nullptr when nothing answers.
std::shared_ptr<client::connection> connect_to(const std::string& address,
                                               std::chrono::milliseconds request_timeout = std::chrono::seconds(15));

class replicated_cluster {
 public:
  // Three brokers (ids 1-3) joining etcd at `etcd_url`, each with `args` added to its command line.
  replicated_cluster(const std::string& etcd_url, const std::vector<std::string>& args);
  ~replicated_cluster();

  broker_process& broker(int id) { return *brokers_.at(id); }
  void start_all();
  // Without the settings each start prints; the last 8000 bytes of each broker.
  [[nodiscard]] std::string logs() const;
  // "A,B,C": every broker's client address.
  [[nodiscard]] std::string bootstrap() const;

  // The partition's state as broker `from` sees it (its own Metadata), or as the first running
  // broker that answers sees it (`from` 0).
  std::optional<partition_view> view(const std::string& topic, std::int32_t partition, int from = 0);
  // Creates the topic with `replicas` copies and waits until every partition has a leader and a
  // whole ISR; false (and *why) when it does not within 30 s.
  bool create_topic(const std::string& topic, std::int32_t partitions, std::int32_t replicas, std::string* why);
  // The partition's end offset in broker `id`'s own store (0 when it does not answer).
  std::uint64_t end_offset(int id, const std::string& topic, std::int32_t partition);
  // Reads partition `partition` of broker `id`'s own store into `h` through consumer group
  // `group` (acking each delivery), until it has read end_offset() distinct offsets; false
  // when it does not within 120 s (and says how far it got on stderr).
  bool consume_all(int id, const std::string& topic, std::int32_t partition, history& h, const std::string& group);
  // The nodes Metadata lists (registered in etcd), as broker `from` sees them.
  std::vector<std::int64_t> nodes(int from);
  // GET /metrics of broker `id`: the value of the first sample whose line starts with `name`
  // (a family name, or a name with labels), or nullopt.
  std::optional<double> metric(int id, const std::string& name);

 private:
  std::map<int, std::unique_ptr<broker_process>> brokers_;
};

// A keyed produce stream through the producer (bootstrap list), paced, that records where each
// write was acknowledged (keyed_stream.h is the unpaced one, without positions; two classes
// of one name in one test binary would break the one-definition rule). `keys` keys round-robin, each
// attempt recorded in `h` with a per-key sequence and resolved as acknowledged (with the
// acknowledged position: history::acknowledged_at) or unknown (delivery timeout, errors after
// retries). Runs on its own thread until stop().
class positioned_stream {
 public:
  struct options {
    std::string topic = "stream";
    // Round-robin over these; empty: "k0".."k31".
    std::vector<std::string> keys;
    std::chrono::milliseconds request_timeout{3000};
    std::chrono::milliseconds delivery_timeout{40000};
    // At most this many attempts per second (0: as fast as the producer takes them), which
    // bounds how long reading the log back takes.
    int per_second = 2000;
  };
  positioned_stream(const std::string& bootstrap, history& h, options o);
  ~positioned_stream();
  void stop();

  [[nodiscard]] std::uint64_t acks() const { return acks_.load(); }
  [[nodiscard]] std::chrono::steady_clock::time_point last_ack() const;
  [[nodiscard]] std::optional<std::chrono::steady_clock::time_point> first_ack_after(
      std::chrono::steady_clock::time_point t) const;
  // Acknowledgements in [from, to), and the longest time without one in that window
  // (counted from `from` and up to `to`).
  [[nodiscard]] std::uint64_t acks_between(std::chrono::steady_clock::time_point from,
                                           std::chrono::steady_clock::time_point to) const;
  // Of one partition's acknowledgements when `partition` is given.
  [[nodiscard]] std::chrono::milliseconds longest_gap(std::chrono::steady_clock::time_point from,
                                                      std::chrono::steady_clock::time_point to,
                                                      std::optional<std::uint32_t> partition = std::nullopt) const;
  // Acknowledgements received before `to` of attempts made at or after `from` (of one
  // partition when given): writes sent after a fault began and acknowledged while it lasted.
  // (Counting by receive time alone would also count an answer sent before the fault and
  // delivered late on a loaded machine.)
  [[nodiscard]] std::uint64_t acks_of_attempts(std::chrono::steady_clock::time_point from,
                                               std::chrono::steady_clock::time_point to,
                                               std::optional<std::uint32_t> partition = std::nullopt) const;
  // Acknowledgements of a partition after `t`.
  [[nodiscard]] std::optional<std::chrono::steady_clock::time_point> first_ack_after(
      std::chrono::steady_clock::time_point t, std::uint32_t partition) const;

 private:
  void run();

  history& h_;
  options o_;
  std::unique_ptr<producer::producer> p_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> acks_{0};
  mutable std::mutex mu_;
  struct ack {
    std::chrono::steady_clock::time_point at;
    std::uint32_t partition;
    std::chrono::steady_clock::time_point attempted;
  };
  std::vector<ack> acks_at_;  // in the order the callbacks ran
};

// A key prefix + number that partition_for_key puts in `partition` of `partitions`.
std::string key_for_partition(const std::string& prefix, std::uint32_t partition, std::uint32_t partitions);

}  // namespace txmq::test
