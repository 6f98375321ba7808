#pragma once

// eventually(): wait for a condition with a deadline, for the cross-component tests.
//
// Why it polls: what these tests wait for is the state of another process — a transaction's
// state in the broker, a row or an advisory lock in PostgreSQL, a line in a child's output —
// which sends no notification a test could block on. So the condition is asked again every
// k_eventually_poll until it holds. This is the STYLE rule "no sleeps as synchronization: wait on
// a condition with a deadline": the pause is between two looks at the condition, never a guess at
// how long something takes.
//
// What the deadline means: how long a *failing* test waits before it says so. A passing test
// returns as soon as the condition holds, so the deadline is generous (a loaded CI machine, a
// sanitizer build) and says nothing about how fast the system must be; a test that asserts a
// speed measures the time itself.

#include <chrono>
#include <thread>

namespace txmq::test {

// Between two looks at a condition: short against the deadlines, long enough that a condition
// which runs a query or a child process does not load the machine.
inline constexpr std::chrono::milliseconds k_eventually_poll{20};

// Calls `done` until it returns true or `deadline` has passed, then once more after the
// deadline (a condition that became true in the last pause counts). Returns whether it held.
template <class Condition>
[[nodiscard]] bool eventually(Condition&& done, std::chrono::milliseconds deadline = std::chrono::seconds(20)) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(k_eventually_poll);  // between two looks at the condition
  }
  return done();
}

}  // namespace txmq::test
