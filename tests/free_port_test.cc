// The test support's free_port: two test processes (ctest -j) never get the same port, even
// while neither has bound it, and a process's claims end with it.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "broker_process.h"

namespace txmq::test {
namespace {

// Enough that two processes picking at random from the ~22,700 ports below the ephemeral
// range would share about 11 of them (500 * 500 / 22,700) without the claims: this passes by
// chance with probability e^-11.
constexpr int k_ports = 500;

bool read_all(int fd, void* data, std::size_t size) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    const auto n = ::read(fd, p, size);
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// Whether another open file description could take the claim on `port` now.
bool claimable(std::uint16_t port) {
  const auto file = std::filesystem::temp_directory_path() / "txmq-test-ports" / std::to_string(port);
  const int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return ok;
}

TEST(free_port, two_processes_never_get_the_same_port_and_claims_end_with_the_process) {
  int to_parent[2];
  int to_child[2];
  ASSERT_EQ(::pipe(to_parent), 0);
  ASSERT_EQ(::pipe(to_child), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The other test process: picks its ports, reports them, and holds them (it binds none)
    // until the parent has picked its own.
    ::close(to_parent[0]);
    ::close(to_child[1]);
    std::vector<std::uint16_t> ports;
    for (int i = 0; i < k_ports; ++i) ports.push_back(free_port());
    const auto bytes = ports.size() * sizeof ports[0];
    const bool sent = ::write(to_parent[1], ports.data(), bytes) == static_cast<ssize_t>(bytes);
    char done = 0;
    (void)::read(to_child[0], &done, 1);
    ::_exit(sent ? 0 : 1);
  }
  ::close(to_parent[1]);
  ::close(to_child[0]);
  std::vector<std::uint16_t> theirs(k_ports);
  const bool got = read_all(to_parent[0], theirs.data(), theirs.size() * sizeof theirs[0]);
  std::vector<std::uint16_t> ours;
  if (got) {
    for (int i = 0; i < k_ports; ++i) ours.push_back(free_port());
  }
  // The child still holds its claims here.
  const bool held = got && !claimable(theirs.front());
  ::close(to_child[1]);  // the child ends
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(to_parent[0]);
  ASSERT_TRUE(got) << "the child process did not report its ports";
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  std::sort(theirs.begin(), theirs.end());
  std::sort(ours.begin(), ours.end());
  std::vector<std::uint16_t> shared;
  std::set_intersection(theirs.begin(), theirs.end(), ours.begin(), ours.end(), std::back_inserter(shared));
  EXPECT_TRUE(shared.empty()) << shared.size() << " ports given to both processes, the first " << shared.front();
  EXPECT_TRUE(held) << "port " << theirs.front() << " was claimable while its process ran";
  EXPECT_TRUE(claimable(theirs.front())) << "port " << theirs.front() << " stayed claimed after its process ended";
}

}  // namespace
}  // namespace txmq::test
