#include "measure/cupti_common.hpp"

namespace fusebench::measure {

std::string cupti_reason(CUptiResult result, const std::string& call) {
  const char* name = nullptr;
  if (cuptiGetResultString(result, &name) != CUPTI_SUCCESS || name == nullptr)
    name = "CUPTI_ERROR_?";
  const std::string what = call + " returned " + name;
  switch (result) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return "insufficient privileges: " + what +
             " (GPU performance counters are restricted to admin users, "
             "NVreg_RestrictProfilingToAdminUsers=1; run as root or lift the restriction)";
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return "another profiler attached: " + what +
             " (Nsight Systems/Compute or another CUPTI client owns this process; run with "
             "--launch-counts=off --dram-counters=off under a profiler)";
    case CUPTI_ERROR_INVALID_CHIP_NAME:
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_INVALID_METRIC_NAME:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
      return "unsupported chip or device: " + what;
    case CUPTI_ERROR_INVALID_DEVICE:
      return "no device: " + what;
    case CUPTI_ERROR_UNKNOWN:
      // What CUPTI 13.0 returns from cuptiActivityEnable/cuptiProfilerInitialize with no driver.
      return "CUPTI error (no usable device or driver?): " + what;
    default:
      return "CUPTI error: " + what;
  }
}

std::string cupti_version() {
  uint32_t version = 0;
  return cuptiGetVersion(&version) == CUPTI_SUCCESS ? std::to_string(version) : "unknown";
}

}  // namespace fusebench::measure
