#pragma once
// Host entry points of the timing kernels (timing_kernels.cu).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace fusebench::measure::cuda {

// Spins until *release != 0 (a host-mapped flag) or timeout_ns of globaltimer passed (or, should
// the timer not advance, 4 x timeout_ns SM cycles); in the latter cases sets *timed_out = 1.
cudaError_t launch_blocking_kernel(const volatile int* release, int* timed_out,
                                   std::uint64_t timeout_ns, cudaStream_t stream);
// Writes {clock64 delta, globaltimer delta in ns} measured by one thread over >= window_ns,
// starting at a globaltimer tick edge so the timer's granularity does not bias the ratio. A
// timer that does not tick within 2^32 cycles gives {cycles, 0}: no clock, and no hang.
cudaError_t launch_clock_probe(unsigned long long* out2, std::uint64_t window_ns,
                               cudaStream_t stream);

}  // namespace fusebench::measure::cuda
