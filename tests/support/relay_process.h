#pragma once

// Runs the real txmq-relay binary for a test, with its stderr in a log file; stopped (SIGTERM)
// or killed (SIGKILL) by the test. Readiness is the test's to judge (shards held in pg_locks):
// a relay does its work whenever the database and broker let it.

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace txmq::test {

class relay_process {
 public:
  // args after the binary name: --pg, --broker, --relay-id, ... (--http 127.0.0.1:0 is added
  // unless args name --http).
  explicit relay_process(std::vector<std::string> args);
  ~relay_process();
  relay_process(const relay_process&) = delete;
  relay_process& operator=(const relay_process&) = delete;

  // Starts it (again after a stop or kill). Throws std::runtime_error when it cannot spawn.
  void start();
  // SIGTERM and wait; returns the exit status (128 + signal when killed by one).
  int stop();
  // SIGKILL, no goodbye.
  void kill();
  [[nodiscard]] bool running() const noexcept { return pid_ > 0; }
  // Everything every run wrote to stderr so far.
  [[nodiscard]] std::string log() const;

 private:
  std::vector<std::string> args_;
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  int run_ = 0;
};

}  // namespace txmq::test
