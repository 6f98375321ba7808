#pragma once

// Runs the real `txmq` binary for CLI tests: stdin fed, stdout, stderr and exit status captured.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "broker_process.h"

extern char** environ;

namespace txmq::test {

namespace json = boost::json;

// Each test executable includes this once; the unnamed namespace keeps the helpers private to it.
namespace {

using namespace std::chrono_literals;

struct cli_result {
  int status = -1;
  std::string out;
  std::string err;

  // stdout lines, without the header line of a table.
  [[nodiscard]] std::vector<std::string> rows() const {
    std::vector<std::string> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    if (!lines.empty()) lines.erase(lines.begin());
    return lines;
  }
  // stdout parsed as JSON lines.
  [[nodiscard]] std::vector<json::object> objects() const {
    std::vector<json::object> out_objects;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      boost::system::error_code ec;
      auto v = json::parse(line, ec);
      EXPECT_FALSE(ec) << "not JSON: " << line;
      EXPECT_TRUE(!ec && v.is_object()) << "not a JSON object: " << line;
      if (!ec && v.is_object()) out_objects.push_back(v.as_object());
    }
    return out_objects;
  }
};

std::ostream& operator<<(std::ostream& os, const cli_result& r) {
  return os << "exit " << r.status << "\n--- stdout\n" << r.out << "--- stderr\n" << r.err;
}

// Runs build/bin/txmq with `args`, writes `input` to its stdin and closes it. TXMQ_BROKER is
// removed from the child's environment, or set to `broker_env`. Kills the child after 60 s.
cli_result run_txmq(const std::vector<std::string>& args, const std::string& input = "",
                    const std::optional<std::string>& broker_env = std::nullopt) {
  std::vector<std::string> argv{binary_path("txmq")};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "TXMQ_BROKER=", 12) != 0) envs.emplace_back(*e);
  }
  if (broker_env) envs.push_back("TXMQ_BROKER=" + *broker_env);

  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (::pipe(in_pipe) != 0 || ::pipe(out_pipe) != 0 || ::pipe(err_pipe) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return {};
  }
  std::vector<char*> raw_argv;
  for (auto& a : argv) raw_argv.push_back(a.data());
  raw_argv.push_back(nullptr);
  std::vector<char*> raw_env;
  for (auto& e : envs) raw_env.push_back(e.data());
  raw_env.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in_pipe[0], 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    ::execve(raw_argv[0], raw_argv.data(), raw_env.data());
    ::_exit(127);
  }
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);
  ::signal(SIGPIPE, SIG_IGN);

  cli_result r;
  std::size_t written = 0;
  int in_fd = in_pipe[1];
  if (input.empty()) {
    ::close(in_fd);
    in_fd = -1;
  }
  int out_fd = out_pipe[0];
  int err_fd = err_pipe[0];
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (out_fd >= 0 || err_fd >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= 0ms) {
      ::kill(pid, SIGKILL);
      ADD_FAILURE() << "txmq did not exit within 60 s";
      break;
    }
    std::vector<pollfd> fds;
    if (in_fd >= 0) fds.push_back({in_fd, POLLOUT, 0});
    if (out_fd >= 0) fds.push_back({out_fd, POLLIN, 0});
    if (err_fd >= 0) fds.push_back({err_fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (const auto& p : fds) {
      if (p.revents == 0) continue;
      if (p.fd == in_fd) {
        const auto n = ::write(in_fd, input.data() + written, input.size() - written);
        if (n > 0) written += static_cast<std::size_t>(n);
        if (n < 0 || written == input.size()) {
          ::close(in_fd);
          in_fd = -1;
        }
        continue;
      }
      char buf[4096];
      const auto n = ::read(p.fd, buf, sizeof buf);
      if (n <= 0) {
        ::close(p.fd);
        (p.fd == out_fd ? out_fd : err_fd) = -1;
      } else {
        (p.fd == out_fd ? r.out : r.err).append(buf, static_cast<std::size_t>(n));
      }
    }
  }
  if (in_fd >= 0) ::close(in_fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// txmq --broker <b> args...
cli_result txmq(const broker_process& b, std::vector<std::string> args, const std::string& input = "") {
  args.insert(args.begin(), {"--broker", b.address()});
  return run_txmq(args, input);
}

[[maybe_unused]] std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string f; in >> f;) out.push_back(f);
  return out;
}

}  // namespace
}  // namespace txmq::test
