#pragma once

// A private PostgreSQL 15 server for a test: initdb into a temporary directory owned by the
// `postgres` user (PostgreSQL refuses to run as root), listening on 127.0.0.1 on a free port
// and on a private socket directory, fsync on. Stopped and removed by the destructor.
//
// Also when the test process dies without running it (SIGKILLed by ctest on its timeout, a
// crash, _exit): the server is a daemon, not a child of the test, so nothing else would stop it.
// A watchdog (a shell script started in a session of its own, so that ctest's kill of the
// test's process tree does not reach it) waits on a pipe whose only writer is this object; when
// the pipe closes without the destructor's "done" line, it stops the server (pg_ctl stop -m
// immediate) and removes the directory.

#include <cstdint>
#include <filesystem>
#include <string>

namespace txmq::test {

class pg_cluster {
 public:
  // initdb + start. Throws std::runtime_error with the tools' output when either fails.
  pg_cluster();
  ~pg_cluster();
  pg_cluster(const pg_cluster&) = delete;
  pg_cluster& operator=(const pg_cluster&) = delete;

  // A new empty database; returns its conninfo.
  std::string create_database(const std::string& name);
  // conninfo for database `name` (default "postgres").
  [[nodiscard]] std::string conninfo(const std::string& name = "postgres") const;

  // pg_ctl restart -m fast: every connection is cut, the server is back when this returns.
  void restart();
  void stop();
  void start();

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  // The postmaster's process id (from postmaster.pid); -1 when the server is not running.
  [[nodiscard]] int postmaster_pid() const;
  [[nodiscard]] const std::filesystem::path& dir() const noexcept { return dir_; }

  // The PostgreSQL tools' directory (/usr/lib/postgresql/15/bin).
  static std::string bin(const std::string& tool);
  // Runs a command line through /bin/sh as the postgres user; returns its exit status and
  // appends its output to *out when given.
  static int run_as_postgres(const std::string& command, std::string* out = nullptr);

 private:
  void pg_ctl(const std::string& action);
  // initdb + start (the constructor's work once the directory and the watchdog exist).
  void init();
  // Starts the watchdog (see above) for dir_; watchdog_ is the pipe's write end.
  void start_watchdog();
  // Tells the watchdog the directory is taken care of ("done": exit) or not (close only: stop
  // the server, remove the directory), and closes the pipe.
  void end_watchdog(bool done) noexcept;

  std::filesystem::path dir_;
  std::uint16_t port_ = 0;
  bool running_ = false;
  int watchdog_ = -1;
};

// One cluster for a whole test binary (initdb costs ~2 s): made on first use, stopped at exit.
pg_cluster& shared_pg_cluster();

}  // namespace txmq::test
