#pragma once
// The Range Profiler's configuration, built through the CUPTI profiler host API. The host API
// needs no GPU (the chip is named), so tests build and check the configuration offline for any
// supported chip. Compiled only when FUSEBENCH_HAVE_CUPTI.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fusebench::measure {

// A counter of the DRAM pass and the metric names that may provide it, in order of preference:
// chips differ (GA100/GH100/GB100 have dram__bytes_read.sum, GB202-class chips
// dram__bytes_op_read.sum), so each name is validated with the host API and the first the chip
// knows is used.
struct MetricChoice {
  std::string counter;  // our counter name, e.g. "dram_read_bytes"
  std::vector<std::string> candidates;
};
const std::vector<MetricChoice>& dram_pass_metrics();

struct RangeProfilerConfig {
  std::string chip;
  std::map<std::string, std::string> metric_of;  // counter -> chosen metric name
  std::vector<std::string> counters;             // counters in configuration order
  std::vector<std::string> metrics;              // metric names, same order
  std::vector<std::uint8_t> image;               // config image for cuptiRangeProfilerSetConfig
  std::size_t passes = 0;                        // replay passes the metrics need
};

// Owns a CUPTI profiler host object for one chip. Throws CuptiFailure (cupti_common.hpp) when the
// host API refuses, e.g. CUPTI_ERROR_INVALID_CHIP_NAME.
class ProfilerHost {
 public:
  // `availability` is the device's counter availability image; empty when building offline.
  ProfilerHost(const std::string& chip, const std::vector<std::uint8_t>& availability);
  ~ProfilerHost();
  ProfilerHost(const ProfilerHost&) = delete;
  ProfilerHost& operator=(const ProfilerHost&) = delete;

  const std::string& chip() const;
  bool has_metric(const std::string& metric) const;
  // Chooses a metric for each counter of dram_pass_metrics() and builds the config image.
  // Throws CuptiFailure naming the counter when no candidate is known to this chip.
  RangeProfilerConfig configure() const;
  // Values of `metrics` for range `range_index` of a decoded counter data image.
  std::vector<double> evaluate(const std::vector<std::uint8_t>& counter_data,
                               std::size_t range_index,
                               const std::vector<std::string>& metrics) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Chips the host API of this CUPTI accepts by name.
std::vector<std::string> profiler_supported_chips();

}  // namespace fusebench::measure
