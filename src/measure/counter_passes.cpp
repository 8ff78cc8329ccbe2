#include "fusebench/counter_passes.hpp"

#include <cmath>

#include "fusebench/nvtx.hpp"
#include "measure/activity_aggregator.hpp"
#include "measure/cpu_call_counter.hpp"

#ifdef FUSEBENCH_HAVE_CUPTI
#include "measure/cupti_common.hpp"
#include "measure/cupti_passes.hpp"
#endif

namespace fusebench {
namespace {

#ifndef FUSEBENCH_HAVE_CUPTI
// Why this build has no CUPTI passes (cmake/CudaFeatures.cmake, cmake/Dependencies.cmake).
#ifdef FUSEBENCH_CUPTI_BELOW_FLOOR
constexpr const char* kBuiltWithoutCupti =
    "built without CUPTI: the CUDA toolkit is older than 12.6 (the Range Profiler API)";
#else
constexpr const char* kBuiltWithoutCupti =
    "built without CUPTI (cupti_range_profiler.h or nvperf_host not found)";
#endif
#endif

const std::vector<std::string> kLaunchPassCounters = {"launches", "kernels", "memcpys", "memsets"};
const std::vector<std::string> kDramPassCounters = {"dram_read_bytes", "dram_write_bytes",
                                                    "l2_bytes", "profiled_gpu_time_ns"};

void mark(nlohmann::json& status, const std::vector<std::string>& counters,
          const std::string& why) {
  for (const auto& c : counters) status[c] = why.empty() ? "available" : "unavailable: " + why;
}

}  // namespace

CounterPasses make_counter_passes(Backend& backend, const CounterPassOptions& o) {
  CounterPasses passes;
  const bool cpu = backend.name() == "cpu";
#ifdef FUSEBENCH_HAVE_CUPTI
  passes.setup["cupti_api_version"] = measure::cupti_version();
#else
  passes.setup["cupti_api_version"] = "unavailable: built without CUPTI";
#endif
  passes.setup["nvtx"] = nvtx_built() ? "domain fusebench: <fixture>, <group>/timed, "
                                        "<group>/timed/block<N>, <fixture>/launch-count, "
                                        "<fixture>/graph/launch-count, <fixture>/dram"
                                      : "not built (no CUDA nvtx3 headers)";
  passes.setup["order"] =
      "timed pass first (no tracing or profiling on), then launch-count, then dram; each a "
      "separate run of the same region and inputs";

  // Launch counting.
  std::string launch_why;
  if (!o.launch_counts) {
    launch_why = "off (--launch-counts=off)";
  } else if (cpu) {
    passes.collectors.push_back(measure::make_cpu_call_counter(backend));
    passes.setup["launch_count"] =
        "CPU backend: launches = backend library calls + collective calls per iteration";
  } else {
#ifdef FUSEBENCH_HAVE_CUPTI
    if (auto c = measure::make_activity_launch_counter(backend, o.launch_count_iterations,
                                                       &launch_why)) {
      passes.collectors.push_back(std::move(c));
      passes.setup["launch_count"] = {{"api", "CUPTI Activity: CONCURRENT_KERNEL, MEMCPY, MEMSET"},
                                      {"iterations", o.launch_count_iterations}};
    }
#else
    launch_why = kBuiltWithoutCupti;
#endif
  }
  if (cpu && o.launch_counts) {
    mark(passes.status, {"launches"}, "");
    mark(passes.status, {"kernels", "memcpys", "memsets"},
         "CPU backend: no kernels, memcpys or memsets");
  } else {
    mark(passes.status, kLaunchPassCounters, launch_why);
  }
  if (!launch_why.empty()) {
    passes.collectors.push_back(
        measure::make_unavailable_pass("launch-count", kLaunchPassCounters, launch_why));
  }

  // DRAM bytes.
  std::string dram_why;
  if (!o.dram_counters) {
    dram_why = "off (--dram-counters=off)";
  } else if (cpu) {
    dram_why = "no device: the CPU backend has no DRAM counters" +
               (o.backend_reason.empty() ? std::string() : " (" + o.backend_reason + ")");
  } else {
#ifdef FUSEBENCH_HAVE_CUPTI
    nlohmann::json setup;
    if (auto c = measure::make_range_profiler_pass(backend, &setup, &dram_why)) {
      passes.collectors.push_back(std::move(c));
    }
    passes.setup["dram"] = setup;
#else
    dram_why = kBuiltWithoutCupti;
#endif
  }
  mark(passes.status, kDramPassCounters, dram_why);
  if (!dram_why.empty()) {
    passes.collectors.push_back(
        measure::make_unavailable_pass("dram", kDramPassCounters, dram_why));
  }

  passes.status["launches_vs_model"] = passes.status["launches"];
  passes.status["graph_launches"] =
      cpu ? nlohmann::json("unavailable: CPU backend: no CUDA graphs") : passes.status["launches"];
  passes.status["bytes_vs_model"] = passes.status["dram_read_bytes"];
  return passes;
}

nlohmann::json measured_counter_definitions() {
  return {
      {"launches",
       "GPU: kernels + memcpys + memsets the region executed per iteration (CUPTI "
       "activity records of eager runs; nodes of any CUDA graph the region launches count "
       "too; timing:graph replays a capture of the same region); CPU: backend library calls "
       "and collective calls per iteration"},
      {"graph_launches",
       "timing:graph entries: kernels + memcpys + memsets one replay of the captured CUDA graph "
       "executed (CUPTI records of its nodes); compare with launches, counted from eager runs"},
      {"kernels", "kernel executions per iteration (CUPTI CONCURRENT_KERNEL records)"},
      {"memcpys", "memcpy operations per iteration (CUPTI MEMCPY records)"},
      {"memsets", "memset operations per iteration (CUPTI MEMSET records)"},
      {"dram_read_bytes", "DRAM bytes read by one iteration, L2 flushed before (Range Profiler)"},
      {"dram_write_bytes",
       "DRAM bytes written by one iteration, L2 flushed before (Range Profiler)"},
      {"l2_bytes", "bytes requested from L2 by one iteration (lts__t_bytes.sum)"},
      {"profiled_gpu_time_ns",
       "gpu__time_duration.sum of the profiled range (under profiling; "
       "not the timing figure)"},
      {"launches_vs_model", "launches / model_launches"},
      {"bytes_vs_model", "(dram_read_bytes + dram_write_bytes) / model_bytes"}};
}

void add_model_ratios(RegionCounters& c, double model_launches, double model_bytes) {
  const auto is_zero = [&c](const char* key) {
    const auto it = c.values.find(key);
    return it != c.values.end() && it->second == 0;
  };
  const auto saw_nothing = [&c](const std::vector<std::string>& counters, const std::string& why) {
    for (const auto& counter : counters) {
      if (c.values.erase(counter) > 0) c.unavailable[counter] = why;
    }
  };
  // Only for CUPTI counts (they come with `kernels`): a record stream can miss a region, while
  // the CPU's launches are calls counted in our own code, whatever they come to.
  if (model_launches > 0 && is_zero("launches") && c.values.count("kernels") > 0) {
    saw_nothing(kLaunchPassCounters,
                "the launch-count pass saw no operation of a region that "
                "issues " +
                    std::to_string(std::llround(model_launches)) +
                    " (records not delivered: another CUPTI client?)");
  }
  if (model_bytes > 0 && is_zero("dram_read_bytes") && is_zero("l2_bytes")) {
    saw_nothing(kDramPassCounters, "the dram pass saw no traffic of a region that moves at least " +
                                       std::to_string(std::llround(model_bytes)) +
                                       " bytes (the profiled range caught no work)");
  }
  const auto value = [&c](const char* key) -> const double* {
    const auto it = c.values.find(key);
    return it == c.values.end() ? nullptr : &it->second;
  };
  if (const double* launches = value("launches"); launches && model_launches > 0) {
    c.values["launches_vs_model"] = *launches / model_launches;
  } else if (const auto it = c.unavailable.find("launches"); it != c.unavailable.end()) {
    c.unavailable["launches_vs_model"] = it->second;
  }
  const double* read = value("dram_read_bytes");
  const double* write = value("dram_write_bytes");
  if (read && write && model_bytes > 0) {
    c.values["bytes_vs_model"] = (*read + *write) / model_bytes;
  } else if (const auto it = c.unavailable.find("dram_read_bytes"); it != c.unavailable.end()) {
    c.unavailable["bytes_vs_model"] = it->second;
  }
}
}  // namespace fusebench
