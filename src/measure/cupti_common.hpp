#pragma once
// Shared helpers of the CUPTI passes (compiled only when FUSEBENCH_HAVE_CUPTI).
#include <cupti.h>

#include <stdexcept>
#include <string>

namespace fusebench::measure {

// A CUPTI call failed; what() is a reason fit for the report ("insufficient privileges: ...").
class CuptiFailure : public std::runtime_error {
 public:
  CuptiFailure(CUptiResult code, const std::string& reason)
      : std::runtime_error(reason), code_(code) {}
  CUptiResult code() const { return code_; }

 private:
  CUptiResult code_;
};

// "<class of failure>: <call> returned <CUPTI_ERROR_...>" where the class is one a reader can
// act on: no device, insufficient privileges, another profiler attached, unsupported chip.
std::string cupti_reason(CUptiResult result, const std::string& call);

// Throws CuptiFailure unless `result` is CUPTI_SUCCESS.
inline void cupti_check(CUptiResult result, const char* call) {
  if (result != CUPTI_SUCCESS) throw CuptiFailure(result, cupti_reason(result, call));
}

// The CUPTI API version the library reports, e.g. "130001", or "unknown".
std::string cupti_version();

}  // namespace fusebench::measure
