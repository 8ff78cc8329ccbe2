#include "timing_kernels.hpp"

namespace fusebench::measure::cuda {
namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The spin loops' backstop when %globaltimer does not advance: clock64() counts the SM's cycles,
// at most ~4 per ns (no GPU clocks above 4 GHz), so it never ends a loop first while the timer
// works, and a stuck timer can never hang the stream.
constexpr long long kMaxCyclesPerNs = 4;
constexpr long long kProbeMaxCycles = 1ll << 32;  // ~2 s at 2 GHz: only a stuck timer gets there

__global__ void blocking_kernel(const volatile int* release, int* timed_out,
                                unsigned long long timeout_ns) {
  const unsigned long long start = global_ns();
  const long long c0 = clock64();
  const long long max_cycles = kMaxCyclesPerNs * static_cast<long long>(timeout_ns);
  while (*release == 0) {
    if (global_ns() - start > timeout_ns || clock64() - c0 > max_cycles) {
      *timed_out = 1;
      break;
    }
  }
}

__global__ void clock_probe(unsigned long long* out, unsigned long long window_ns) {
  // Align to a tick edge of globaltimer (its update period may be ~1 us).
  const long long start = clock64();
  const unsigned long long first = global_ns();
  unsigned long long t0 = first;
  while (t0 == first && clock64() - start < kProbeMaxCycles) t0 = global_ns();
  if (t0 == first) {  // the timer never ticked: {cycles spun, 0}, read as "no clock"
    out[0] = static_cast<unsigned long long>(clock64() - start);
    out[1] = 0;
    return;
  }
  const long long c0 = clock64();
  unsigned long long t1 = t0;
  while (t1 - t0 < window_ns && clock64() - c0 < kProbeMaxCycles) t1 = global_ns();
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
