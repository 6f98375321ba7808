#include "broker_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace txmq::test {
namespace fs = std::filesystem;

std::string binary_path(const std::string& name) { return std::string(TXMQ_BINARY_DIR) + "/" + name; }

std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

broker_process::broker_process(std::vector<std::string> extra_args) : args_(std::move(extra_args)) {
  static std::atomic<int> counter{0};
  dir_ = fs::temp_directory_path() / ("txmq-it-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  data_ = dir_ / "data";
  port_ = free_port();
  http_port_ = free_port();
}

broker_process::~broker_process() {
  if (proc_) kill();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string broker_process::log() const {
  std::ostringstream out;
  for (int i = 0; i < run_; ++i) {
    std::ifstream in(dir_ / ("broker-" + std::to_string(i) + ".log"));
    out << in.rdbuf();
  }
  return out.str();
}

void broker_process::start(std::chrono::milliseconds deadline) {
  if (proc_) throw std::runtime_error("broker already running");
  const fs::path log_path = dir_ / ("broker-" + std::to_string(run_++) + ".log");
  std::vector<std::string> argv = prefix_;
  const std::string listen = listen_host_.empty() ? host_ : listen_host_;
  argv.insert(argv.end(), {binary_path("txmq-broker"),
                           "--data-dir", data_.string(),
                           "--listen", listen + ":" + std::to_string(port_),
                           "--http", listen + ":" + std::to_string(http_port_)});
  if (!listen_host_.empty()) argv.insert(argv.end(), {"--advertise", address()});
  argv.insert(argv.end(), args_.begin(), args_.end());
  proc_ = std::make_unique<child_process>(argv, log_path);
  // Ready = both listeners accept connections. The wire listener opens first and the admin
  // HTTP listener after the service is built, so a test that used the HTTP port as soon as the
  // wire port answered was sometimes refused. Poll with a deadline.
  const auto accepts = [this](std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    ::inet_pton(AF_INET, host_.c_str(), &addr.sin_addr);
    addr.sin_port = htons(port);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
  };
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (!proc_->running()) {
      proc_.reset();
      std::ifstream in(log_path);
      std::stringstream s;
      s << in.rdbuf();
      throw std::runtime_error("txmq-broker exited during start:\n" + s.str());
    }
    if (accepts(port_) && accepts(http_port_)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling for readiness
  }
  kill();
  throw std::runtime_error("txmq-broker did not listen on ports " + std::to_string(port_) + " and " +
                           std::to_string(http_port_) + " in time:\n" + log());
}

int broker_process::stop() {
  if (!proc_) return -1;
  const int status = proc_->stop();
  proc_.reset();
  return status;
}

void broker_process::kill() {
  if (!proc_) return;
  proc_->kill();
  proc_.reset();
}

}  // namespace txmq::test
