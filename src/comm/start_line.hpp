#pragma once
// The start line of a pass timed on every rank of a single-process run (threads): every rank
// waits until all have arrived, so their timed runs overlap as the ranks of the timed region do
// (DESIGN.md: a barrier before timing, the maximum over ranks). A rank that does not arrive
// within the timeout fails the pass instead of hanging it. Reusable: one pass after another.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>

namespace fusebench::comm {

class StartLine {
 public:
  explicit StartLine(int ranks) : ranks_(ranks) {}
  // Returns once `ranks` callers (this one included) have arrived; throws std::runtime_error
  // when they have not within `timeout_s`.
  void arrive_and_wait(double timeout_s) {
    std::unique_lock lock(mu_);
    const std::uint64_t generation = generation_;
    if (++arrived_ == ranks_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                      [&] { return generation_ != generation; })) {
      --arrived_;  // this caller leaves; the line stays usable for the others
      throw std::runtime_error("compute pass: " + std::to_string(ranks_ - arrived_ - 1) + " of " +
                               std::to_string(ranks_) +
                               " ranks did not reach the start line within " +
                               std::to_string(timeout_s) + " s");
    }
  }

 private:
  const int ranks_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace fusebench::comm
