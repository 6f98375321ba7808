#pragma once

// A keyed produce stream for the cluster fault tests, recorded in a history
// (history_checker.h) with the time and position of every acknowledgement, and
// key_for_partition. The cluster itself is cluster_brokers.h.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "history_checker.h"

namespace txmq::producer {
class producer;
}

namespace txmq::test {

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
