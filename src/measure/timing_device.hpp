#pragma once
// What the GPU timing regimes need from a device beyond the Backend interface: a kernel that
// holds the stream while launches queue (batch), an SM clock probe (throttling), CUDA graph
// capture and replay (graph), and a device copy (bandwidth ceiling). Host-only header: the CUDA
// implementation lives in timing_cuda.cpp and timing_kernels.cu; builds without CUDA get none.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "fusebench/backend.hpp"

namespace fusebench::measure {

// A captured region, replayed with one launch.
class GraphReplay {
 public:
  virtual ~GraphReplay() = default;
  virtual void launch() = 0;
};

class DeviceTiming {
 public:
  virtual ~DeviceTiming() = default;
  // Enqueues a kernel that spins until release() (or `timeout_s`), so the launches enqueued
  // after it queue up and then run back to back with no host gap.
  virtual void block(double timeout_s) = 0;
  virtual void release() = 0;
  // After the stream synchronised: whether the last block() gave up before release().
  virtual bool block_timed_out() = 0;
  // Enqueues a probe that measures the SM clock over ~10 us of globaltimer on one SM.
  virtual void probe_clock() = 0;
  // After the stream synchronised: the last probe's clock in MHz, < 0 when unreadable.
  virtual double probed_clock_mhz() = 0;
  // After the stream synchronised: the globaltimer window the last probe measured over, ns (one
  // tick when the timer ticks coarser than the 10 us asked for); < 0 when unknown.
  virtual double probed_window_ns() { return -1; }
  // The clock the throttling rule compares against (cudaDevAttrClockRate), MHz; <= 0 unknown.
  virtual double default_clock_mhz() const = 0;
  // Captures `region` (stream capture on the backend's stream) into an instantiated graph.
  virtual std::unique_ptr<GraphReplay> capture(const std::function<void()>& region) = 0;
  // Device-to-device copy bandwidth, (read + written bytes) / time, best of `reps`; B/s.
  virtual double copy_bandwidth(std::size_t bytes, int reps) = 0;
};

// Calls `enqueue` between block() and release(): what it enqueues runs back to back once
// released, host launch cost hidden. Released on exceptions too, so a failed enqueue never
// leaves the stream held until the timeout.
template <class F>
void enqueue_held(DeviceTiming& device, double timeout_s, F&& enqueue) {
  device.block(timeout_s);
  try {
    enqueue();
  } catch (...) {
    device.release();
    throw;
  }
  device.release();
}

// nullptr with `why` set when the backend is not the CUDA one or CUDA is not built.
std::unique_ptr<DeviceTiming> make_device_timing(Backend& backend, std::string* why);

}  // namespace fusebench::measure
