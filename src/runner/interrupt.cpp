#include "interrupt.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

namespace fusebench::bench {
namespace {

std::atomic<int> received{0};
std::atomic<bool> exits_now{false};
static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free flag");

// What a signal does, wherever it is taken: in the handler (a thread that existed before the
// handlers were installed) or in the watcher thread (every other thread blocks the signals).
void on_signal_in(int sig, bool watcher) {
  if (received.exchange(sig) != 0) {
    // The second one: the user means it. The default action ends the process now.
    std::signal(sig, SIG_DFL);
    if (watcher) {  // the watcher blocks it outside sigwait: unblocked here, raised on itself
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    }
    std::raise(sig);
    return;
  }
  if (exits_now.load()) {
    // Nothing measured yet (checkpoints, ceilings, --verify): nothing to write, and a long
    // float64 reference must not keep the user waiting.
    static const char before[] =
        "\nfusebench: interrupted before the sweep began: nothing was measured, no report "
        "written\n";
    const ssize_t ignored = ::write(STDERR_FILENO, before, sizeof(before) - 1);
    (void)ignored;
    ::_exit(128 + sig);
  }
  static const char message[] =
      "\nfusebench: interrupted: stopping after the block being measured, then writing what was "
      "measured (context.interrupted); interrupt again to stop at once\n";
  const ssize_t ignored = ::write(STDERR_FILENO, message, sizeof(message) - 1);
  (void)ignored;
}

void on_signal(int sig) { on_signal_in(sig, false); }

}  // namespace

void install_interrupt_handlers() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  // The handler, for the threads that exist already (OpenBLAS starts its workers when the library
  // loads): a signal delivered to one of them is handled there, as before.
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  // Blocked in this thread and so in every thread started from here on (ours, OpenMP's), taken
  // by one watcher thread with sigwait instead. oneDNN's JIT GEMM kernels run with the stack
  // pointer inside a heap buffer: a signal delivered to a thread at that moment had the kernel
  // write its signal frame (the saved registers and FPU state) into the heap, which malloc later
  // found as "corrupted size vs. prev_size" (issue 27; a core showed the frame, rsp in the heap
  // and rip in JIT code).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) == 0) on_signal_in(sig, true);
    }
  }).detach();
}

void interrupt_self(int signal) {
  const int before = received.load();
  ::kill(::getpid(), signal);  // process-directed: the watcher takes it
  for (int i = 0; i < 2000 && received.load() == before; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

int interrupt_signal() { return received.load(); }

void set_interrupt_exits_now(bool now) { exits_now.store(now); }

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(signal);
}

void set_interrupt_signal_for_test(int signal) { received.store(signal); }

}  // namespace fusebench::bench
