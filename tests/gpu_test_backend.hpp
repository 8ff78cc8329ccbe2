#pragma once
// The backend a GPU test runs on: the cuda backend where a GPU is found, else null (the test
// skips). With FUSEBENCH_GPU_TESTS_ON_CPU=1 the host's share of the heaviest GPU tests (GpuQuant,
// GpuMoe: random weights, their quantization, the float64 references) runs on the CPU backend
// instead, so `scripts/device_plan.py --time-references` can time the same cases without a GPU
// and size the device check's caps from them (the CPU's GEMMs stand in for the device's: an
// upper bound of the host's share). Nothing else reads it.
#include <cstdlib>
#include <memory>
#include <string>

#include "fusebench/backend.hpp"

namespace fusebench::testing {

inline bool gpu_tests_on_cpu() {
  const char* v = std::getenv("FUSEBENCH_GPU_TESTS_ON_CPU");
  return v != nullptr && std::string(v) == "1";
}

inline std::unique_ptr<Backend> gpu_test_backend(std::string* why) {
  if (gpu_tests_on_cpu()) return make_cpu_backend();
  return make_cuda_backend(why);
}

}  // namespace fusebench::testing
