#include "txmq/common/signals.h"

#include <pthread.h>

namespace txmq::common {

std::string_view to_string(stop_signal s) noexcept {
  return s == stop_signal::interrupt ? "SIGINT" : "SIGTERM";
}

stop_signals block_stop_signals() {
  stop_signals out;
  sigemptyset(&out.set_);
  sigaddset(&out.set_, SIGINT);
  sigaddset(&out.set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &out.set_, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return out;
}

stop_signal wait_for_stop_signal(const stop_signals& signals) {
  int sig = 0;
  // sigwait fails only for an invalid set, which block_stop_signals() never makes.
  (void)sigwait(&signals.set(), &sig);
  return sig == SIGINT ? stop_signal::interrupt : stop_signal::terminate;
}

}  // namespace txmq::common
