// A process that crashes on purpose, for crash_report_test: it logs `lines` numbered lines,
// installs the crash report and then dies as asked.
//
//   crash_report_child segv|abort|fpe LINES

#include <csignal>
#include <cstdlib>
#include <string>
#include <string_view>

#include "txmq/common/crash_report.h"
#include "txmq/common/log.h"

// Not inlined, external and exported (ENABLE_EXPORTS): the stack trace names it.
[[gnu::noinline]] void txmq_crash_here(std::string_view how);
void txmq_crash_here(std::string_view how) {
  if (how == "segv") {
    volatile int* nowhere = nullptr;
    *nowhere = 1;
  } else if (how == "abort") {
    std::abort();
  } else {
    std::raise(SIGFPE);
  }
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const int lines = std::stoi(argv[2]);
  txmq::common::install_crash_report("crash_report_child");
  for (int i = 0; i < lines; ++i) txmq::common::log::info("log line ", i);
  txmq_crash_here(argv[1]);
  return 0;
}
