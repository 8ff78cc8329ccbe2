// Builds without CUDA: no device timing (only the eager regime runs).
#include "measure/timing_device.hpp"

namespace fusebench::measure {

std::unique_ptr<DeviceTiming> make_device_timing(Backend&, std::string* why) {
  if (why) *why = "fusebench was built without CUDA";
  return nullptr;
}

}  // namespace fusebench::measure
