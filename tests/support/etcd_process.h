#pragma once

// Runs a single-member etcd (Debian's /usr/bin/etcd, 3.4) for a test: client and peer ports
// free on 127.0.0.1, data in a temporary directory, killed by PID. kill() then start() restarts
// it on the same data and ports (etcd's own crash recovery, as after a power loss).

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "child_process.h"

namespace txmq::test {

class etcd_process {
 public:
  // Listens on 127.0.0.1; with `extra_host` (an IPv4 address of this namespace, e.g. a bridge's)
  // on that address too, and advertises it (url() names it), for brokers in other namespaces.
  explicit etcd_process(std::string extra_host = "");
  ~etcd_process();
  etcd_process(const etcd_process&) = delete;
  etcd_process& operator=(const etcd_process&) = delete;

  // True when /usr/bin/etcd exists (tests skip otherwise, naming scripts/setup.sh).
  [[nodiscard]] static bool available();

  // Starts etcd and waits until /health answers true. Throws std::runtime_error with its
  // output when it does not within the deadline.
  void start(std::chrono::milliseconds deadline = std::chrono::seconds(30));
  // SIGKILL and reap.
  void kill();
  // SIGSTOP / SIGCONT: etcd hung rather than gone (connections stay open, nothing answers).
  void pause();
  void resume();
  [[nodiscard]] bool running() const noexcept { return proc_ != nullptr; }
  [[nodiscard]] pid_t pid() const noexcept { return proc_ ? proc_->pid() : -1; }

  // "http://127.0.0.1:PORT", for --cluster-etcd.
  [[nodiscard]] std::string url() const;
  [[nodiscard]] std::uint16_t client_port() const noexcept { return client_port_; }
  [[nodiscard]] std::string log() const;

 private:
  std::filesystem::path dir_;
  std::string extra_host_;
  std::unique_ptr<child_process> proc_;
  std::uint16_t client_port_ = 0;
  std::uint16_t peer_port_ = 0;
  int run_ = 0;
};

// Sends "GET PATH" to 127.0.0.1:port and returns the whole answer (head and body), or "" when
// nothing answered within `timeout`.
std::string http_get(std::uint16_t port, const std::string& path,
                     std::chrono::milliseconds timeout = std::chrono::seconds(2));
// The same to HOST (an IPv4 address).
std::string http_get_from(const std::string& host, std::uint16_t port, const std::string& path,
                          std::chrono::milliseconds timeout = std::chrono::seconds(2));

}  // namespace txmq::test
