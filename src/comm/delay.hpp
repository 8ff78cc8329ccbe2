#pragma once
// Stand-in for a modelled collective on the GPU: one kernel that spins for the modelled time (one
// launch, like the NCCL kernel it replaces), timed by the global timer with clock64 pricing the
// partial ticks and stopping a spin whose timer stalls (spin_clock.hpp).
namespace fusebench::comm {
void enqueue_gpu_delay(void* stream, double seconds);
// What one spin saw, for tests: the global timer and the SM's clock64 at its start and its end.
struct SpinTrace {
  unsigned long long timer_start, timer_end, cycles_start, cycles_end;
};
// enqueue_gpu_delay whose spin writes its SpinTrace to `trace` (device memory; null: none).
void enqueue_gpu_delay_traced(void* stream, double seconds, SpinTrace* trace);
// How many spins the clock64 backstop ended (this process, the current device): non-zero means
// the global timer stalled and those delays are not the modelled time.
unsigned long long gpu_delay_backstop_stops();
// The current device's global timer step in ns (the median of its first changes), 0 where it did
// not advance: what the spin's tick-edge calibration works with.
double gpu_globaltimer_step_ns();
}  // namespace fusebench::comm
