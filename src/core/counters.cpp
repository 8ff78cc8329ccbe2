#include "fusebench/counters.hpp"

#include <algorithm>

namespace fusebench {

void RegionCounters::merge(const RegionCounters& other) {
  for (const auto& [k, v] : other.values) {
    values[k] = v;
    unavailable.erase(k);
  }
  for (const auto& [k, why] : other.unavailable) {
    if (!values.count(k)) unavailable[k] = why;
  }
  for (const auto& name : other.kernel_names) {
    if (std::find(kernel_names.begin(), kernel_names.end(), name) == kernel_names.end()) {
      kernel_names.push_back(name);
    }
  }
}

}  // namespace fusebench
