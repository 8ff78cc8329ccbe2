#include "measure/activity_aggregator.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <stdexcept>

namespace fusebench::measure {

void ActivityAggregator::add(const ActivityRecord& r) {
  switch (r.kind) {
    case ActivityKind::kernel:
      ++kernels_;
      if (r.graph_id != 0) ++graph_kernels_;
      if (std::find(names_.begin(), names_.end(), r.name) == names_.end()) names_.push_back(r.name);
      break;
    case ActivityKind::memcpy:
      memcpys_ += r.count;
      break;
    case ActivityKind::memset:
      ++memsets_;
      break;
  }
}

void ActivityAggregator::add_dropped(std::size_t count) { dropped_ += count; }

void ActivityAggregator::fail(std::string why) {
  if (failure_.empty()) failure_ = std::move(why);
}

void ActivityAggregator::reset() { *this = ActivityAggregator{}; }

RegionCounters ActivityAggregator::per_iteration(int iterations) const {
  if (iterations < 1) throw std::invalid_argument("launch counting needs at least one iteration");
  const std::vector<std::string> names(std::begin(kLaunchCounters), std::end(kLaunchCounters));
  if (!failure_.empty()) return all_unavailable(names, failure_);
  if (dropped_ > 0) {
    return all_unavailable(names, "CUPTI dropped " + std::to_string(dropped_) +
                                      " activity record(s) (buffer full): counts would be too low");
  }
  RegionCounters c;
  const double n = iterations;
  c.values["kernels"] = static_cast<double>(kernels_) / n;
  c.values["memcpys"] = static_cast<double>(memcpys_) / n;
  c.values["memsets"] = static_cast<double>(memsets_) / n;
  c.values["launches"] = static_cast<double>(kernels_ + memcpys_ + memsets_) / n;
  c.kernel_names = names_;
  return c;
}

RegionCounters all_unavailable(const std::vector<std::string>& names, const std::string& why) {
  RegionCounters c;
  for (const auto& name : names) c.unavailable[name] = why;
  return c;
}

std::string demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : name;
}

}  // namespace fusebench::measure
