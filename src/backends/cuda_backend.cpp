// CUDA backend: cuBLASLt GEMMs (fp32 accumulate) and our SiLU-and-mul kernel on one stream.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <map>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "cuda_check.hpp"
#include "cuda_kernels.hpp"
#include "fusebench/backend.hpp"

namespace fusebench {
namespace {

constexpr std::size_t kWorkspaceBytes = 32u << 20;  // cuBLASLt workspace, as PyTorch uses on sm90

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

class EventTimer final : public RegionTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream) {
    FUSEBENCH_CUDA(cudaEventCreate(&begin_));
    FUSEBENCH_CUDA(cudaEventCreate(&end_));
  }
  ~EventTimer() override {
    cudaEventDestroy(begin_);
    cudaEventDestroy(end_);
  }
  void start() override { FUSEBENCH_CUDA(cudaEventRecord(begin_, stream_)); }
  void stop() override { FUSEBENCH_CUDA(cudaEventRecord(end_, stream_)); }
  double seconds() override {
    FUSEBENCH_CUDA(cudaEventSynchronize(end_));
    float ms = 0;
    FUSEBENCH_CUDA(cudaEventElapsedTime(&ms, begin_, end_));
    return ms * 1e-3;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t begin_{}, end_{};
};

// One cuBLASLt matmul configuration per distinct shape, built once and reused.
struct LtPlan {
  cublasLtMatmulDesc_t desc{};
  cublasLtMatrixLayout_t a{}, b{}, c{};
  cublasLtMatmulAlgo_t algo{};
  std::string algo_text;
};

std::string describe_algo(const cublasLtMatmulAlgo_t& algo) {
  const auto attr = [&](cublasLtMatmulAlgoConfigAttributes_t which) {
    std::int32_t v = 0;
    std::size_t written = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&algo, which, &v, sizeof(v), &written);
    return v;
  };
  std::ostringstream out;
  out << "algo=" << attr(CUBLASLT_ALGO_CONFIG_ID) << " tile=" << attr(CUBLASLT_ALGO_CONFIG_TILE_ID)
      << " stages=" << attr(CUBLASLT_ALGO_CONFIG_STAGES_ID)
      << " splitk=" << attr(CUBLASLT_ALGO_CONFIG_SPLITK_NUM)
      << " cluster=" << attr(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
  return out.str();
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {
    FUSEBENCH_CUDA(cudaSetDevice(device_));
    FUSEBENCH_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    FUSEBENCH_CUBLAS(cublasLtCreate(&lt_));
    FUSEBENCH_CUDA(cudaMalloc(&workspace_, kWorkspaceBytes));
  }
  ~CudaBackend() override {
    for (auto& [key, p] : plans_) {
      cublasLtMatrixLayoutDestroy(p.a);
      cublasLtMatrixLayoutDestroy(p.b);
      cublasLtMatrixLayoutDestroy(p.c);
      cublasLtMatmulDescDestroy(p.desc);
    }
    cudaFree(workspace_);
    cudaFree(flush_buffer_);
    cublasLtDestroy(lt_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }
  std::string unsupported_reason(DType) const override { return {}; }

  void* allocate(std::size_t bytes) override {
    std::size_t free_bytes = 0, total = 0;
    FUSEBENCH_CUDA(cudaMemGetInfo(&free_bytes, &total));
    if (bytes > free_bytes) {
      throw OutOfMemory("device allocation of " + std::to_string(bytes >> 20) + " MiB does not fit: " +
                        std::to_string(free_bytes >> 20) + " MiB free of " +
                        std::to_string(total >> 20) + " MiB; use fewer tokens or a smaller model");
    }
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      throw OutOfMemory("cudaMalloc(" + std::to_string(bytes) + " bytes) failed: " + cudaGetErrorString(err));
    }
    return p;
  }
  void release(void* ptr) noexcept override { cudaFree(ptr); }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    FUSEBENCH_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    FUSEBENCH_CUDA(cudaStreamSynchronize(stream_));
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    FUSEBENCH_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    FUSEBENCH_CUDA(cudaStreamSynchronize(stream_));
  }

  void gemm(const GemmArgs& g) override {
    const LtPlan& p = plan_for(g);
    const float alpha = 1.0f, beta = 0.0f;
    // Row-major y = x w^T is column-major y^T = w x^T: A = w (transposed), B = x.
    FUSEBENCH_CUBLAS(cublasLtMatmul(lt_, p.desc, &alpha, g.w.data, p.a, g.x.data, p.b, &beta,
                                    g.y.data, p.c, g.y.data, p.c, &p.algo, workspace_,
                                    kWorkspaceBytes, stream_));
    algorithm_log_.push_back(p.algo_text);
  }

  void silu_mul(const MatRef& gate, const MatRef& up, const MatRef& out) override {
    FUSEBENCH_CUDA(cuda::launch_silu_mul(gate.data, gate.ld, up.data, up.ld, out.data, out.ld,
                                         out.rows, out.cols, out.dtype, stream_));
  }

  void synchronize() override { FUSEBENCH_CUDA(cudaStreamSynchronize(stream_)); }
  void flush_l2() override {
    if (flush_buffer_ == nullptr) {
      int l2 = 0;
      FUSEBENCH_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device_));
      flush_bytes_ = 2 * static_cast<std::size_t>(l2);  // twice L2: no line of the region survives
      FUSEBENCH_CUDA(cudaMalloc(&flush_buffer_, flush_bytes_));
    }
    FUSEBENCH_CUDA(cudaMemsetAsync(flush_buffer_, flush_value_++ & 0xff, flush_bytes_, stream_));
  }
  std::unique_ptr<RegionTimer> make_timer() override { return std::make_unique<EventTimer>(stream_); }
  std::vector<std::string> take_algorithm_log() override { return std::exchange(algorithm_log_, {}); }
  void* stream() const override { return stream_; }

  nlohmann::json context() const override {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, device_);
    const auto attr = [&](cudaDeviceAttr a) {
      int v = 0;
      cudaDeviceGetAttribute(&v, a, device_);
      return v;
    };
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    return {{"backend", "cuda"},
            {"gpu_name", prop.name},
            {"gpu_compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
            {"gpu_sm_count", prop.multiProcessorCount},
            {"gpu_memory_bytes", prop.totalGlobalMem},
            {"gpu_l2_bytes", attr(cudaDevAttrL2CacheSize)},
            {"gpu_sm_clock_khz", attr(cudaDevAttrClockRate)},
            {"gpu_memory_clock_khz", attr(cudaDevAttrMemoryClockRate)},
            {"gpu_memory_bus_bits", attr(cudaDevAttrGlobalMemoryBusWidth)},
            {"cuda_driver_version", driver},
            {"cuda_runtime_version", runtime},
            {"cublaslt_version", cublasLtGetVersion()}};
  }

 private:
  const LtPlan& plan_for(const GemmArgs& g) {
    const auto key = std::make_tuple(g.y.rows, g.y.cols, g.x.cols, g.x.ld, g.w.ld, g.y.ld,
                                     static_cast<int>(g.x.dtype));
    if (auto it = plans_.find(key); it != plans_.end()) return it->second;
    const std::uint64_t m = static_cast<std::uint64_t>(g.y.rows), n = static_cast<std::uint64_t>(g.y.cols),
                        k = static_cast<std::uint64_t>(g.x.cols);
    const cudaDataType_t type = cuda_type(g.x.dtype);
    LtPlan p;
    FUSEBENCH_CUBLAS(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
    FUSEBENCH_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
    FUSEBENCH_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans)));
    FUSEBENCH_CUBLAS(cublasLtMatrixLayoutCreate(&p.a, type, k, n, static_cast<std::int64_t>(g.w.ld)));
    FUSEBENCH_CUBLAS(cublasLtMatrixLayoutCreate(&p.b, type, k, m, static_cast<std::int64_t>(g.x.ld)));
    FUSEBENCH_CUBLAS(cublasLtMatrixLayoutCreate(&p.c, type, n, m, static_cast<std::int64_t>(g.y.ld)));
    cublasLtMatmulPreference_t pref{};
    FUSEBENCH_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    const std::size_t ws = kWorkspaceBytes;
    FUSEBENCH_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || returned == 0) {
      throw std::runtime_error("cuBLASLt has no algorithm for m=" + std::to_string(m) + " n=" +
                               std::to_string(n) + " k=" + std::to_string(k));
    }
    p.algo = result.algo;
    p.algo_text = describe_algo(p.algo);
    return plans_.emplace(key, p).first->second;
  }

  int device_;
  cudaStream_t stream_{};
  cublasLtHandle_t lt_{};
  void* workspace_ = nullptr;
  void* flush_buffer_ = nullptr;
  std::size_t flush_bytes_ = 0;
  int flush_value_ = 0;
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, int>, LtPlan> plans_;
  std::vector<std::string> algorithm_log_;
};

}  // namespace

bool cuda_backend_built() { return true; }

// One backend per GPU for the ranks of a single-process multi-GPU run (docs/tp.md).
std::unique_ptr<Backend> make_cuda_backend_on(int device, std::string* why) {
  int count = 0;
  if (const cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess || device < 0 || device >= count) {
    if (why) *why = "CUDA device " + std::to_string(device) + " is not available (" + std::to_string(count) + " visible)";
    return nullptr;
  }
  try {
    return std::make_unique<CudaBackend>(device);
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return nullptr;
  }
}

int cuda_device_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

std::unique_ptr<Backend> make_cuda_backend(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
    return nullptr;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device";
    return nullptr;
  }
  try {
    return std::make_unique<CudaBackend>(0);
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return nullptr;
  }
}

}  // namespace fusebench
