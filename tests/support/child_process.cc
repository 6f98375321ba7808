#include "child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace txmq::test {

namespace {

// fork + exec of argv with its output appended to `output`; with `die_with_parent`, the child
// gets SIGKILL when the forking thread ends. Everything allocated before the fork: the child
// of a multi-threaded process runs only async-signal-safe calls until exec.
pid_t spawn(std::vector<std::string>& argv, const std::filesystem::path& output, bool die_with_parent) {
  std::vector<char*> raw;
  for (auto& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  if (die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
  }
  const int fd = ::open(output.c_str(), O_CREAT | O_WRONLY | O_APPEND, 0644);
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  ::execv(raw[0], raw.data());
  ::_exit(127);
}

// A thread that lives as long as the process and forks the children asked for by the test's
// other threads, so that PR_SET_PDEATHSIG (which follows the forking *thread*) fires only when
// the process dies: a child forked by a worker thread itself would be killed when that worker
// ends, and without the signal it outlived a killed test. Never destroyed: it may be waiting
// while the process exits.
class spawner {
 public:
  static spawner& instance() {
    static auto* s = new spawner;
    return *s;
  }

  pid_t run(std::vector<std::string>& argv, const std::filesystem::path& output) {
    request r{&argv, &output};
    std::unique_lock lk(mu_);
    queue_.push_back(&r);
    cv_.notify_all();
    cv_.wait(lk, [&] { return r.done; });
    return r.pid;
  }

 private:
  struct request {
    std::vector<std::string>* argv;
    const std::filesystem::path* output;
    pid_t pid = -1;
    bool done = false;
  };

  spawner() { std::thread([this] { loop(); }).detach(); }

  void loop() {
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return !queue_.empty(); });
      auto* r = queue_.front();
      queue_.pop_front();
      r->pid = spawn(*r->argv, *r->output, true);
      r->done = true;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<request*> queue_;
};

}  // namespace

child_process::child_process(std::vector<std::string> argv, std::filesystem::path output) {
  // A test that dies without running destructors (a crash, std::terminate, ctest's timeout
  // SIGKILL) left its brokers, relays and etcds running, holding ports and disk for the tests
  // after it. The kernel kills the child when its parent goes instead: the main thread forks
  // its own children, the spawner thread those of every other thread.
  pid_ = ::gettid() == ::getpid() ? spawn(argv, output, true) : spawner::instance().run(argv, output);
  if (pid_ < 0) throw std::runtime_error("fork failed");
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
