// A process that owns a test PostgreSQL server (tests/support/pg_cluster.h), for
// pg_cluster_test. Once the server runs it prints "ready DIR POSTMASTER_PID", then:
//
//   pg_cluster_child wait   waits to be killed (the test SIGKILLs it, as ctest kills a test
//                           on its timeout: no destructor runs)
//   pg_cluster_child exit   returns from main (the destructor stops the server)

#include <unistd.h>

#include <iostream>
#include <string>

#include "pg_cluster.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "wait" && mode != "exit") {
    std::cerr << "usage: pg_cluster_child wait|exit\n";
    return 2;
  }
  txmq::test::pg_cluster cluster;
  std::cout << "ready " << cluster.dir().string() << " " << cluster.postmaster_pid() << std::endl;
  if (mode == "wait") {
    for (;;) ::pause();
  }
  return 0;
}
