#pragma once

// Stopping a server on SIGINT or SIGTERM, the same way in txmq-broker and txmq-relay: main()
// blocks the stop signals before it starts any thread, so no thread is ever interrupted by
// them (every thread inherits the mask), and one thread takes them with sigwait.
//
//   const auto signals = common::block_stop_signals();   // first thing in main()
//   ... start threads ...
//   const auto which = common::wait_for_stop_signal(signals);  // on one thread
//
// Thread-safety: block_stop_signals() changes the calling thread's mask and the process's
// SIGPIPE disposition: call it once, from main(), before any thread starts.
// wait_for_stop_signal() may run on any thread whose mask blocks the signals.

#include <signal.h>

#include <string_view>

namespace txmq::common {

enum class stop_signal {
  interrupt,  // SIGINT (Ctrl-C)
  terminate,  // SIGTERM (kill, systemd, docker stop)
  hangup,     // SIGHUP, only with reload_on_hangup::yes: reload, do not stop
};

// Whether SIGHUP is blocked too and reported by wait_for_stop_signal (the broker reloads its
// TLS certificate on it); otherwise SIGHUP keeps its default action.
enum class reload_on_hangup { no, yes };

// "SIGINT", "SIGTERM", "SIGHUP".
[[nodiscard]] std::string_view to_string(stop_signal s) noexcept;

// The signals block_stop_signals() blocked; what wait_for_stop_signal() waits for.
class stop_signals {
 public:
  [[nodiscard]] const sigset_t& set() const noexcept { return set_; }

 private:
  friend stop_signals block_stop_signals(reload_on_hangup hangup);
  stop_signals() = default;
  sigset_t set_{};
};

// Blocks SIGINT and SIGTERM in the calling thread (and so in every thread it starts later):
// they stay pending until wait_for_stop_signal() takes one. Ignores SIGPIPE, so that writing to
// a socket whose peer has gone is an EPIPE error value, not the end of the process.
[[nodiscard]] stop_signals block_stop_signals(reload_on_hangup hangup = reload_on_hangup::no);

// Blocks until SIGINT or SIGTERM (or SIGHUP, when blocked) arrives (sent to the process, or to this thread with
// pthread_kill, which is how a main() wakes its own waiting thread) and returns which.
[[nodiscard]] stop_signal wait_for_stop_signal(const stop_signals& signals);

}  // namespace txmq::common
