// The test PostgreSQL server (tests/support/pg_cluster.h) does not outlive its test process: a
// process SIGKILLed while it owns one (what ctest does to a test that passes its timeout) leaves
// no postgres process, no watchdog and no directory behind; a clean exit leaves none either.

#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "broker_process.h"
#include "child_process.h"
#include "eventually.h"
#include "pg_cluster.h"

namespace txmq::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Running (a zombie not yet reaped by its new parent counts as gone).
bool alive(pid_t pid) {
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH)) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'Z';
}

// Processes whose command line names `text` (the server's is "postgres -D DIR/data ...", the
// watchdog's "/bin/sh DIR/watchdog.sh").
int processes_naming(const std::string& text) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const auto name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(text) != std::string::npos) ++n;
  }
  return n;
}

struct owner {
  fs::path dir;
  pid_t postmaster = -1;
};

// Starts pg_cluster_child in `mode` and waits for its "ready DIR PID" line.
owner start_owner(std::unique_ptr<child_process>& child, const fs::path& out, const std::string& mode) {
  child = std::make_unique<child_process>(std::vector<std::string>{binary_path("pg_cluster_child"), mode}, out);
  owner o;
  const bool ready = eventually(
      [&] {
        std::ifstream in(out);
        for (std::string line; std::getline(in, line);) {
          std::istringstream words(line);
          std::string word;
          if (words >> word && word == "ready") {
            std::string dir;
            words >> dir >> o.postmaster;
            o.dir = dir;
            return true;
          }
        }
        return false;
      },
      60s);
  if (!ready) {
    std::ifstream in(out);
    throw std::runtime_error("pg_cluster_child did not start its server:\n" +
                             std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  }
  return o;
}

// What a failing test leaves: stop that server by hand.
void clean_up(const owner& o) {
  if (fs::exists(o.dir / "data")) {
    (void)pg_cluster::run_as_postgres(pg_cluster::bin("pg_ctl") + " -D " + (o.dir / "data").string() + " stop -m immediate -w");
  }
  std::error_code ec;
  fs::remove_all(o.dir, ec);
}

fs::path output_file(const std::string& name) {
  return fs::temp_directory_path() / ("txmq-pg-cluster-test-" + std::to_string(::getpid()) + "-" + name + ".log");
}

TEST(pg_cluster, a_killed_owner_leaves_no_server_watchdog_or_directory) {
  const auto out = output_file("killed");
  std::unique_ptr<child_process> child;
  const auto o = start_owner(child, out, "wait");
  ASSERT_TRUE(alive(o.postmaster)) << o.postmaster;
  ASSERT_TRUE(fs::exists(o.dir / "data"));

  child->kill();  // SIGKILL: no destructor, as when ctest kills a test on its timeout
  const bool gone = eventually(
      [&] { return !alive(o.postmaster) && !fs::exists(o.dir) && processes_naming(o.dir.string()) == 0; }, 60s);
  EXPECT_TRUE(gone) << "postmaster " << o.postmaster << (alive(o.postmaster) ? " still runs" : " gone") << ", "
                    << o.dir << (fs::exists(o.dir) ? " still there" : " gone") << ", "
                    << processes_naming(o.dir.string()) << " processes name it";
  if (!gone) clean_up(o);
  fs::remove(out);
}

TEST(pg_cluster, a_clean_exit_stops_the_server_and_its_watchdog) {
  const auto out = output_file("exit");
  std::unique_ptr<child_process> child;
  const auto o = start_owner(child, out, "exit");
  EXPECT_EQ(child->wait(), 0);
  // The destructor stopped the server and removed the directory before returning; the watchdog
  // exits on its "done" line.
  EXPECT_FALSE(alive(o.postmaster));
  EXPECT_FALSE(fs::exists(o.dir));
  EXPECT_TRUE(eventually([&] { return processes_naming(o.dir.string()) == 0; }, 20s))
      << processes_naming(o.dir.string()) << " processes still name " << o.dir;
  clean_up(o);
  fs::remove(out);
}

}  // namespace
}  // namespace txmq::test
