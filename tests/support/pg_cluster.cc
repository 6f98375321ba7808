#include "pg_cluster.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "broker_process.h"

namespace txmq::test {
namespace fs = std::filesystem;

std::string pg_cluster::bin(const std::string& tool) { return "/usr/lib/postgresql/15/bin/" + tool; }

int pg_cluster::run_as_postgres(const std::string& command, std::string* out) {
  const std::string line = "runuser -u postgres -- /bin/sh -c '" + command + "' 2>&1";
  FILE* pipe = ::popen(line.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed for: " + line);
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) {
    if (out) out->append(buf.data(), n);
  }
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

pg_cluster::pg_cluster() {
  static std::atomic<int> counter{0};
  dir_ = fs::temp_directory_path() / ("txmq-pg-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  start_watchdog();
  try {
    init();
  } catch (...) {
    end_watchdog(false);  // it removes the directory (and stops a server that started)
    throw;
  }
}

void pg_cluster::init() {
  port_ = free_port();
  // The postgres user must own the directory and be able to reach it.
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  std::string out;
  if (std::system(("chown postgres:postgres '" + dir_.string() + "'").c_str()) != 0) {
    throw std::runtime_error("cannot chown " + dir_.string() + " to postgres (is the postgresql package installed?)");
  }
  const std::string initdb = bin("initdb") + " -D " + (dir_ / "data").string() + " -U postgres -A trust -E UTF8 --no-locale";
  if (run_as_postgres(initdb, &out) != 0) throw std::runtime_error("initdb failed:\n" + out);
  start();
}

pg_cluster::~pg_cluster() {
  try {
    if (running_) stop();
  } catch (...) {
    // A destructor must not throw; the directory goes anyway.
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
  // A server that did not stop is the watchdog's to stop.
  end_watchdog(!running_);
}

void pg_cluster::start_watchdog() {
  const fs::path script = dir_ / "watchdog.sh";
  {
    // `read` returns at the "done" line, or at end of file: when the test process is gone (the
    // kernel closes its descriptors however it ends). Children the test starts do not hold the
    // write end: it is close-on-exec.
    std::ofstream out(script);
    out << "read -r line\n"
        << "[ \"$line\" = done ] && exit 0\n"
        << "runuser -u postgres -- " << bin("pg_ctl") << " -D '" << (dir_ / "data").string()
        << "' stop -m immediate -w -t 60 >/dev/null 2>&1\n"
        << "rm -rf '" << dir_.string() << "'\n";
    if (!out) throw std::runtime_error("cannot write " + script.string());
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 for the PostgreSQL watchdog failed");
  const std::string sh = "/bin/sh";
  const std::string script_path = script.string();
  char* const argv[] = {const_cast<char*>(sh.c_str()), const_cast<char*>(script_path.c_str()), nullptr};
  // Forked twice, in a session of its own: re-parented once the middle process exits, outside
  // the test's process group and tree, so ctest's kill of the test's processes on a timeout does
  // not reach it. Between fork and exec only async-signal-safe calls (the test has threads).
  // Its only descriptors are the read end (stdin) and /dev/null: it must not keep a socket or
  // pipe of the test's open (asio sockets are not close-on-exec).
  const pid_t middle = ::fork();
  if (middle < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error("fork for the PostgreSQL watchdog failed");
  }
  if (middle == 0) {
    ::setsid();
    if (::fork() != 0) ::_exit(0);
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(fds[0], 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::close_range(3, ~0U, 0);
    ::execv(argv[0], argv);
    ::_exit(127);
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(middle, &status, 0);
  watchdog_ = fds[1];
}

void pg_cluster::end_watchdog(bool done) noexcept {
  if (watchdog_ < 0) return;
  if (done) (void)!::write(watchdog_, "done\n", 5);
  ::close(watchdog_);
  watchdog_ = -1;
}

void pg_cluster::pg_ctl(const std::string& action) {
  std::string out;
  const std::string options = "-p " + std::to_string(port_) + " -k " + dir_.string() +
                              " -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on -c max_connections=200";
  const std::string command = bin("pg_ctl") + " -D " + (dir_ / "data").string() + " -l " + (dir_ / "server.log").string() +
                              " -w -t 60 -m fast -o \"" + options + "\" " + action;
  if (run_as_postgres(command, &out) != 0) {
    std::string log;
    run_as_postgres("tail -n 30 " + (dir_ / "server.log").string(), &log);
    throw std::runtime_error("pg_ctl " + action + " failed:\n" + out + "\n" + log);
  }
}

void pg_cluster::start() {
  pg_ctl("start");
  running_ = true;
}

void pg_cluster::stop() {
  pg_ctl("stop");
  running_ = false;
}

void pg_cluster::restart() {
  pg_ctl("restart");
  running_ = true;
}

int pg_cluster::postmaster_pid() const {
  if (!running_) return -1;
  std::ifstream f(dir_ / "data" / "postmaster.pid");
  int pid = -1;
  f >> pid;
  return f ? pid : -1;
}

std::string pg_cluster::conninfo(const std::string& name) const {
  return "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=" + name + " connect_timeout=5";
}

std::string pg_cluster::create_database(const std::string& name) {
  std::string out;
  const std::string command = bin("psql") + " -h 127.0.0.1 -p " + std::to_string(port_) +
                              " -U postgres -d postgres -v ON_ERROR_STOP=1 -q -c \"CREATE DATABASE " + name + "\"";
  if (run_as_postgres(command, &out) != 0) throw std::runtime_error("CREATE DATABASE " + name + " failed:\n" + out);
  return conninfo(name);
}

pg_cluster& shared_pg_cluster() {
  static std::unique_ptr<pg_cluster> cluster = std::make_unique<pg_cluster>();
  return *cluster;
}

}  // namespace txmq::test
