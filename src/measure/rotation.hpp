#pragma once
// Rotating copies of a workspace's buffers (same bytes, other addresses), cycled run after run
// as the layers of a real model are, so a region does not find its weights in the cache that the
// previous run left warm (docs/timing.md, "Cache policy").
#include <cstddef>
#include <functional>
#include <vector>

#include "fusebench/workspace.hpp"
#include "measure/timing_policy.hpp"

namespace fusebench::measure {

// How many sets a plan gets: one when it has collectives (the communicator owns the rank
// buffers; copies of one rank's buffers would desynchronise them), else rotation_sets().
Rotation rotation_for(const Plan& plan, std::size_t cache_bytes, std::size_t memory_budget);

class RotationSets {
 public:
  // Copies set 0 (the workspace's own buffers) into sets 1..rotation.sets-1; throws (freeing
  // what it made) when an allocation fails.
  RotationSets(Workspace& ws, Rotation rotation);
  ~RotationSets();
  RotationSets(const RotationSets&) = delete;
  RotationSets& operator=(const RotationSets&) = delete;

  std::size_t sets() const { return 1 + extra_.size(); }
  const Rotation& rotation() const { return rotation_; }
  // One run on set `set` (taken modulo sets()): set 0 through `set0`, the caller's region (a TP
  // region drives every rank), the others through Workspace::run_on.
  void run(std::size_t set, const std::function<void()>& set0);

 private:
  Workspace& ws_;
  Rotation rotation_;
  std::vector<std::vector<void*>> extra_;
};

}  // namespace fusebench::measure
