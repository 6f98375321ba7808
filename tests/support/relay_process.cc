#include "relay_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "broker_process.h"

extern char** environ;

namespace txmq::test {
namespace fs = std::filesystem;

relay_process::relay_process(std::vector<std::string> args) : args_(std::move(args)) {
  static std::atomic<int> counter{0};
  dir_ = fs::temp_directory_path() / ("txmq-relay-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::create_directories(dir_);
  if (std::find(args_.begin(), args_.end(), "--http") == args_.end()) {
    args_.insert(args_.end(), {"--http", "127.0.0.1:0"});
  }
}

relay_process::~relay_process() {
  kill();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void relay_process::start() {
  if (pid_ > 0) throw std::runtime_error("txmq-relay already running");
  const auto log_path = (dir_ / ("relay-" + std::to_string(run_++) + ".log")).string();
  std::vector<std::string> argv{binary_path("txmq-relay")};
  argv.insert(argv.end(), args_.begin(), args_.end());
  std::vector<char*> raw;
  for (auto& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, log_path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 2, 1);
  const int rc = posix_spawn(&pid_, raw[0], &actions, nullptr, raw.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    pid_ = -1;
    throw std::runtime_error("cannot spawn " + argv[0] + ": error " + std::to_string(rc));
  }
}

int relay_process::stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void relay_process::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string relay_process::log() const {
  std::ostringstream out;
  for (int i = 0; i < run_; ++i) out << std::ifstream(dir_ / ("relay-" + std::to_string(i) + ".log")).rdbuf();
  return out.str();
}

}  // namespace txmq::test
