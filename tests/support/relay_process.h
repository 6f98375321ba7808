#pragma once

// Runs the real txmq-relay binary for a test (a child_process), its output in a log file per
// run; stopped (SIGTERM) or killed (SIGKILL) by the test. Readiness is the test's to judge
// (shards held in pg_locks): a relay does its work whenever the database and broker let it.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "child_process.h"

namespace txmq::test {

class relay_process {
 public:
  // args after the binary name: --pg, --broker, --relay-id, ... (--http 127.0.0.1:0 is added
  // unless args name --http).
  explicit relay_process(std::vector<std::string> args);
  ~relay_process();
  relay_process(const relay_process&) = delete;
  relay_process& operator=(const relay_process&) = delete;

  // Starts it (again after a stop or kill). Throws std::runtime_error when it is running.
  void start();
  // SIGTERM and wait; returns the exit status (128 + signal when killed by one).
  int stop();
  // SIGKILL, no goodbye.
  void kill();
  // Everything every run wrote so far.
  [[nodiscard]] std::string log() const;
  // The running relay's process id; -1 when it is not running.
  [[nodiscard]] pid_t pid() const noexcept { return child_ ? child_->pid() : -1; }
  // The admin HTTP port of the current run, from its "admin HTTP on HOST:PORT" line; 0 before
  // it wrote that line.
  [[nodiscard]] std::uint16_t http_port() const;

 private:
  std::vector<std::string> args_;
  std::filesystem::path dir_;
  std::unique_ptr<child_process> child_;
  int run_ = 0;
};

}  // namespace txmq::test
