#pragma once
// Ctrl-C (SIGINT) and SIGTERM during a sweep. The first asks the run to stop at its next safe
// point (between blocks and between groups, group_runner.hpp), where what was measured is written
// with context.interrupted: true and the binary exits 128 + the signal (130 for SIGINT); a second
// one ends the process at once (the signal's default action). The handler only records the
// signal and says so with write(2): nothing else is safe inside a signal handler.
#include <string>

namespace fusebench::bench {

// Installs the handlers for SIGINT and SIGTERM (SA_RESTART: system calls go on), blocks both in
// the calling thread (and so in the threads it starts later) and starts the one thread that takes
// them (interrupt.cpp says why). Once per process; call it first thing in main.
void install_interrupt_handlers();
// Sends `signal` to this process and waits (up to 2 s) until it is recorded: raise() would
// leave it pending on the calling thread, which blocks it. For tests and the safe-point hook.
void interrupt_self(int signal);
// While set (from start-up until the sweep begins: checkpoints, ceilings, --verify), the first
// signal ends the process at once with 128 + the signal: nothing was measured, so nothing is
// written, and a float64 reference of minutes does not delay the stop.
void set_interrupt_exits_now(bool now);
// The first signal received, 0 while none.
int interrupt_signal();
// "SIGINT", "SIGTERM", else "signal N".
std::string signal_name(int signal);
// For tests: as if `signal` had arrived (0: as if none had).
void set_interrupt_signal_for_test(int signal);

// The error of an entry whose group was not measured because the sweep was stopped
// (group_runner.hpp); the report writer leaves such entries out.
inline constexpr const char* kNotMeasuredInterrupted =
    "not measured: the run was interrupted before this entry's group was measured";

}  // namespace fusebench::bench
