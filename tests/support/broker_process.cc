#include "broker_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace txmq::test {
namespace fs = std::filesystem;

std::string binary_path(const std::string& name) { return std::string(TXMQ_BINARY_DIR) + "/" + name; }

namespace {

// The lowest port of the kernel's range for the local ports of outgoing connections.
int ephemeral_low() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  return in >> low && low > 1024 ? low : 32768;
}

bool can_bind(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// Claims `port` for this process's lifetime, against other test processes: a port picked here
// stays free (and another process's can_bind passes) until the process it is for binds it,
// and again whenever that process is killed and not yet restarted. Without the claim, the
// other test process that ctest -j runs beside this one could start a broker on it meanwhile.
// An flock on a file named after the port: the kernel drops it when this process ends,
// however it ends, so no claim outlives its test. The descriptor is close-on-exec, so
// the brokers started here do not hold the claim after the test.
bool claim_across_processes(std::uint16_t port) {
  static const fs::path dir = fs::temp_directory_path() / "txmq-test-ports";
  std::error_code ec;
  fs::create_directories(dir, ec);
  const auto file = dir / std::to_string(port);
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return true;  // nowhere to claim: can_bind alone, as before the claims
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return false;
  }
  return true;  // fd stays open until the process ends
}

}  // namespace

// Below the kernel's ephemeral range: tests kill a process (etcd, a broker) and start it again on
// the same port, and a port in that range, free while the process is down, can meanwhile become
// the local port of any outgoing connection on the machine (seen: a restarted etcd failed with
// "bind: address already in use"). Random, so parallel tests rarely pick the same one. Never
// twice in one process: a port picked for a process not yet started is still free, and was
// once picked again for the next broker of the same cluster (CI: broker 3's admin HTTP port
// was broker 2's). Never in two test processes at once (claim_across_processes).
std::uint16_t free_port() {
  static std::mutex mu;
  static std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(::getpid()));
  static std::set<std::uint16_t> given;
  const int high = ephemeral_low() - 1;
  const int low = std::min(10000, high / 2);
  std::lock_guard lock(mu);
  std::uniform_int_distribution<int> pick(low, high);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const auto port = static_cast<std::uint16_t>(pick(rng));
    if (!given.contains(port) && can_bind(port) && claim_across_processes(port)) {
      given.insert(port);
      return port;
    }
  }
  throw std::runtime_error("no free TCP port on 127.0.0.1 below the ephemeral range");
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
