// The crash report (crash_report.h) of a child that crashes on purpose: the signal's name, a
// stack trace naming the crashing function, the last log lines (only the ring's last ones), and
// death by the same signal afterwards.

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include <gtest/gtest.h>

#include "txmq/common/log.h"

namespace {

struct outcome {
  std::string err;
  int signal = 0;  // 0 = exited
};

outcome run_child(const char* how, int lines) {
  int pipe_fds[2];
  EXPECT_EQ(::pipe(pipe_fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    const std::string n = std::to_string(lines);
    ::execl(TXMQ_CRASH_CHILD, TXMQ_CRASH_CHILD, how, n.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  outcome out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n <= 0) break;
    out.err.append(buf, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
  return out;
}

TEST(crash_report, segv_names_the_signal_the_function_and_the_last_log_lines) {
  const auto out = run_child("segv", 100);
  EXPECT_EQ(out.signal, SIGSEGV) << out.err;
  EXPECT_NE(out.err.find("crash_report_child: fatal signal SIGSEGV (invalid memory access) at address 0x0\n"),
            std::string::npos)
      << out.err;
  EXPECT_NE(out.err.find("stack trace (most recent call first):\n"), std::string::npos) << out.err;
  EXPECT_NE(out.err.find("txmq_crash_here"), std::string::npos) << out.err;
  // The ring holds the last recent_lines_capacity lines: 68..99 of 0..99.
  const auto recent = out.err.find("last log lines (oldest first):\n");
  ASSERT_NE(recent, std::string::npos) << out.err;
  const std::string tail = out.err.substr(recent);
  const int first_kept = 100 - static_cast<int>(txmq::common::log::recent_lines_capacity);
  EXPECT_NE(tail.find("INFO  log line " + std::to_string(first_kept) + "\n"), std::string::npos) << tail;
  EXPECT_NE(tail.find("INFO  log line 99\n"), std::string::npos) << tail;
  EXPECT_EQ(tail.find("INFO  log line " + std::to_string(first_kept - 1) + "\n"), std::string::npos) << tail;
  EXPECT_NE(tail.find("end of crash report\n"), std::string::npos) << tail;
}

TEST(crash_report, abort_is_reported_and_still_dies_of_sigabrt) {
  const auto out = run_child("abort", 3);
  EXPECT_EQ(out.signal, SIGABRT) << out.err;
  EXPECT_NE(out.err.find("fatal signal SIGABRT (aborted)\n"), std::string::npos) << out.err;
  EXPECT_NE(out.err.find("INFO  log line 2\n"), std::string::npos) << out.err;
}

TEST(crash_report, fpe_without_log_lines_says_none) {
  const auto out = run_child("fpe", 0);
  EXPECT_EQ(out.signal, SIGFPE) << out.err;
  EXPECT_NE(out.err.find("fatal signal SIGFPE"), std::string::npos) << out.err;
  EXPECT_NE(out.err.find("last log lines (oldest first):\n(none)\n"), std::string::npos) << out.err;
}

}  // namespace
