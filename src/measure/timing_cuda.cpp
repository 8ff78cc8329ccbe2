// CUDA implementation of DeviceTiming, on the backend's own stream.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "backends/cuda_check.hpp"
#include "measure/timing_device.hpp"
#include "measure/timing_kernels.hpp"

namespace fusebench::measure {
namespace {

constexpr std::uint64_t kClockWindowNs = 10000;  // 10 us: ~1% resolution at a 1 us timer tick

class CudaGraphReplay final : public GraphReplay {
 public:
  CudaGraphReplay(cudaGraphExec_t exec, cudaStream_t stream) : exec_(exec), stream_(stream) {}
  ~CudaGraphReplay() override { cudaGraphExecDestroy(exec_); }
  void launch() override { FUSEBENCH_CUDA(cudaGraphLaunch(exec_, stream_)); }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
};

class CudaTiming final : public DeviceTiming {
 public:
  explicit CudaTiming(cudaStream_t stream) : stream_(stream) {
    // Host-mapped so the host releases the blocking kernel and reads results without a copy.
    FUSEBENCH_CUDA(
        cudaHostAlloc(reinterpret_cast<void**>(&host_), sizeof(Shared), cudaHostAllocMapped));
    *host_ = Shared{};
    FUSEBENCH_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev_), host_, 0));
    int device = 0, khz = 0;
    FUSEBENCH_CUDA(cudaGetDevice(&device));
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) == cudaSuccess)
      default_mhz_ = khz / 1000.0;
  }
  ~CudaTiming() override {
    cudaStreamSynchronize(stream_);
    cudaFreeHost(host_);
  }

  void block(double timeout_s) override {
    host_->release = 0;
    host_->timed_out = 0;
    FUSEBENCH_CUDA(cuda::launch_blocking_kernel(
        &dev_->release, &dev_->timed_out, static_cast<std::uint64_t>(timeout_s * 1e9), stream_));
  }
  void release() override { reinterpret_cast<volatile int&>(host_->release) = 1; }
  bool block_timed_out() override { return reinterpret_cast<volatile int&>(host_->timed_out) != 0; }

  void probe_clock() override {
    if (timer_stuck_) return;  // each probe would spin ~2 s for nothing
    host_->clock[0] = host_->clock[1] = 0;
    FUSEBENCH_CUDA(cuda::launch_clock_probe(dev_->clock, kClockWindowNs, stream_));
  }
  double probed_clock_mhz() override {
    const volatile unsigned long long* c = host_->clock;
    if (c[1] == 0) {
      if (c[0] != 0) timer_stuck_ = true;  // cycles spun, no tick of %globaltimer
      return -1;
    }
    return static_cast<double>(c[0]) / static_cast<double>(c[1]) * 1e3;  // cycles/ns -> MHz
  }
  double probed_window_ns() override {
    const volatile unsigned long long* c = host_->clock;
    return c[1] == 0 ? -1 : static_cast<double>(c[1]);
  }
  double default_clock_mhz() const override { return default_mhz_; }

  std::unique_ptr<GraphReplay> capture(const std::function<void()>& region) override {
    cudaGraph_t graph{};
    FUSEBENCH_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      region();
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    FUSEBENCH_CUDA(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec{};
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    FUSEBENCH_CUDA(err);
    FUSEBENCH_CUDA(cudaGraphUpload(exec, stream_));
    return std::make_unique<CudaGraphReplay>(exec, stream_);
  }

  double copy_bandwidth(std::size_t bytes, int reps) override {
    void *a = nullptr, *b = nullptr;
    FUSEBENCH_CUDA(cudaMalloc(&a, bytes));
    const cudaError_t err = cudaMalloc(&b, bytes);
    if (err != cudaSuccess) {
      cudaFree(a);
      FUSEBENCH_CUDA(err);
    }
    cudaEvent_t e0{}, e1{};
    double best = 0;
    try {
      FUSEBENCH_CUDA(cudaEventCreate(&e0));
      FUSEBENCH_CUDA(cudaEventCreate(&e1));
      FUSEBENCH_CUDA(cudaMemsetAsync(a, 1, bytes, stream_));
      FUSEBENCH_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream_));  // warm-up
      for (int i = 0; i < reps; ++i) {
        FUSEBENCH_CUDA(cudaEventRecord(e0, stream_));
        FUSEBENCH_CUDA(cudaMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, bytes,
                                       cudaMemcpyDeviceToDevice, stream_));
        FUSEBENCH_CUDA(cudaEventRecord(e1, stream_));
        FUSEBENCH_CUDA(cudaEventSynchronize(e1));
        float ms = 0;
        FUSEBENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        if (ms > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / (ms * 1e-3));
      }
    } catch (...) {
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      cudaFree(a);
      cudaFree(b);
      throw;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return best;
  }

 private:
  struct Shared {
    int release = 0;
    int timed_out = 0;
    unsigned long long clock[2] = {0, 0};
  };
  cudaStream_t stream_;
  Shared* host_ = nullptr;
  Shared* dev_ = nullptr;
  double default_mhz_ = 0;
  bool timer_stuck_ = false;  // a probe saw %globaltimer not advance: no more probes
};

}  // namespace

std::unique_ptr<DeviceTiming> make_device_timing(Backend& backend, std::string* why) {
  if (backend.name() != "cuda" || backend.stream() == nullptr) {
    if (why) *why = "the " + backend.name() + " backend has no GPU stream";
    return nullptr;
  }
  try {
    return std::make_unique<CudaTiming>(static_cast<cudaStream_t>(backend.stream()));
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return nullptr;
  }
}

}  // namespace fusebench::measure
