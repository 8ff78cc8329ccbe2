// DRAM and L2 bytes of one run of the region with the CUPTI Range Profiler: user range (our
// push/pop around the region) and user replay (we rerun the region once per pass), which also
// works for regions containing collectives, unlike kernel replay. L2 is flushed before every
// pass so the bytes compare with the cost model's minimal bytes.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <cmath>

#include "fusebench/nvtx.hpp"
#include "measure/cupti_common.hpp"
#include "measure/cupti_passes.hpp"
#include "measure/range_profiler_config.hpp"

namespace fusebench::measure {
namespace {

void cuda_check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(e));
}

// The current driver context, without linking libcuda (the binary must start on machines
// without a driver): the runtime hands out the driver entry point.
CUcontext current_context() {
  using CtxGetCurrent = CUresult (*)(CUcontext*);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  cuda_check(
      cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &found),
      "cudaGetDriverEntryPointByVersion(cuCtxGetCurrent)");
  if (fn == nullptr || found != cudaDriverEntryPointSuccess) {
    throw std::runtime_error("cuCtxGetCurrent not found in the driver");
  }
  CUcontext ctx = nullptr;
  if (reinterpret_cast<CtxGetCurrent>(fn)(&ctx) != CUDA_SUCCESS || ctx == nullptr) {
    throw std::runtime_error("no current CUDA context");
  }
  return ctx;
}

class RangeProfilerPass final : public CounterCollector {
 public:
  RangeProfilerPass(Backend& backend, CUcontext ctx, std::unique_ptr<ProfilerHost> host,
                    RangeProfilerConfig config)
      : backend_(backend), ctx_(ctx), host_(std::move(host)), config_(std::move(config)) {}
  ~RangeProfilerPass() override {
    host_.reset();  // the host object before the profiler it was made under
    CUpti_Profiler_DeInitialize_Params p{CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
    cuptiProfilerDeInitialize(&p);
  }
  std::string name() const override { return "dram"; }

  RegionCounters collect(const std::string& region_name,
                         const std::function<void()>& region) override {
    NvtxRange range(region_name + "/dram");
    try {
      return measure(region_name, region, false);
    } catch (const std::exception& e) {
      // The timed pass already succeeded: a failed counter pass costs the counters, not the entry.
      RegionCounters c;
      for (const auto& counter : config_.counters)
        c.unavailable[counter] = std::string("dram pass failed: ") + e.what();
      return c;
    }
  }

  // One profiled run of `region`; throws CuptiFailure when CUPTI refuses. A probe skips the L2
  // flush (its region is small GPU work of its own).
  RegionCounters measure(const std::string& range_name, const std::function<void()>& region,
                         bool probe) {
    std::vector<std::uint8_t> data;  // SetConfig keeps a pointer: it must outlive the session
    Session session(ctx_);
    std::vector<const char*> names;
    for (const auto& m : config_.metrics) names.push_back(m.c_str());

    CUpti_RangeProfiler_GetCounterDataSize_Params size{
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    size.pRangeProfilerObject = session.object;
    size.pMetricNames = names.data();
    size.numMetrics = names.size();
    size.maxNumOfRanges = 1;
    size.maxNumRangeTreeNodes = 1;
    cupti_check(cuptiRangeProfilerGetCounterDataSize(&size),
                "cuptiRangeProfilerGetCounterDataSize");
    data.resize(size.counterDataSize);
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params init{
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    init.pRangeProfilerObject = session.object;
    init.counterDataSize = data.size();
    init.pCounterData = data.data();
    cupti_check(cuptiRangeProfilerCounterDataImageInitialize(&init),
                "cuptiRangeProfilerCounterDataImageInitialize");

    CUpti_RangeProfiler_SetConfig_Params set{CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    set.pRangeProfilerObject = session.object;
    set.configSize = config_.image.size();
    set.pConfig = config_.image.data();
    set.counterDataImageSize = data.size();
    set.pCounterDataImage = data.data();
    set.range = CUPTI_UserRange;
    set.replayMode = CUPTI_UserReplay;
    set.maxRangesPerPass = 1;
    set.numNestingLevels = 1;
    set.minNestingLevel = 1;
    set.passIndex = 0;
    set.targetNestingLevel = 1;
    cupti_check(cuptiRangeProfilerSetConfig(&set), "cuptiRangeProfilerSetConfig");

    const std::size_t max_passes = config_.passes + 1;
    bool all_submitted = false;
    for (std::size_t pass = 0; pass < max_passes && !all_submitted; ++pass) {
      if (!probe) backend_.flush_l2();
      cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // flush outside the range
      PassGuard guard{session.object};
      CUpti_RangeProfiler_Start_Params start{CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
      start.pRangeProfilerObject = session.object;
      cupti_check(cuptiRangeProfilerStart(&start), "cuptiRangeProfilerStart");
      guard.started = true;
      CUpti_RangeProfiler_PushRange_Params push{CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
      push.pRangeProfilerObject = session.object;
      push.pRangeName = range_name.c_str();
      cupti_check(cuptiRangeProfilerPushRange(&push), "cuptiRangeProfilerPushRange");
      guard.pushed = true;
      // The region runs on the backend's non-blocking stream: the range is the context's, so
      // the device is idle at both ends (the range's gpu__time_duration includes the tails).
      cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      region();
      cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      CUpti_RangeProfiler_PopRange_Params pop{CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
      pop.pRangeProfilerObject = session.object;
      guard.pushed = false;
      cupti_check(cuptiRangeProfilerPopRange(&pop), "cuptiRangeProfilerPopRange");
      CUpti_RangeProfiler_Stop_Params stop{CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
      stop.pRangeProfilerObject = session.object;
      guard.started = false;
      cupti_check(cuptiRangeProfilerStop(&stop), "cuptiRangeProfilerStop");
      all_submitted = stop.isAllPassSubmitted != 0;
    }
    if (!all_submitted) {
      throw CuptiFailure(CUPTI_ERROR_UNKNOWN, "range profiler wanted more than " +
                                                  std::to_string(max_passes) + " passes");
    }

    CUpti_RangeProfiler_DecodeData_Params decode{CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
    decode.pRangeProfilerObject = session.object;
    cupti_check(cuptiRangeProfilerDecodeData(&decode), "cuptiRangeProfilerDecodeData");
    if (decode.numOfRangeDropped > 0) {
      throw CuptiFailure(
          CUPTI_ERROR_UNKNOWN,
          "range profiler dropped " + std::to_string(decode.numOfRangeDropped) + " range(s)");
    }
    CUpti_RangeProfiler_GetCounterDataInfo_Params info{
        CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
    info.pCounterDataImage = data.data();
    info.counterDataImageSize = data.size();
    cupti_check(cuptiRangeProfilerGetCounterDataInfo(&info),
                "cuptiRangeProfilerGetCounterDataInfo");
    if (info.numTotalRanges != 1) {
      throw CuptiFailure(
          CUPTI_ERROR_UNKNOWN,
          "range profiler returned " + std::to_string(info.numTotalRanges) + " ranges, expected 1");
    }
    const std::vector<double> values = host_->evaluate(data, 0, config_.metrics);
    RegionCounters c;
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (!std::isfinite(values[i])) {
        throw CuptiFailure(CUPTI_ERROR_UNKNOWN,
                           config_.metrics[i] + " evaluated to " + std::to_string(values[i]));
      }
      c.values[config_.counters[i]] = values[i];
    }
    return c;
  }

 private:
  // Closes a pass that an exception left open, so Disable never meets an open range.
  struct PassGuard {
    CUpti_RangeProfiler_Object* object;
    bool started = false, pushed = false;
    ~PassGuard() {
      if (pushed) {
        CUpti_RangeProfiler_PopRange_Params p{CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
        p.pRangeProfilerObject = object;
        cuptiRangeProfilerPopRange(&p);
      }
      if (started) {
        CUpti_RangeProfiler_Stop_Params p{CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
        p.pRangeProfilerObject = object;
        cuptiRangeProfilerStop(&p);
      }
    }
  };

  // Range profiling enabled on the context for one measurement only, so no timed pass ever
  // runs with it on.
  struct Session {
    explicit Session(CUcontext ctx) {
      CUpti_RangeProfiler_Enable_Params p{CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
      p.ctx = ctx;
      cupti_check(cuptiRangeProfilerEnable(&p), "cuptiRangeProfilerEnable");
      object = p.pRangeProfilerObject;
    }
    ~Session() {
      CUpti_RangeProfiler_Disable_Params p{CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
      p.pRangeProfilerObject = object;
      cuptiRangeProfilerDisable(&p);
    }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    CUpti_RangeProfiler_Object* object = nullptr;
  };

  Backend& backend_;
  CUcontext ctx_;
  std::unique_ptr<ProfilerHost> host_;
  RangeProfilerConfig config_;
};

}  // namespace

std::unique_ptr<CounterCollector> make_range_profiler_pass(Backend& backend, nlohmann::json* setup,
                                                           std::string* why) {
  bool initialized = false;
  try {
    int device = 0;
    cuda_check(cudaGetDevice(&device), "cudaGetDevice");
    cuda_check(cudaFree(nullptr), "cudaFree(nullptr)");  // make the primary context current
    const CUcontext ctx = current_context();

    CUpti_Profiler_Initialize_Params init{CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    cupti_check(cuptiProfilerInitialize(&init), "cuptiProfilerInitialize");
    initialized = true;

    CUpti_Device_GetChipName_Params chip{CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    chip.deviceIndex = static_cast<std::size_t>(device);
    cupti_check(cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName");
    const std::string chip_name = chip.pChipName != nullptr ? chip.pChipName : "";
    (*setup)["chip"] = chip_name;

    CUpti_Profiler_GetCounterAvailability_Params avail{
        CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
    avail.ctx = ctx;
    cupti_check(cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability");
    std::vector<std::uint8_t> availability(avail.counterAvailabilityImageSize);
    avail.pCounterAvailabilityImage = availability.data();
    cupti_check(cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability");

    auto host = std::make_unique<ProfilerHost>(chip_name, availability);
    RangeProfilerConfig config = host->configure();
    (*setup)["metrics"] = config.metric_of;
    (*setup)["passes"] = config.passes;
    (*setup)["mode"] =
        "user range, user replay, one range = one run of the region, L2 flushed before";

    initialized = false;  // the pass owns cuptiProfilerDeInitialize from here
    auto pass =
        std::make_unique<RangeProfilerPass>(backend, ctx, std::move(host), std::move(config));
    // A full dry run (enable, profile, decode, evaluate) over a small piece of GPU work, the L2
    // flush itself: privilege, "another profiler" and evaluation errors show up here, once,
    // instead of in every fixture.
    backend.flush_l2();  // its first call allocates: keep that out of the profiled passes
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    pass->measure(
        "fusebench-probe", [&backend] { backend.flush_l2(); }, true);
    return pass;
  } catch (const std::exception& e) {
    *why = e.what();
    if (initialized) {
      CUpti_Profiler_DeInitialize_Params p{CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
      cuptiProfilerDeInitialize(&p);
    }
    return nullptr;
  }
}

}  // namespace fusebench::measure
