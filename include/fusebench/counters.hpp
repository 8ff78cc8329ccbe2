#pragma once
// Measured counters of a region (launches, DRAM bytes, ...), each either a value or unavailable
// with the reason; never 0 for "unknown".
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fusebench {

struct RegionCounters {
  std::map<std::string, double> values;            // per iteration of the region
  std::map<std::string, std::string> unavailable;  // counter name -> why it could not be read
  std::vector<std::string> kernel_names;           // distinct names of what ran, when known

  void merge(const RegionCounters& other);
};

// One measurement pass (launch counting, range profiling, ...). Passes run separately from
// timing and from each other, over the same region and inputs.
class CounterCollector {
 public:
  virtual ~CounterCollector() = default;
  virtual std::string name() const = 0;
  // Runs `region` as often as this pass needs and returns per-iteration counters.
  virtual RegionCounters collect(const std::string& region_name,
                                 const std::function<void()>& region) = 0;
};

}  // namespace fusebench
