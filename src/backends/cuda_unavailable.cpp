// Linked instead of the CUDA backend when the build has no CUDA toolkit.
#include "fusebench/backend.hpp"

namespace fusebench {

bool cuda_backend_built() { return false; }

std::unique_ptr<Backend> make_cuda_backend_on(int, std::string* why) {
  if (why) *why = "this build has no CUDA backend (no CUDA toolkit at configure time)";
  return nullptr;
}

int cuda_device_count() { return 0; }

std::unique_ptr<Backend> make_cuda_backend(std::string* why) {
  if (why) *why = "this build has no CUDA backend (no CUDA toolkit at configure time)";
  return nullptr;
}

}  // namespace fusebench
