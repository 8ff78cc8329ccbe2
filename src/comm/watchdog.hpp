#pragma once
// A watchdog for blocking collectives: arm() before, disarm() after; if the deadline passes
// first, `on_timeout(what)` runs once on the watchdog's thread (it prints and aborts the job or
// the communicator, so a lost peer ends the fixture instead of hanging it).
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace fusebench::comm {

class Watchdog {
 public:
  Watchdog(double timeout_s, std::function<void(const std::string&)> on_timeout)
      : timeout_(timeout_s), on_timeout_(std::move(on_timeout)), thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void arm(std::string what) {
    std::lock_guard lock(mu_);
    what_ = std::move(what);
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(timeout_));
    armed_ = true;
    cv_.notify_all();
  }
  void disarm() {
    std::lock_guard lock(mu_);
    armed_ = false;
  }
  double timeout() const { return timeout_; }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      if (std::chrono::steady_clock::now() >= deadline_) {
        armed_ = false;
        const std::string what = what_;
        lock.unlock();
        on_timeout_(what);
        lock.lock();
        continue;
      }
      cv_.wait_until(lock, deadline_);
    }
  }

  double timeout_;
  std::function<void(const std::string&)> on_timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, armed_ = false;
  std::string what_;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;  // last: started after the members it reads
};

}  // namespace fusebench::comm
