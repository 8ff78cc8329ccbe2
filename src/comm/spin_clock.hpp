#pragma once
// How the modelled-collective spin kernel (delay_kernel.cu) tells elapsed time, kept here so the
// CPU can test the arithmetic (tests/test_comm_host.cpp) on a simulated coarse timer.
//
// %globaltimer reads in nanoseconds but may advance in coarse ticks (1 us on some GPUs and
// drivers). Spinning until `globaltimer - start >= ns` then ends anywhere from ns - tick to ns
// after the true start, because the start is read at a random phase inside a tick: a 10 us
// modelled latency came out 9 to 10 us (up to 10% short). clock64 counts the SM's cycles finely,
// at a rate that is not known in advance and can change with the clocks. So the spin measures
// that rate between the tick edges it sees (the cycle count at the first and the latest change of
// the timer), and prices in cycles only the fractions of a tick before the first edge and after
// the latest one: the estimate's error is then a loop iteration plus whatever the clock rate
// drifted within the spin, not a tick. Until two edges have been seen there is no rate, and the
// timer alone decides (error up to one tick, for delays under two ticks).
//
// clock64 is also the backstop: a timer that never advances (or a spin on a stalled timer) would
// spin forever; the kernel stops after backstop_cycles() cycles whatever the timer says.
#include <cstdint>

#if defined(__CUDACC__)
#define FUSEBENCH_HOST_DEVICE __host__ __device__
#else
#define FUSEBENCH_HOST_DEVICE
#endif

namespace fusebench::comm {

class SpinClock {
 public:
  FUSEBENCH_HOST_DEVICE SpinClock(std::uint64_t timer_ns, std::uint64_t cycles)
      : t0_(timer_ns), c0_(cycles), last_t_(timer_ns) {}

  // Nanoseconds since construction, given a fresh (globaltimer, clock64) pair.
  FUSEBENCH_HOST_DEVICE double elapsed_ns(std::uint64_t timer_ns, std::uint64_t cycles) {
    if (timer_ns != last_t_) {  // a tick edge, seen at `cycles`
      if (edges_ == 0) {
        first_t_ = timer_ns;
        first_c_ = cycles;
      }
      ++edges_;
      last_t_ = timer_ns;
      last_c_ = cycles;
    }
    if (edges_ < 2) return static_cast<double>(timer_ns - t0_);
    const double cycles_per_ns =
        static_cast<double>(last_c_ - first_c_) / static_cast<double>(last_t_ - first_t_);
    if (!(cycles_per_ns > 0)) return static_cast<double>(timer_ns - t0_);
    return static_cast<double>(first_c_ - c0_) / cycles_per_ns +
           static_cast<double>(last_t_ - first_t_) +
           static_cast<double>(cycles - last_c_) / cycles_per_ns;
  }

 private:
  std::uint64_t t0_, c0_;
  std::uint64_t first_t_ = 0, first_c_ = 0, last_t_, last_c_ = 0;
  unsigned edges_ = 0;
};

// Cycles after which the spin stops whatever the timer says: kBackstopFactor times the delay at
// the SM's highest clock (cudaDevAttrClockRate, kHz), and at least kMinBackstopCycles. At a lower
// clock the backstop takes longer in time, never less: it bounds a stalled timer's spin, it does
// not time anything. The kernel counts its backstop stops (gpu_delay_backstop_stops()).
inline constexpr double kBackstopFactor = 4;
inline constexpr std::uint64_t kMinBackstopCycles = 100000;
FUSEBENCH_HOST_DEVICE inline std::uint64_t backstop_cycles(double seconds, double max_clock_khz) {
  const double cycles = seconds * max_clock_khz * 1e3 * kBackstopFactor;
  if (!(cycles > static_cast<double>(kMinBackstopCycles))) return kMinBackstopCycles;
  if (cycles > 1.8e19) return UINT64_MAX;
  return static_cast<std::uint64_t>(cycles);
}

}  // namespace fusebench::comm
