#include <cuda_runtime_api.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "delay.hpp"
#include "spin_clock.hpp"

namespace fusebench::comm {
namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ unsigned long long g_backstop_stops = 0;

// One thread: the globaltimer's tick edges calibrate clock64, which prices the partial ticks at
// either end (spin_clock.hpp says why: a 1 us tick made 10 us delays up to 10% short), and
// clock64 alone ends a spin whose timer stalls.
__global__ void spin_kernel(unsigned long long ns, unsigned long long backstop, SpinTrace* trace) {
  const auto c0 = static_cast<unsigned long long>(clock64());
  const unsigned long long t0 = global_ns();
  SpinClock clock(t0, c0);
  const auto want = static_cast<double>(ns);
  for (;;) {
    const auto c = static_cast<unsigned long long>(clock64());
    if (clock.elapsed_ns(global_ns(), c) >= want) break;
    if (c - c0 >= backstop) {
      atomicAdd(&g_backstop_stops, 1ull);
      break;
    }
  }
  if (trace != nullptr) {
    trace->timer_end = global_ns();
    trace->cycles_end = static_cast<unsigned long long>(clock64());
    trace->timer_start = t0;
    trace->cycles_start = c0;
  }
}

// The global timer's step: the increments of its first kTickSamples changes, 0 where it did not
// change within kTickBackstopCycles.
constexpr int kTickSamples = 16;
constexpr unsigned long long kTickBackstopCycles = 200000000ull;  // 0.1 s at 2 GHz
__global__ void timer_steps_kernel(unsigned long long* steps) {
  const auto c0 = static_cast<unsigned long long>(clock64());
  unsigned long long prev = global_ns();
  for (int i = 0; i < kTickSamples; ++i) {
    unsigned long long t = prev;
    while (t == prev) {
      t = global_ns();
      if (static_cast<unsigned long long>(clock64()) - c0 > kTickBackstopCycles) {
        steps[i] = 0;
        return;
      }
    }
    steps[i] = t - prev;
    prev = t;
  }
}

// The current device's highest SM clock in kHz, read once per device and thread (the delay is
// enqueued inside timed regions); 3 GHz, above any GPU's, where it cannot be read.
double max_clock_khz() {
  constexpr double kUnknown = 3e6;
  thread_local int cached_device = -1;
  thread_local double cached_khz = kUnknown;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return kUnknown;
  }
  if (device != cached_device) {
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) != cudaSuccess || khz <= 0) {
      (void)cudaGetLastError();
      khz = 0;
    }
    cached_device = device;
    cached_khz = khz > 0 ? khz : kUnknown;
  }
  return cached_khz;
}

}  // namespace

void enqueue_gpu_delay_traced(void* stream, double seconds, SpinTrace* trace) {
  if (seconds <= 0 && trace == nullptr) return;
  (void)cudaGetLastError();  // an earlier, handled error must not be blamed on this launch
  const double s = seconds > 0 ? seconds : 0;
  spin_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<unsigned long long>(s * 1e9), backstop_cycles(s, max_clock_khz()), trace);
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) {
    throw std::runtime_error(std::string("modelled collective delay kernel: ") +
                             cudaGetErrorString(err));
  }
}

void enqueue_gpu_delay(void* stream, double seconds) {
  enqueue_gpu_delay_traced(stream, seconds, nullptr);
}

unsigned long long gpu_delay_backstop_stops() {
  unsigned long long n = 0;
  if (cudaMemcpyFromSymbol(&n, g_backstop_stops, sizeof(n)) != cudaSuccess) {
    (void)cudaGetLastError();
    throw std::runtime_error("modelled collective delay kernel: cannot read its backstop count");
  }
  return n;
}

}  // namespace fusebench::comm

namespace fusebench::comm {

double gpu_globaltimer_step_ns() {
  unsigned long long* steps = nullptr;
  unsigned long long host[kTickSamples] = {};
  const auto fail = [&](const char* what, cudaError_t err) {
    cudaFree(steps);
    throw std::runtime_error(std::string("global timer step: ") + what + ": " +
                             cudaGetErrorString(err));
  };
  if (const cudaError_t err = cudaMalloc(&steps, sizeof(host)); err != cudaSuccess)
    fail("cudaMalloc", err);
  if (const cudaError_t err = cudaMemset(steps, 0, sizeof(host)); err != cudaSuccess)
    fail("cudaMemset", err);
  timer_steps_kernel<<<1, 1>>>(steps);
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) fail("launch", err);
  if (const cudaError_t err = cudaMemcpy(host, steps, sizeof(host), cudaMemcpyDeviceToHost);
      err != cudaSuccess)
    fail("cudaMemcpy", err);
  cudaFree(steps);
  // The median step: one late read does not move it.
  std::sort(host, host + kTickSamples);
  return static_cast<double>(host[kTickSamples / 2]);
}

}  // namespace fusebench::comm
