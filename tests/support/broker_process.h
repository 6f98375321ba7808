#pragma once

// Runs the real txmq-broker binary for a test: on a free loopback port, with its data in a
// temporary directory, stopped (SIGTERM) or killed (SIGKILL) by the test.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "child_process.h"

namespace txmq::test {

class broker_process {
 public:
  // extra_args are appended to the command line (--ack-deadline 500ms ...).
  explicit broker_process(std::vector<std::string> extra_args = {});
  ~broker_process();
  broker_process(const broker_process&) = delete;
  broker_process& operator=(const broker_process&) = delete;

  // Runs the broker through `prefix` (e.g. {"ip", "netns", "exec", NS}) listening on `host`
  // (an IPv4 address in that namespace) instead of 127.0.0.1. Before start().
  // With `listen_host` (e.g. "0.0.0.0": every address of its namespace) it listens there and
  // advertises host:port (--advertise, for cluster mode), `host` staying the address the test
  // connects to.
  void set_launch(std::vector<std::string> prefix, std::string host, std::string listen_host = "") {
    prefix_ = std::move(prefix);
    host_ = std::move(host);
    listen_host_ = std::move(listen_host);
  }

  // Starts the broker (again, on the same data directory and port after a stop or kill) and
  // waits until it says it listens. Throws std::runtime_error with its output when it does not
  // within the deadline.
  void start(std::chrono::milliseconds deadline = std::chrono::seconds(30));
  // SIGTERM and wait for a clean exit; returns the exit status.
  int stop();
  // SIGKILL, no goodbye.
  void kill();
  [[nodiscard]] bool running() const noexcept { return proc_ != nullptr; }
  // The running broker's process id (for /proc); -1 when it is not running.
  [[nodiscard]] pid_t pid() const noexcept { return proc_ ? proc_->pid() : -1; }

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  [[nodiscard]] std::uint16_t http_port() const noexcept { return http_port_; }
  [[nodiscard]] std::string address() const { return host_ + ":" + std::to_string(port_); }
  [[nodiscard]] const std::filesystem::path& data_dir() const noexcept { return data_; }
  [[nodiscard]] const std::filesystem::path& dir() const noexcept { return dir_; }
  // Everything the broker wrote to stderr so far.
  [[nodiscard]] std::string log() const;

 private:
  std::vector<std::string> args_;
  std::vector<std::string> prefix_;
  std::string host_ = "127.0.0.1";
  std::string listen_host_;  // empty: host_
  std::filesystem::path dir_;
  std::filesystem::path data_;
  std::unique_ptr<child_process> proc_;
  std::uint16_t port_ = 0;
  std::uint16_t http_port_ = 0;
  int run_ = 0;
};

// A free TCP port on 127.0.0.1 (bound and released; the broker binds it right after), below the
// kernel's range of ephemeral ports, so a test that restarts a process on it finds it free.
std::uint16_t free_port();

// Where the built binaries are (set by CMake).
std::string binary_path(const std::string& name);

}  // namespace txmq::test
