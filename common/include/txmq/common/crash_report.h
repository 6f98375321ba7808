#pragma once

// A crash report where no handler can go on serving (a fault, an abort): on SIGSEGV, SIGBUS,
// SIGILL, SIGFPE or SIGABRT the process writes to stderr the signal's name (and the faulting
// address), a stack trace and the last log lines (log.h keeps a ring of them), then dies of the
// same signal with its default action, so the exit status and a core dump stay as they were.
//
//   txmq-broker: fatal signal SIGSEGV (invalid memory access) at address 0x0
//   stack trace (most recent call first):
//   ./txmq-broker(_ZN4txmq6broker...+0x2a)[0x55d...]
//   ...
//   last log lines (oldest first):
//   2026-11-26T10:01:02.345Z INFO  listening on 127.0.0.1:7878
//   end of crash report
//
// Only async-signal-safe calls run in the handler: write(2), backtrace() (primed at install
// so that it loads libgcc's unwinder before any crash) and backtrace_symbols_fd(), which
// writes without allocating. Symbol names appear for functions the executable exports (the
// broker and the relay link with ENABLE_EXPORTS); others show as module(+offset), which
// `addr2line -e BINARY -f -C OFFSET` turns into a name and a line.
//
// The handler runs on an alternate signal stack for the thread that installed it (main), so
// a stack overflow there is reported too; another thread's overflow ends without a report.
//
// Thread-safety: install once, from main(), before starting threads.

#include <string_view>

namespace txmq::common {

// Installs the report for the five signals. `program` names the process in the report's first
// line (kept as given: pass a string literal).
void install_crash_report(const char* program);

// "SIGSEGV", "SIGBUS", ...; "signal" for one it does not name. Async-signal-safe.
[[nodiscard]] std::string_view fatal_signal_name(int sig) noexcept;

}  // namespace txmq::common
