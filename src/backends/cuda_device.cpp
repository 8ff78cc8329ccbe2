// Finding a CUDA device for the backend (cuda_backend.cpp builds it): how many there are, and why
// none is usable, in words.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "fusebench/backend.hpp"
#include "fusebench/local_device.hpp"

namespace fusebench {

int cuda_device_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

namespace {

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// Why cudaGetDeviceCount found no GPU, in words. Without any driver the runtime says "CUDA driver
// version is insufficient for CUDA runtime version", as it does for a driver that is only too
// old: cudaDriverGetVersion tells the two apart (0 when no driver is installed).
std::string no_gpu_reason(cudaError_t err) {
  if (err == cudaErrorInsufficientDriver) {
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    if (driver == 0)
      return "no NVIDIA driver found (libcuda.so.1, the driver's library, could not be loaded)";
    return "the NVIDIA driver supports CUDA up to " + cuda_version_text(driver) +
           ", older than this build's CUDA runtime " + cuda_version_text(runtime) +
           ": update the driver";
  }
  if (err == cudaErrorNoDevice || err == cudaSuccess) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return std::string("the NVIDIA driver is installed but sees no GPU") +
           (visible != nullptr ? " (CUDA_VISIBLE_DEVICES=" + std::string(visible) + ")" : "");
  }
  return std::string("CUDA unusable (cudaGetDeviceCount: ") + cudaGetErrorName(err) + ", " +
         cudaGetErrorString(err) + ")";
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (why) *why = no_gpu_reason(err);
    return nullptr;
  }
  // Under mpirun/srun the launcher's local rank chose the device (local_device.hpp).
  return make_cuda_backend_on(pinned_cuda_device(), why);
}

}  // namespace fusebench
