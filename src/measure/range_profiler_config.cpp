#include "measure/range_profiler_config.hpp"

#include <cupti_profiler_host.h>

#include "measure/cupti_common.hpp"

namespace fusebench::measure {

const std::vector<MetricChoice>& dram_pass_metrics() {
  static const std::vector<MetricChoice> metrics = {
      {"dram_read_bytes", {"dram__bytes_read.sum", "dram__bytes_op_read.sum"}},
      {"dram_write_bytes", {"dram__bytes_write.sum", "dram__bytes_op_write.sum"}},
      {"l2_bytes", {"lts__t_bytes.sum"}},
      {"profiled_gpu_time_ns", {"gpu__time_duration.sum"}},
  };
  return metrics;
}

struct ProfilerHost::Impl {
  std::string chip;
  std::vector<std::uint8_t> availability;  // must outlive the host object
  CUpti_Profiler_Host_Object* host = nullptr;
};

ProfilerHost::ProfilerHost(const std::string& chip, const std::vector<std::uint8_t>& availability)
    : impl_(std::make_unique<Impl>()) {
  impl_->chip = chip;
  impl_->availability = availability;
  CUpti_Profiler_Host_Initialize_Params p{CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
  p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  p.pChipName = impl_->chip.c_str();
  p.pCounterAvailabilityImage = impl_->availability.empty() ? nullptr : impl_->availability.data();
  cupti_check(cuptiProfilerHostInitialize(&p),
              ("cuptiProfilerHostInitialize(" + chip + ")").c_str());
  impl_->host = p.pHostObject;
}

ProfilerHost::~ProfilerHost() {
  if (impl_ && impl_->host) {
    CUpti_Profiler_Host_Deinitialize_Params p{CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    p.pHostObject = impl_->host;
    cuptiProfilerHostDeinitialize(&p);
  }
}

const std::string& ProfilerHost::chip() const { return impl_->chip; }

bool ProfilerHost::has_metric(const std::string& metric) const {
  CUpti_Profiler_Host_GetMetricProperties_Params p{
      CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE};
  p.pHostObject = impl_->host;
  p.pMetricName = metric.c_str();
  return cuptiProfilerHostGetMetricProperties(&p) == CUPTI_SUCCESS;
}

RangeProfilerConfig ProfilerHost::configure() const {
  RangeProfilerConfig config;
  config.chip = impl_->chip;
  for (const auto& choice : dram_pass_metrics()) {
    std::string chosen;
    for (const auto& candidate : choice.candidates) {
      if (has_metric(candidate)) {
        chosen = candidate;
        break;
      }
    }
    if (chosen.empty()) {
      std::string tried;
      for (const auto& c : choice.candidates) tried += (tried.empty() ? "" : ", ") + c;
      throw CuptiFailure(
          CUPTI_ERROR_INVALID_METRIC_NAME,
          "unsupported chip: " + impl_->chip + " has none of " + tried + " for " + choice.counter);
    }
    config.metric_of[choice.counter] = chosen;
    config.counters.push_back(choice.counter);
    config.metrics.push_back(chosen);
  }

  std::vector<const char*> names;
  for (const auto& m : config.metrics) names.push_back(m.c_str());
  CUpti_Profiler_Host_ConfigAddMetrics_Params add{
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  add.pHostObject = impl_->host;
  add.ppMetricNames = names.data();
  add.numMetrics = names.size();
  cupti_check(cuptiProfilerHostConfigAddMetrics(&add), "cuptiProfilerHostConfigAddMetrics");

  CUpti_Profiler_Host_GetConfigImageSize_Params size{
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
  size.pHostObject = impl_->host;
  cupti_check(cuptiProfilerHostGetConfigImageSize(&size), "cuptiProfilerHostGetConfigImageSize");
  config.image.resize(size.configImageSize);

  CUpti_Profiler_Host_GetConfigImage_Params image{
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
  image.pHostObject = impl_->host;
  image.configImageSize = config.image.size();
  image.pConfigImage = config.image.data();
  cupti_check(cuptiProfilerHostGetConfigImage(&image), "cuptiProfilerHostGetConfigImage");

  CUpti_Profiler_Host_GetNumOfPasses_Params passes{
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
  passes.configImageSize = config.image.size();
  passes.pConfigImage = config.image.data();
  cupti_check(cuptiProfilerHostGetNumOfPasses(&passes), "cuptiProfilerHostGetNumOfPasses");
  config.passes = passes.numOfPasses;
  return config;
}

std::vector<double> ProfilerHost::evaluate(const std::vector<std::uint8_t>& counter_data,
                                           std::size_t range_index,
                                           const std::vector<std::string>& metrics) const {
  std::vector<const char*> names;
  for (const auto& m : metrics) names.push_back(m.c_str());
  std::vector<double> values(metrics.size(), 0.0);
  CUpti_Profiler_Host_EvaluateToGpuValues_Params p{
      CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
  p.pHostObject = impl_->host;
  p.pCounterDataImage = counter_data.data();
  p.counterDataImageSize = counter_data.size();
  p.rangeIndex = range_index;
  p.ppMetricNames = names.data();
  p.numMetrics = names.size();
  p.pMetricValues = values.data();
  cupti_check(cuptiProfilerHostEvaluateToGpuValues(&p), "cuptiProfilerHostEvaluateToGpuValues");
  return values;
}

std::vector<std::string> profiler_supported_chips() {
  CUpti_Profiler_Host_GetSupportedChips_Params p{
      CUpti_Profiler_Host_GetSupportedChips_Params_STRUCT_SIZE};
  cupti_check(cuptiProfilerHostGetSupportedChips(&p), "cuptiProfilerHostGetSupportedChips");
  return std::vector<std::string>(p.ppChipNames, p.ppChipNames + p.numChips);
}

}  // namespace fusebench::measure
