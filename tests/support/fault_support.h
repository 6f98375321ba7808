#pragma once

// Helpers of the fault suite (ctest label `fault`, docs/operations.md): the one parseable line
// each test prints with its counts, pauses (SIGSTOP/SIGCONT by PID, undone even when the test
// fails), resident memory of a process, the test's own descriptor limit, and the pause length.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace txmq::test {

// Writes "FAULT-COUNTS test=NAME acknowledged=A consumed=C lost=L invented=I [extra]" to
// stderr (and so to ctest's output), one line the closing note can grep.
void print_fault_counts(const std::string& test, std::size_t acknowledged, std::size_t consumed, std::size_t lost,
                        std::size_t invented, const std::string& extra = "");

// lost = acknowledged but not consumed; invented = consumed but never sent.
struct fault_counts {
  std::size_t acknowledged = 0, consumed = 0, lost = 0, invented = 0;
};
fault_counts count_outcome(const std::set<std::string>& sent, const std::set<std::string>& acknowledged,
                           const std::set<std::string>& consumed);

// How long the suite freezes a process (or cuts a link): the environment variable `env` (a
// duration such as "10s", "3s"), else `fallback`.
std::chrono::milliseconds fault_pause(std::chrono::milliseconds fallback, const char* env = "TXMQ_FAULT_PAUSE");

// Waits until every thread of `pid` is stopped (state T in /proc/PID/task/*/stat), or is gone;
// false at the deadline. kill(SIGSTOP) returns before a thread running on another CPU has
// stopped: one answered a request sent right after the kill in a loaded run.
bool wait_stopped(pid_t pid, std::chrono::milliseconds deadline = std::chrono::seconds(5));

// SIGSTOPs every pid now (returning once they are stopped) and SIGCONTs them in thaw() or the
// destructor, whichever comes first.
class frozen {
 public:
  explicit frozen(std::vector<pid_t> pids);
  ~frozen();
  frozen(const frozen&) = delete;
  frozen& operator=(const frozen&) = delete;
  void thaw();

 private:
  std::vector<pid_t> pids_;
};

// The pid and every descendant of it (from /proc), e.g. the postmaster and its backends.
std::vector<pid_t> process_tree(pid_t root);

// VmRSS of a process in KiB (0 when it is gone).
std::uint64_t rss_kib(pid_t pid);

// Raises this process's soft RLIMIT_NOFILE to its hard limit; returns the new soft limit.
std::uint64_t raise_own_nofile_limit();

// A network namespace joined to this one by a veth pair, made by the test and removed by the
// destructor (even when the test failed): this side 10.77.N.1/30, the namespace's 10.77.N.2/30.
// cut() and restore() take this side's link down and up, which drops every packet between
// the two without a reset (as a pulled cable does). Needs root and `ip`.
class netns_link {
 public:
  netns_link();
  ~netns_link();
  netns_link(const netns_link&) = delete;
  netns_link& operator=(const netns_link&) = delete;

  [[nodiscard]] bool ok() const noexcept { return error_.empty(); }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  // The namespace's address, where a process started in it listens.
  [[nodiscard]] const std::string& inside_address() const noexcept { return inside_; }
  // {"ip", "netns", "exec", name}: prepend to a command line to run it inside.
  [[nodiscard]] std::vector<std::string> exec_prefix() const;
  bool cut();
  bool restore();

 private:
  std::string name_, host_if_, inside_if_, inside_, error_;
};

// A tmpfs mounted on `dir` for the test's lifetime; detached (lazily unmounted) at the end, so
// the broker's temporary directory can be removed even if the broker still holds files there.
// Needs root.
class tmpfs_mount {
 public:
  tmpfs_mount(const std::filesystem::path& dir, const std::string& size);
  ~tmpfs_mount();
  tmpfs_mount(const tmpfs_mount&) = delete;
  tmpfs_mount& operator=(const tmpfs_mount&) = delete;

  // mount -o remount,size=SIZE
  bool resize(const std::string& size);
  [[nodiscard]] bool mounted() const { return mounted_; }
  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  std::filesystem::path dir_;
  bool mounted_ = false;
  std::string error_;
};

// Runs a command line through /bin/sh; its exit status (output appended to *out when given).
int run_shell(const std::string& command, std::string* out = nullptr);
// Runs a shell command line and returns its stdout only (stderr goes to the test's log), for
// output that is parsed (a MAC, a status code) where a warning on stderr must not mix in.
std::string shell_stdout(const std::string& command);

}  // namespace txmq::test
