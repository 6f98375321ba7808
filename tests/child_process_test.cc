// The test support's child_process: a child outlives no test process that dies abruptly.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
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

// The process runs `program` (its exec is done).
bool execed(pid_t pid, const std::string& program) {
  std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
  std::string first;
  std::getline(cmdline, first, '\0');
  return first == program;
}

// Forks a "test process" that starts a long sleep through child_process (from its main thread,
// or from a worker thread that has ended by then) and is SIGKILLed, as ctest's timeout would,
// without running any destructor. True when the sleep ended within 10 s.
void expect_child_dies_with_test_process(bool from_worker_thread) {
  const auto dir = std::filesystem::temp_directory_path() / ("txmq-child-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t test_process = ::fork();
  ASSERT_GE(test_process, 0);
  if (test_process == 0) {
    ::close(pipe_fds[0]);
    child_process* child = nullptr;  // never destroyed
    const auto start = [&] { child = new child_process({"/bin/sleep", "600"}, dir / "sleep.log"); };
    if (from_worker_thread) {
      std::thread(start).join();  // the thread that asked for the child is gone
    } else {
      start();
    }
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

TEST(child_process, a_child_dies_when_the_test_process_is_killed) { expect_child_dies_with_test_process(false); }

TEST(child_process, a_child_of_a_worker_thread_dies_when_the_test_process_is_killed) {
  expect_child_dies_with_test_process(true);
}

TEST(child_process, a_child_of_a_worker_thread_outlives_that_thread) {
  // The death signal follows the thread that forked: the spawner thread forks for workers, so
  // a broker a worker thread started runs on after the worker ends, until it is stopped.
  std::unique_ptr<child_process> child;
  const auto log = std::filesystem::temp_directory_path() / ("txmq-child-" + std::to_string(::getpid()) + ".log");
  std::thread([&] {
    child = std::make_unique<child_process>(std::vector<std::string>{"/bin/sleep", "600"}, log);
    // The worker ends only once the child has exec'ed the sleep (so it had set any death
    // signal by then): ended earlier, a signal tied to this thread would not have been armed.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!execed(child->pid(), "/bin/sleep") && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polling a condition with a deadline
    }
  }).join();
  // A SIGKILL from a dying parent thread would end it at once; the parent's wait tells.
  EXPECT_TRUE(child->running());
  EXPECT_EQ(child->stop(), 128 + SIGTERM) << "the sleep must end by the test's SIGTERM, not an earlier signal";
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace txmq::test
