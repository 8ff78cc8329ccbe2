#include "comm/local_gpu.hpp"

#include "fusebench/local_device.hpp"

namespace fusebench {

void pin_local_gpu() { pin_local_cuda_device(); }

}  // namespace fusebench
