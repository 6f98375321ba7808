#include "txmq/common/signals.h"

#include <pthread.h>

namespace txmq::common {

std::string_view to_string(stop_signal s) noexcept {
  switch (s) {
    case stop_signal::interrupt: return "SIGINT";
    case stop_signal::terminate: return "SIGTERM";
    case stop_signal::hangup: return "SIGHUP";
  }
  return "?";
}

stop_signals block_stop_signals(reload_on_hangup hangup) {
  stop_signals out;
  sigemptyset(&out.set_);
  sigaddset(&out.set_, SIGINT);
  sigaddset(&out.set_, SIGTERM);
  if (hangup == reload_on_hangup::yes) sigaddset(&out.set_, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &out.set_, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return out;
}

stop_signal wait_for_stop_signal(const stop_signals& signals) {
  int sig = 0;
  // sigwait fails only for an invalid set, which block_stop_signals() never makes.
  (void)sigwait(&signals.set(), &sig);
  if (sig == SIGHUP) return stop_signal::hangup;
  return sig == SIGINT ? stop_signal::interrupt : stop_signal::terminate;
}

}  // namespace txmq::common
