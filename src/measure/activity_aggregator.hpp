#pragma once
// Turns CUPTI activity records of a launch-count pass into per-iteration counters. Pure host
// code with no CUPTI types, so unit tests feed it synthetic records; cupti_activity.cpp converts
// the real CUpti_ActivityKernel10/Memcpy6/Memset4 records into ActivityRecord.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fusebench/counters.hpp"

namespace fusebench::measure {

enum class ActivityKind { kernel, memcpy, memset };

// The fields of an activity record this suite reads (the common leading fields of every
// record version); graph_id != 0 means the operation ran as a node of a CUDA graph.
struct ActivityRecord {
  ActivityKind kind = ActivityKind::kernel;
  std::string name;  // kernels only (mangled or not; demangled on the way in)
  std::uint32_t correlation_id = 0;
  std::uint32_t graph_id = 0;
  std::uint32_t stream_id = 0;
  std::uint64_t bytes = 0;  // memcpy/memset only
  // Operations the record stands for: a batched memcpy record covers copyCount copies.
  std::uint64_t count = 1;
};

// Counter names this pass produces.
inline constexpr const char* kLaunchCounters[] = {"launches", "kernels", "memcpys", "memsets"};

class ActivityAggregator {
 public:
  void add(const ActivityRecord& record);
  // CUPTI dropped `count` records (buffer full): the counts would be too low, so they become
  // unavailable rather than wrong.
  void add_dropped(std::size_t count);
  // The pass itself failed (enable, flush, ...): every launch counter is unavailable with `why`.
  void fail(std::string why);
  void reset();

  std::size_t kernels() const { return kernels_; }
  std::size_t graph_kernels() const { return graph_kernels_; }
  std::size_t memcpys() const { return memcpys_; }
  std::size_t memsets() const { return memsets_; }
  std::size_t dropped() const { return dropped_; }
  const std::vector<std::string>& kernel_names() const { return names_; }

  // Counters per iteration when the region ran `iterations` times: launches = kernels + memcpys +
  // memsets (every operation the region put on the device, graph nodes included). Throws
  // std::invalid_argument when iterations < 1.
  RegionCounters per_iteration(int iterations) const;

 private:
  std::size_t kernels_ = 0, graph_kernels_ = 0, memcpys_ = 0, memsets_ = 0, dropped_ = 0;
  std::vector<std::string> names_;  // distinct, in first-seen order
  std::string failure_;
};

// Marks every counter of `names` unavailable with `why` (helper for passes that cannot run).
RegionCounters all_unavailable(const std::vector<std::string>& names, const std::string& why);

// Demangles a C++ symbol (Itanium ABI); returns the input when it is not a mangled name.
std::string demangle(const std::string& name);

}  // namespace fusebench::measure
