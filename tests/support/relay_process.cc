#include "relay_process.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "broker_process.h"

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
  child_.reset();  // kills what still runs
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void relay_process::start() {
  if (child_ && child_->running()) throw std::runtime_error("txmq-relay already running");
  std::vector<std::string> argv{binary_path("txmq-relay")};
  argv.insert(argv.end(), args_.begin(), args_.end());
  child_ = std::make_unique<child_process>(argv, dir_ / ("relay-" + std::to_string(run_++) + ".log"));
}

int relay_process::stop() { return child_ ? child_->stop() : -1; }

void relay_process::kill() {
  if (child_) child_->kill();
}

std::string relay_process::log() const {
  std::ostringstream out;
  for (int i = 0; i < run_; ++i) out << std::ifstream(dir_ / ("relay-" + std::to_string(i) + ".log")).rdbuf();
  return out.str();
}

std::uint16_t relay_process::http_port() const {
  if (run_ == 0) return 0;
  std::ostringstream out;
  out << std::ifstream(dir_ / ("relay-" + std::to_string(run_ - 1) + ".log")).rdbuf();
  const std::string text = out.str();
  const std::string marker = "admin HTTP on ";
  const auto at = text.rfind(marker);
  if (at == std::string::npos) return 0;
  const auto colon = text.find(':', at + marker.size());
  const auto end = text.find('\n', at);
  if (colon == std::string::npos || end == std::string::npos || colon > end) return 0;
  return static_cast<std::uint16_t>(std::stoi(text.substr(colon + 1, end - colon - 1)));
}

}  // namespace txmq::test
