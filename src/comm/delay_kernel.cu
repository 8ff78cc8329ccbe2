#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#include "delay.hpp"

namespace fusebench::comm {
namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(unsigned long long ns) {
  const unsigned long long start = global_ns();
  while (global_ns() - start < ns) {
  }
}

}  // namespace

void enqueue_gpu_delay(void* stream, double seconds) {
  if (seconds <= 0) return;
  (void)cudaGetLastError();  // an earlier, handled error must not be blamed on this launch
  spin_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<unsigned long long>(seconds * 1e9));
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) {
    throw std::runtime_error(std::string("modelled collective delay kernel: ") +
                             cudaGetErrorString(err));
  }
}

}  // namespace fusebench::comm
