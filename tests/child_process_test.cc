// The test support's child_process: a child outlives no test process that dies abruptly.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "child_process.h"

namespace txmq::test {
namespace {

// Gone, or a zombie nobody reaped yet (its reaper is init or a subreaper, not this test).
bool ended(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string field;
  for (int i = 0; i < 3 && stat >> field; ++i) {
  }
  return field == "Z" || field == "X";
}

TEST(child_process, a_child_dies_when_the_test_process_is_killed) {
  const auto dir = std::filesystem::temp_directory_path() / ("txmq-child-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  // The "test process": a fork of this one that starts a long sleep and is then SIGKILLed,
  // as ctest's timeout would, without running any destructor.
  const pid_t test_process = ::fork();
  ASSERT_GE(test_process, 0);
  if (test_process == 0) {
    ::close(pipe_fds[0]);
    auto* child = new child_process({"/bin/sleep", "600"}, dir / "sleep.log");  // never destroyed
    const pid_t pid = child->pid();
    (void)!::write(pipe_fds[1], &pid, sizeof pid);
    for (;;) ::pause();
  }
  ::close(pipe_fds[1]);
  pid_t grandchild = -1;
  ASSERT_EQ(::read(pipe_fds[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  ::close(pipe_fds[0]);
  ASSERT_GT(grandchild, 0);
  EXPECT_FALSE(ended(grandchild)) << "the child must run while its parent does";

  ::kill(test_process, SIGKILL);
  ::waitpid(test_process, nullptr, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!ended(grandchild) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a condition with a deadline
  }
  const bool gone = ended(grandchild);
  if (!gone) ::kill(grandchild, SIGKILL);
  EXPECT_TRUE(gone) << "the child of a SIGKILLed test process still runs";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace txmq::test
