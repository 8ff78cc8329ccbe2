#pragma once
// What the group runner tells a front end while it measures (progress lines, tests), without
// printing anything itself: an observer it calls after every block of a group measurement and
// once a group's results are in. A block is one interleaved measurement of a group
// (measure/blocks.hpp); a group measured alone in one piece is one block.
#include <cstddef>
#include <string>

namespace fusebench::bench {

struct BlockDone {
  std::size_t group = 0;   // index into the GroupPlan's groups
  std::string group_key;   // Fixture::group_key() of its members
  std::size_t block = 0;   // this block's index in its group's measurement (0-based)
  std::size_t blocks = 1;  // blocks of that measurement (its plan; known from its first block)
  std::size_t members = 0;
  std::size_t blocks_done = 0;  // blocks measured so far in the sweep, this one included
  // The timing policy's bounds on this block's sampling (its share of min_time_s and
  // max_time_s x members) and the seconds the engine actually sampled (0: none, e.g. every
  // member failed to prepare): the rest of a block's wall time is preparing and reporting.
  double floor_s = 0;
  double budget_s = 0;
  double sampled_s = 0;
};

class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void block_done(const BlockDone& event) = 0;
  // Round `round` of a block of group `group` starts (called between rounds, never inside the
  // timed part of a sample): a long block shows movement too.
  virtual void round_started(std::size_t group, const std::string& key, std::size_t round) {
    (void)group, (void)key, (void)round;
  }
  // Every entry of group `group` has its result (measured or failed).
  virtual void group_done(std::size_t group, const std::string& key) = 0;
};

}  // namespace fusebench::bench
