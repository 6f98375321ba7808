#include "child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>

namespace txmq::test {

child_process::child_process(std::vector<std::string> argv, std::filesystem::path output) {
  // A test that dies without running destructors (a crash, std::terminate, ctest's timeout
  // SIGKILL) left its brokers, relays and etcds running, holding ports and disk for the tests
  // after it. The kernel kills the child when its parent goes instead. The signal follows the
  // parent *thread*: a child started from a test's worker thread would die with that thread,
  // so only children of the main thread get it (the others are stopped by their destructors).
  const pid_t parent = ::getpid();
  const bool from_main_thread = ::gettid() == parent;
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    if (from_main_thread) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    }
    const int fd = ::open(output.c_str(), O_CREAT | O_WRONLY | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> raw;
    for (auto& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    ::execv(raw[0], raw.data());
    ::_exit(127);
  }
}

child_process::~child_process() { kill(); }

int child_process::reap(int options) {
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, options);
  if (r != pid_) return -1;
  pid_ = -1;
  status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return status_;
}

void child_process::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  reap(0);
}

int child_process::stop() {
  if (pid_ <= 0) return status_;
  ::kill(pid_, SIGTERM);
  return reap(0);
}

int child_process::wait() {
  if (pid_ <= 0) return status_;
  return reap(0);
}

bool child_process::running() {
  if (pid_ <= 0) return false;
  reap(WNOHANG);
  return pid_ > 0;
}

}  // namespace txmq::test
