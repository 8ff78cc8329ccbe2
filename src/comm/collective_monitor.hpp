#pragma once
// Host logic of the NCCL communicator, kept free of CUDA and NCCL so it is tested on the CPU
// (tests/test_comm_host.cpp). The communicators are blocking (ncclConfig.blocking = 1): a call
// returns once its kernel is enqueued, so the issuing thread never polls or sleeps. A monitor
// thread enforces the timeout instead, on two things: a call that stays inside the library (the
// first collective connects to the peers and can block on a dead one), and a collective whose
// kernel does not complete (a completion marker, the CUDA event recorded after it, stays
// pending). Either, or an asynchronous error the library reports, aborts the communicator
// (ncclCommAbort, which also makes stuck kernels and calls return), and every later call throws
// the reason.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace fusebench::comm {

enum class Completion { done, pending, failed };

// What the monitor sees at one look.
struct WatchState {
  bool host_call = false;  // a call is inside the library
  double host_call_age_s = 0;
  bool has_pending = false;  // an issued collective whose completion was not seen yet
  Completion oldest = Completion::pending;
  std::string oldest_error;  // when oldest == failed
  double oldest_age_s = 0;
  std::string async_error;  // the library's asynchronous error; empty when none
};
enum class WatchAction { idle, retire_oldest, poll_again, abort };
struct WatchDecision {
  WatchAction action = WatchAction::idle;
  std::string reason;            // why, for abort
  bool about_host_call = false;  // the abort is about the call in progress, not a kernel
};
// Pure: what to do about `s` with `timeout_s` per call and per collective.
WatchDecision decide(const WatchState& s, double timeout_s);

class CollectiveMonitor {
 public:
  struct Hooks {
    std::function<void*()> mark;  // a completion marker after the call just issued
    std::function<Completion(void*, std::string* error)> query;
    std::function<void(void*)> release;        // a marker no longer watched
    std::function<std::string()> async_error;  // "" when none
    std::function<void()> abort;               // aborts (and frees) the communicator
    std::function<void()> on_thread_start;     // e.g. make the communicator's device current
  };
  // `who` names the communicator in messages ("NCCL rank 3").
  CollectiveMonitor(std::string who, double timeout_s, Hooks hooks, double poll_s = 2e-3);
  ~CollectiveMonitor();
  CollectiveMonitor(const CollectiveMonitor&) = delete;
  CollectiveMonitor& operator=(const CollectiveMonitor&) = delete;

  // One watched call: `issue` runs on this thread (it returns "" or the library's error text);
  // a marker after it goes to the monitor. Never waits for the collective to complete. Throws
  // when the communicator failed before, during or because of the call.
  void call(const std::string& what, const std::function<std::string()>& issue);
  // A watched call that is not a collective (finalize): the timeout covers the call only.
  void call_unmarked(const std::string& what, const std::function<std::string()>& issue);
  void throw_if_failed();
  bool aborted();
  // Stops the monitor thread (markers still pending are released). Idempotent.
  void stop();

 private:
  struct Pending {
    void* marker;
    std::chrono::steady_clock::time_point issued;
    std::string what;
  };
  void run_call(const std::string& what, const std::function<std::string()>& issue, bool mark);
  void loop();

  std::string who_;
  double timeout_s_, poll_s_;
  Hooks hooks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  bool in_call_ = false;
  std::chrono::steady_clock::time_point call_start_;
  std::string call_what_;
  std::string failure_;
  bool aborted_ = false, stop_ = false;
  std::thread thread_;  // last: starts after the members it reads
};

}  // namespace fusebench::comm
