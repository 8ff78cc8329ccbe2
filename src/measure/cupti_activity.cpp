// Launch counting with the CUPTI Activity API: the records of what the GPU executed are the
// truth (API callbacks miss cuLaunchKernelEx and CUDA 13's __cudaLaunchKernel paths, and graph
// launches). CONCURRENT_KERNEL, not KERNEL (which serialises kernels); GRAPH_TRACE stays off
// because it replaces the per-node kernel records with one record per graph launch.
#include <cuda_runtime.h>
#include <cupti.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "fusebench/nvtx.hpp"
#include "measure/activity_aggregator.hpp"
#include "measure/cupti_common.hpp"
#include "measure/cupti_passes.hpp"

namespace fusebench::measure {
namespace {

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
constexpr std::size_t kBufferBytes = 8u << 20;

// CUPTI's buffer callbacks are plain functions, so the pass in progress lives here.
struct ActivityState {
  std::mutex mutex;
  ActivityAggregator aggregator;
  bool recording = false;
  // Activity records are process-wide: a single-process TP run also records the kernels of the
  // other ranks' GPUs (threads of this process). Only the pass's own device counts, as with one
  // process per GPU; -1 counts every device.
  int device = -1;
  // Set by the buffer request callback, which takes no lock (CUPTI may hold its own there).
  std::atomic<bool> buffer_refused{false};
};
ActivityState& state() {
  // Never destroyed: CUPTI may deliver a buffer from its own exit handler, after statics die.
  static ActivityState& s = *new ActivityState;
  return s;
}

std::optional<ActivityRecord> convert(const CUpti_Activity* record, int device) {
  ActivityRecord r;
  const auto other_device = [device](std::uint32_t id) {
    return device >= 0 && id != static_cast<std::uint32_t>(device);
  };
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if (other_device(k->deviceId)) return std::nullopt;
      r.kind = ActivityKind::kernel;
      r.name = demangle(k->name != nullptr ? k->name : "<unnamed kernel>");
      r.correlation_id = k->correlationId;
      r.graph_id = k->graphId;
      r.stream_id = k->streamId;
      return r;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      if (other_device(m->deviceId)) return std::nullopt;
      r.kind = ActivityKind::memcpy;
      r.bytes = m->bytes;
      r.count = m->copyCount != 0 ? m->copyCount : 1;  // batched copies: one record, N copies
      r.correlation_id = m->correlationId;
      r.graph_id = m->graphId;
      r.stream_id = m->streamId;
      return r;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      if (other_device(m->deviceId)) return std::nullopt;
      r.kind = ActivityKind::memset;
      r.bytes = m->bytes;
      r.correlation_id = m->correlationId;
      r.graph_id = m->graphId;
      r.stream_id = m->streamId;
      return r;
    }
    default:
      return std::nullopt;
  }
}

std::string parse_records(std::uint8_t* buffer, std::size_t valid_bytes, ActivityAggregator& out,
                          int device) {
  CUpti_Activity* record = nullptr;
  for (;;) {
    const CUptiResult r = cuptiActivityGetNextRecord(buffer, valid_bytes, &record);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) return {};
    if (r != CUPTI_SUCCESS) return cupti_reason(r, "cuptiActivityGetNextRecord");
    if (const auto converted = convert(record, device)) out.add(*converted);
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // A null buffer makes CUPTI drop records; the pass counts the refusal as a drop, since no
  // completed buffer will report it.
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
  if (*buffer == nullptr) state().buffer_refused = true;
}

// Drops are read once, at the end of the pass, from the global queue's count (which keeps
// accumulating until read), not here: no CUPTI call under our lock.
void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  ActivityState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (buffer != nullptr && s.recording) {
    if (std::string why = parse_records(buffer, valid, s.aggregator, s.device); !why.empty()) {
      s.aggregator.fail(why);
    }
  }
  std::free(buffer);
}

// Registers the buffer callbacks once per process; returns the failure reason or "".
std::string register_callbacks() {
  static const std::string why = [] {
    const CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    return r == CUPTI_SUCCESS ? std::string() : cupti_reason(r, "cuptiActivityRegisterCallbacks");
  }();
  return why;
}

void disable_all() {
  for (const auto kind : kKinds) cuptiActivityDisable(kind);
}

void device_synchronize() {
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string("cudaDeviceSynchronize: ") + cudaGetErrorString(e));
  }
}

class ActivityLaunchCounter final : public CounterCollector {
 public:
  explicit ActivityLaunchCounter(int iterations) : iterations_(iterations) {}
  std::string name() const override { return "launch-count"; }

  RegionCounters collect(const std::string& region_name,
                         const std::function<void()>& region) override {
    NvtxRange range(region_name + "/launch-count");
    ActivityState& s = state();
    device_synchronize();  // nothing issued before the pass may land in it
    int device = -1;
    if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
      throw std::runtime_error(std::string("cudaGetDevice: ") + cudaGetErrorString(e));
    }
    std::size_t stale = 0;  // reading the drop count resets it: drops before the pass don't count
    cuptiActivityGetNumDroppedRecords(nullptr, 0, &stale);
    s.buffer_refused = false;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.device = device;
      s.aggregator.reset();
      s.recording = true;
    }
    // Tracing is on only inside this scope; the guard turns it off even when region() throws.
    struct Stop {
      ~Stop() {
        disable_all();
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        std::lock_guard<std::mutex> lock(state().mutex);
        state().recording = false;
      }
    };
    std::string failure;
    {
      Stop stop;
      for (const auto kind : kKinds) {
        if (const CUptiResult r = cuptiActivityEnable(kind); r != CUPTI_SUCCESS) {
          failure = cupti_reason(r, "cuptiActivityEnable");
          break;
        }
      }
      if (failure.empty()) {
        for (int i = 0; i < iterations_; ++i) region();
        device_synchronize();
        // Flushing here reports a failed flush; Stop flushes again after disabling the kinds.
        if (const CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
            r != CUPTI_SUCCESS) {
          failure = cupti_reason(r, "cuptiActivityFlushAll");
        }
      }
    }
    // Every record dropped during the pass (the count was reset before it).
    std::size_t dropped = 0;
    const bool dropped_known =
        cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS;
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!failure.empty()) s.aggregator.fail(failure);
    if (dropped_known && dropped > 0) s.aggregator.add_dropped(dropped);
    if (s.buffer_refused)
      s.aggregator.fail("no memory for a CUPTI activity buffer: records were dropped");
    return s.aggregator.per_iteration(iterations_);
  }

 private:
  int iterations_;
};

}  // namespace

std::string parse_activity_buffer(std::uint8_t* buffer, std::size_t valid_bytes,
                                  ActivityAggregator& out) {
  return parse_records(buffer, valid_bytes, out, -1);
}

std::unique_ptr<CounterCollector> make_activity_launch_counter(Backend&, int iterations,
                                                               std::string* why) {
  if (std::string reason = register_callbacks(); !reason.empty()) {
    *why = reason;
    return nullptr;
  }
  for (const auto kind : kKinds) {
    if (const CUptiResult r = cuptiActivityEnable(kind); r != CUPTI_SUCCESS) {
      *why = cupti_reason(r, "cuptiActivityEnable");
      disable_all();
      return nullptr;
    }
  }
  disable_all();
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  return std::make_unique<ActivityLaunchCounter>(iterations < 1 ? 1 : iterations);
}

}  // namespace fusebench::measure
