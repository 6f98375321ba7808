#pragma once

// A child process for a test: any binary, its stdout and stderr to a file, SIGKILLed (or
// SIGTERMed) by the test. The destructor kills what is still running, and the kernel SIGKILLs
// the child if the test process dies first (whichever thread of the test started it).

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace txmq::test {

class child_process {
 public:
  // Starts argv[0] (a path) with argv, output appended to `output`.
  child_process(std::vector<std::string> argv, std::filesystem::path output);
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  // SIGKILL and reap. Idempotent.
  void kill();
  // SIGTERM and wait; the exit status (128 + signal when killed by one).
  int stop();
  // Waits for it to exit by itself; its exit status.
  int wait();
  // True while it runs; reaps it (and records its status) when it has exited.
  [[nodiscard]] bool running();
  [[nodiscard]] int exit_status() const noexcept { return status_; }
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }

 private:
  int reap(int options);

  pid_t pid_ = -1;
  int status_ = -1;
};

}  // namespace txmq::test
