#include "etcd_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "broker_process.h"

namespace txmq::test {
namespace fs = std::filesystem;

namespace {
constexpr const char* k_etcd = "/usr/bin/etcd";
}

bool etcd_process::available() { return fs::exists(k_etcd); }

etcd_process::etcd_process(std::string extra_host) : extra_host_(std::move(extra_host)) {
  static std::atomic<int> counter{0};
  dir_ = fs::temp_directory_path() / ("txmq-etcd-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  client_port_ = free_port();
  peer_port_ = free_port();
}

etcd_process::~etcd_process() {
  kill();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string etcd_process::url() const {
  return "http://" + (extra_host_.empty() ? std::string("127.0.0.1") : extra_host_) + ":" + std::to_string(client_port_);
}

std::string etcd_process::log() const {
  std::ostringstream out;
  for (int i = 0; i < run_; ++i) {
    std::ifstream in(dir_ / ("etcd-" + std::to_string(i) + ".log"));
    out << in.rdbuf();
  }
  return out.str();
}

std::string http_get(std::uint16_t port, const std::string& path, std::chrono::milliseconds timeout) {
  return http_get_from("127.0.0.1", port, path, timeout);
}

std::string http_get_from(const std::string& host, std::uint16_t port, const std::string& path,
                          std::chrono::milliseconds timeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  addr.sin_port = htons(port);
  std::string answer;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      const auto until = std::chrono::steady_clock::now() + timeout;
      char buf[4096];
      while (std::chrono::steady_clock::now() < until) {
        pollfd p{fd, POLLIN, 0};
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        if (::poll(&p, 1, static_cast<int>(std::max<long>(left.count(), 1))) <= 0) break;
        const auto n = ::read(fd, buf, sizeof buf);
        if (n <= 0) break;
        answer.append(buf, static_cast<std::size_t>(n));
      }
    }
  }
  ::close(fd);
  return answer;
}

void etcd_process::start(std::chrono::milliseconds deadline) {
  if (proc_) throw std::runtime_error("etcd already running");
  const auto log_path = dir_ / ("etcd-" + std::to_string(run_++) + ".log");
  std::string client = "http://127.0.0.1:" + std::to_string(client_port_);
  const std::string advertise = url();
  if (!extra_host_.empty()) client += "," + advertise;
  const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
  proc_ = std::make_unique<child_process>(
      std::vector<std::string>{k_etcd, "--name", "test", "--data-dir", (dir_ / "data").string(),
                               "--listen-client-urls", client, "--advertise-client-urls", advertise,
                               "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                               "--initial-cluster", "test=" + peer, "--initial-cluster-state", "new",
                               "--logger", "zap", "--log-level", "warn"},
      log_path);
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (!proc_->running()) {
      proc_.reset();
      throw std::runtime_error("etcd exited during start:\n" + log());
    }
    if (http_get(client_port_, "/health", std::chrono::milliseconds(500)).find("\"health\":\"true\"") != std::string::npos)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling for readiness
  }
  kill();
  throw std::runtime_error("etcd did not become healthy in time:\n" + log());
}

void etcd_process::pause() {
  if (proc_) ::kill(proc_->pid(), SIGSTOP);
}

void etcd_process::resume() {
  if (proc_) ::kill(proc_->pid(), SIGCONT);
}

void etcd_process::kill() {
  if (!proc_) return;
  proc_->kill();
  proc_.reset();
}

}  // namespace txmq::test
