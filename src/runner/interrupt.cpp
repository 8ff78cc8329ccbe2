#include "interrupt.hpp"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace fusebench::bench {
namespace {

std::atomic<int> received{0};
std::atomic<bool> exits_now{false};
static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free flag");

void on_signal(int sig) {
  if (received.exchange(sig) != 0) {
    // The second one: the user means it. The default action ends the process now.
    std::signal(sig, SIG_DFL);
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

}  // namespace

void install_interrupt_handlers() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
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
