#include "timing_kernels.hpp"

namespace fusebench::measure::cuda {
namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void blocking_kernel(const volatile int* release, int* timed_out,
                                unsigned long long timeout_ns) {
  const unsigned long long start = global_ns();
  while (*release == 0) {
    if (global_ns() - start > timeout_ns) {
      *timed_out = 1;
      break;
    }
  }
}

__global__ void clock_probe(unsigned long long* out, unsigned long long window_ns) {
  // Align to a tick edge of globaltimer (its update period may be ~1 us).
  const unsigned long long first = global_ns();
  unsigned long long t0 = first;
  while (t0 == first) t0 = global_ns();
  const long long c0 = clock64();
  unsigned long long t1 = t0;
  while (t1 - t0 < window_ns) t1 = global_ns();
  const long long c1 = clock64();
  out[0] = static_cast<unsigned long long>(c1 - c0);
  out[1] = t1 - t0;
}

}  // namespace

cudaError_t launch_blocking_kernel(const volatile int* release, int* timed_out,
                                   std::uint64_t timeout_ns, cudaStream_t stream) {
  (void)cudaGetLastError();  // an earlier, handled error must not be blamed on this launch
  blocking_kernel<<<1, 1, 0, stream>>>(release, timed_out, timeout_ns);
  return cudaGetLastError();
}

cudaError_t launch_clock_probe(unsigned long long* out2, std::uint64_t window_ns,
                               cudaStream_t stream) {
  (void)cudaGetLastError();  // an earlier, handled error must not be blamed on this launch
  clock_probe<<<1, 1, 0, stream>>>(out2, window_ns);
  return cudaGetLastError();
}

}  // namespace fusebench::measure::cuda
