#include "txmq/common/crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "txmq/common/log.h"

namespace txmq::common {
namespace {

constexpr std::array k_fatal_signals = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr int k_max_frames = 64;

const char* g_program = "txmq";
// Big enough for the handler's own frames plus backtrace's unwinding.
alignas(16) char g_alt_stack[64 * 1024];

void put(std::string_view text) noexcept {
  while (!text.empty()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
    if (n <= 0) return;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

void put_hex(std::uintptr_t value) noexcept {
  char digits[2 + 2 * sizeof value];
  std::size_t i = sizeof digits;
  do {
    digits[--i] = "0123456789abcdef"[value % 16];
    value /= 16;
  } while (value != 0 && i > 2);
  digits[--i] = 'x';
  digits[--i] = '0';
  put(std::string_view(digits + i, sizeof digits - i));
}

std::string_view meaning(int sig) noexcept {
  switch (sig) {
    case SIGSEGV: return "invalid memory access";
    case SIGBUS: return "bus error";
    case SIGILL: return "illegal instruction";
    case SIGFPE: return "arithmetic exception";
    case SIGABRT: return "aborted";
    default: return "fatal";
  }
}

void on_fatal_signal(int sig, siginfo_t* info, void*) {
  // SA_RESETHAND restored the default action on entry: a second fault inside this handler, or
  // the same signal in another thread, ends the process plainly instead of looping.
  const int saved_errno = errno;
  put(g_program);
  put(": fatal signal ");
  put(fatal_signal_name(sig));
  put(" (");
  put(meaning(sig));
  put(")");
  if (sig != SIGABRT && info != nullptr) {
    put(" at address ");
    put_hex(reinterpret_cast<std::uintptr_t>(info->si_addr));
  }
  put("\nstack trace (most recent call first):\n");
  void* frames[k_max_frames];
  const int n = ::backtrace(frames, k_max_frames);
  ::backtrace_symbols_fd(frames, n, STDERR_FILENO);
  put("last log lines (oldest first):\n");
  if (log::write_recent_lines(STDERR_FILENO) == 0) put("(none)\n");
  put("end of crash report\n");
  errno = saved_errno;
  // Dies of the same signal with the default action (SA_NODEFER: delivered now), keeping the
  // exit status a supervisor sees and the core dump.
  ::raise(sig);
}

}  // namespace

std::string_view fatal_signal_name(int sig) noexcept {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    default: return "signal";
  }
}

void install_crash_report(const char* program) {
  g_program = program;
  // backtrace() loads libgcc_s on its first call, which allocates: do it now, not in a crash.
  void* probe[1];
  (void)::backtrace(probe, 1);

  stack_t alt{};
  alt.ss_sp = g_alt_stack;
  alt.ss_size = sizeof g_alt_stack;
  (void)::sigaltstack(&alt, nullptr);

  struct sigaction action{};
  action.sa_sigaction = on_fatal_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
  for (int sig : k_fatal_signals) (void)::sigaction(sig, &action, nullptr);
}

}  // namespace txmq::common
