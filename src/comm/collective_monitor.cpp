#include "collective_monitor.hpp"

#include <iostream>
#include <stdexcept>

namespace fusebench::comm {

using Clock = std::chrono::steady_clock;

WatchDecision decide(const WatchState& s, double timeout_s) {
  const std::string limit = std::to_string(timeout_s) + " s (FUSEBENCH_COMM_TIMEOUT)";
  if (!s.async_error.empty()) return {WatchAction::abort, s.async_error, !s.has_pending};
  if (s.has_pending && s.oldest == Completion::failed)
    return {WatchAction::abort, s.oldest_error.empty() ? "device error" : s.oldest_error, false};
  if (s.has_pending && s.oldest == Completion::done) return {WatchAction::retire_oldest, {}, false};
  if (s.host_call && s.host_call_age_s > timeout_s)
    return {WatchAction::abort, "the call did not return within " + limit, true};
  if (s.has_pending && s.oldest_age_s > timeout_s)
    return {WatchAction::abort, "not complete after " + limit, false};
  if (s.host_call || s.has_pending) return {WatchAction::poll_again, {}, false};
  return {WatchAction::idle, {}, false};
}

CollectiveMonitor::CollectiveMonitor(std::string who, double timeout_s, Hooks hooks, double poll_s)
    : who_(std::move(who)),
      timeout_s_(timeout_s),
      poll_s_(poll_s),
      hooks_(std::move(hooks)),
      thread_([this] { loop(); }) {}

CollectiveMonitor::~CollectiveMonitor() { stop(); }

void CollectiveMonitor::stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (auto& p : pending_) hooks_.release(p.marker);
  pending_.clear();
}

void CollectiveMonitor::throw_if_failed() {
  std::lock_guard lock(mu_);
  if (!failure_.empty()) throw std::runtime_error(failure_);
}

bool CollectiveMonitor::aborted() {
  std::lock_guard lock(mu_);
  return aborted_;
}

void CollectiveMonitor::call(const std::string& what, const std::function<std::string()>& issue) {
  run_call(what, issue, true);
}

void CollectiveMonitor::call_unmarked(const std::string& what,
                                      const std::function<std::string()>& issue) {
  run_call(what, issue, false);
}

void CollectiveMonitor::run_call(const std::string& what, const std::function<std::string()>& issue,
                                 bool mark) {
  {
    std::lock_guard lock(mu_);
    if (!failure_.empty()) throw std::runtime_error(failure_);
    in_call_ = true;
    call_start_ = Clock::now();
    call_what_ = what;
  }
  cv_.notify_all();
  std::string error;
  try {
    error = issue();  // not under mu_: the monitor must be able to abort a call that hangs
  } catch (...) {
    std::lock_guard lock(mu_);
    in_call_ = false;
    throw;
  }
  {
    std::lock_guard lock(mu_);
    in_call_ = false;
    if (aborted_) throw std::runtime_error(failure_);
    if (!error.empty()) throw std::runtime_error(who_ + ": " + what + ": " + error);
  }
  if (!mark) return;
  void* marker = hooks_.mark();
  {
    std::lock_guard lock(mu_);
    if (!aborted_) {
      pending_.push_back({marker, Clock::now(), what});
      marker = nullptr;
    }
  }
  if (marker != nullptr) {
    hooks_.release(marker);
    throw_if_failed();
  }
  cv_.notify_all();
}

void CollectiveMonitor::loop() {
  if (hooks_.on_thread_start) hooks_.on_thread_start();
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (aborted_) {
      cv_.wait(lock);
      continue;
    }
    const auto now = Clock::now();
    WatchState s;
    s.host_call = in_call_;
    s.host_call_age_s = std::chrono::duration<double>(now - call_start_).count();
    s.has_pending = !pending_.empty();
    if (s.has_pending) {
      s.oldest = hooks_.query(pending_.front().marker, &s.oldest_error);
      s.oldest_age_s = std::chrono::duration<double>(now - pending_.front().issued).count();
    }
    if (s.host_call || s.has_pending) s.async_error = hooks_.async_error();
    const WatchDecision d = decide(s, timeout_s_);
    switch (d.action) {
      case WatchAction::idle:
        cv_.wait(lock);
        break;
      case WatchAction::poll_again:
        // Only the monitor waits; the issuing thread never does.
        cv_.wait_for(lock, std::chrono::duration<double>(poll_s_));
        break;
      case WatchAction::retire_oldest:
        hooks_.release(pending_.front().marker);
        pending_.pop_front();
        break;
      case WatchAction::abort: {
        const std::string what = d.about_host_call ? call_what_ : pending_.front().what;
        failure_ = who_ + ": " + what + ": " + d.reason + "; communicator aborted";
        aborted_ = true;
        std::cerr << "fusebench: " << failure_ << std::endl;
        for (auto& p : pending_) hooks_.release(p.marker);
        pending_.clear();
        // Unlocked: the abort makes a hanging call return, and that call's thread then takes
        // mu_; no new call starts (aborted_ is set).
        lock.unlock();
        hooks_.abort();
        lock.lock();
        cv_.notify_all();
        break;
      }
    }
  }
}

}  // namespace fusebench::comm
