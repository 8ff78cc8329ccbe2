// CUDA backend: cuBLASLt GEMMs (fp32 accumulate, bias through the epilogue) and our activation
// and bias-add kernels on one stream.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "cuda_check.hpp"
#include "cuda_kernels.hpp"
#include "cuda_lt_common.hpp"
#include "cuda_lt_scaled.hpp"
#include "fusebench/backend.hpp"

namespace fusebench {
namespace {

using cuda::cuda_type;
using cuda::describe_algo;
using cuda::kMaxLoggedAlgorithms;
using cuda::kWorkspaceBytes;
using cuda::LtPlan;
using cuda::refuse_inside_capture;
constexpr int kTimedCandidates = 8;  // top heuristic candidates timed per shape ("timed" policy)
// Makes `device` current for a scope: a TP rank's backend may be called (teardown, timers,
// allocations) from a thread whose current device is another rank's.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) noexcept {
    switched_ = cudaGetDevice(&previous_) == cudaSuccess && previous_ != device &&
                cudaSetDevice(device) == cudaSuccess;
  }
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

class EventTimer final : public RegionTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream) {
    FUSEBENCH_CUDA(cudaEventCreate(&begin_));
    if (const cudaError_t e = cudaEventCreate(&end_); e != cudaSuccess) {
      cudaEventDestroy(begin_);
      FUSEBENCH_CUDA(e);
    }
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

// Alignment shared by every matrix of a strided batch (cuda_scaled_gemm.hpp, lt_alignment).
std::uint32_t alignment(const void* p, std::int64_t stride_elems, std::size_t elem) {
  return cuda::lt_alignment(p, stride_elems, elem);
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {
    try {
      FUSEBENCH_CUDA(cudaSetDevice(device_));
      FUSEBENCH_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      // Lane 1 of a plan (communication overlapped with compute, docs/tp.md).
      FUSEBENCH_CUDA(cudaStreamCreateWithFlags(&lane_stream_, cudaStreamNonBlocking));
      FUSEBENCH_CUBLAS(cublasLtCreate(&lt_));
      FUSEBENCH_CUDA(cudaMalloc(&workspace_, kWorkspaceBytes));
      // cuBLAS (grouped GEMM) with its own workspace so graph capture never allocates.
      FUSEBENCH_CUBLAS(cublasCreate(&blas_));
      FUSEBENCH_CUDA(cudaMalloc(&blas_workspace_, kWorkspaceBytes));
      bind_blas(stream_);
      scaled_ = std::make_unique<cuda::LtScaledGemm>(
          lt_, workspace_, *this, [this](const std::string& text) { log_algorithm(text); });
    } catch (...) {
      release_handles();  // the destructor does not run for a half-built object
      throw;
    }
  }
  ~CudaBackend() override {
    // A TP rank's backend (device r) may be destroyed on another thread, whose current device is
    // not device_: make it current for the frees and handle teardown, then restore the caller's.
    const DeviceGuard guard(device_);
    for (auto& [key, p] : plans_) {
      cublasLtMatrixLayoutDestroy(p.a);
      cublasLtMatrixLayoutDestroy(p.b);
      cublasLtMatrixLayoutDestroy(p.c);
      cublasLtMatmulDescDestroy(p.desc);
    }
    for (auto& [key, arrays] : pointer_arrays_) cudaFree(arrays);
    for (auto& [key, copy] : device_copies_) cudaFree(copy);
    scaled_.reset();  // its plans and buffers, on this device
    for (cudaEvent_t e : lane_events_) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    cudaFree(flush_buffer_);
    release_handles();
  }

  std::string name() const override { return "cuda"; }
  std::string unsupported_reason(DType) const override { return {}; }

  void* allocate(std::size_t bytes) override {
    const DeviceGuard guard(device_);  // cudaMemGetInfo speaks of the current device
    std::size_t free_bytes = 0, total = 0;
    FUSEBENCH_CUDA(cudaMemGetInfo(&free_bytes, &total));
    if (bytes > free_bytes) {
      throw OutOfMemory("device allocation of " + std::to_string(bytes >> 20) +
                        " MiB does not fit: " + std::to_string(free_bytes >> 20) + " MiB free of " +
                        std::to_string(total >> 20) + " MiB; use fewer tokens or a smaller model");
    }
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // handled here: must not surface in the next launch check
      throw OutOfMemory("cudaMalloc(" + std::to_string(bytes) +
                        " bytes) failed: " + cudaGetErrorString(err));
    }
    return p;
  }
  FreeMemory free_memory() const override {
    const DeviceGuard guard(device_);
    std::size_t free_bytes = 0, total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
      (void)cudaGetLastError();
      return {};
    }
    return {free_bytes, "cudaMemGetInfo on device " + std::to_string(device_)};
  }
  void release(void* ptr) noexcept override {
    const DeviceGuard guard(device_);
    cudaFree(ptr);
  }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    FUSEBENCH_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    FUSEBENCH_CUDA(cudaStreamSynchronize(stream_));
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    FUSEBENCH_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    FUSEBENCH_CUDA(cudaStreamSynchronize(stream_));
  }

  void gemm(const GemmArgs& g) override {
    const LtPlan& p = plan_for(g, 1, 0, 0, 0, 0);
    matmul(p, g);
    log_algorithm(p.algo_text);
  }

  // One launch through cublasGemmGroupedBatchedEx (cuBLAS 12.5+): each member its own group of
  // one. cuBLAS picks the kernel; there is no algorithm to time or record beyond that.
  void gemm_grouped(std::span<const GemmArgs> gemms) override {
    if (gemms.empty()) return;
    for (const auto& g : gemms) {
      if (g.bias.data != nullptr)  // the plans add a grouped GEMM's biases in a BiasAddStep
        throw std::invalid_argument("cublasGemmGroupedBatchedEx has no bias epilogue");
    }
    const auto n = gemms.size();
    // The host arrays live in the backend and are refilled in place: after the first call no
    // allocation is left on this path, which the eager regime times.
    GroupedScratch& a = grouped_;
    a.ta.assign(n, CUBLAS_OP_T);
    a.tb.assign(n, CUBLAS_OP_N);
    a.alpha.assign(n, 1.0f);
    a.beta.assign(n, 0.0f);
    a.group_size.assign(n, 1);
    a.m.resize(n);
    a.n.resize(n);
    a.k.resize(n);
    a.lda.resize(n);
    a.ldb.resize(n);
    a.ldc.resize(n);
    a.ptrs.resize(3 * n);
    for (std::size_t i = 0; i < n; ++i) {
      const GemmArgs& g = gemms[i];
      if (g.x.dtype != gemms[0].x.dtype)
        throw std::runtime_error("grouped GEMM members differ in dtype");
      a.m[i] = static_cast<int>(g.y.cols);  // column-major y^T = w x^T, as in gemm()
      a.n[i] = static_cast<int>(g.y.rows);
      a.k[i] = static_cast<int>(g.x.cols);
      a.lda[i] = static_cast<int>(g.w.ld);
      a.ldb[i] = static_cast<int>(g.x.ld);
      a.ldc[i] = static_cast<int>(g.y.ld);
      a.ptrs[i] = g.w.data;
      a.ptrs[n + i] = g.x.data;
      a.ptrs[2 * n + i] = g.y.data;
    }
    void** dev = pointer_array(a.ptrs);
    const cudaDataType_t type = cuda_type(gemms[0].x.dtype);
    bind_blas(lane());
    // Checked against cuBLAS's cublasGemmGroupedBatchedEx contract: transa/transb, m/n/k,
    // alpha/beta, lda/ldb/ldc and group_size are host arrays of group_count; A/B/C are device
    // arrays of pointers (one per problem: groups of one here); bf16/fp16/fp32 with
    // CUBLAS_COMPUTE_32F and float alpha/beta. Not checked (no GPU): that cuBLAS 13.1 runs it
    // without its own workspace allocation inside a capture (ours is set by bind_blas).
#ifdef FUSEBENCH_CUDA_GROUPED_GEMM
    FUSEBENCH_CUBLAS(cublasGemmGroupedBatchedEx(
        blas_, a.ta.data(), a.tb.data(), a.m.data(), a.n.data(), a.k.data(), a.alpha.data(),
        const_cast<const void* const*>(dev), type, a.lda.data(),
        const_cast<const void* const*>(dev + n), type, a.ldb.data(), a.beta.data(), dev + 2 * n,
        type, a.ldc.data(), static_cast<int>(n), a.group_size.data(), CUBLAS_COMPUTE_32F));
#else
    (void)dev;
    (void)type;
    throw std::runtime_error(
        "the grouped GEMM needs cublasGemmGroupedBatchedEx (cuBLAS 12.5+); this build's CUDA "
        "toolkit is older (cmake/CudaFeatures.cmake left it out)");
#endif
    if (algorithm_log_.size() < kMaxLoggedAlgorithms) {
      log_algorithm("cublasGemmGroupedBatchedEx groups=" + std::to_string(n) +
                    " (cuBLAS chooses the kernel; not timed)");
    }
  }

  // One cuBLASLt strided-batched matmul when the members sit at constant strides (x may be
  // shared: stride 0), with the same algorithm policy as gemm().
  void gemm_batched(std::span<const GemmArgs> gemms) override {
    if (gemms.empty()) return;
    const GemmArgs& g0 = gemms[0];
    const auto elem = static_cast<std::int64_t>(dtype_size(g0.x.dtype));
    for (const auto& g : gemms) {
      if (g.y.rows != g0.y.rows || g.y.cols != g0.y.cols || g.x.cols != g0.x.cols ||
          g.x.ld != g0.x.ld || g.w.ld != g0.w.ld || g.y.ld != g0.y.ld || g.x.dtype != g0.x.dtype ||
          (g.bias.data == nullptr) != (g0.bias.data == nullptr)) {
        throw std::runtime_error("batched GEMM members differ in shape");
      }
    }
    // The members' common stride of one operand, or nullopt where they have none.
    const auto stride = [&](auto member) -> std::optional<std::int64_t> {
      if (gemms.size() < 2) return 0;
      const auto diff = static_cast<const std::byte*>(member(gemms[1]).data) -
                        static_cast<const std::byte*>(member(g0).data);
      for (std::size_t i = 1; i < gemms.size(); ++i) {
        const auto d = static_cast<const std::byte*>(member(gemms[i]).data) -
                       static_cast<const std::byte*>(member(gemms[i - 1]).data);
        if (d != diff || d % elem != 0) return std::nullopt;
      }
      return diff / elem;
    };
    const auto sx = stride([](const GemmArgs& g) { return g.x; });
    const auto sw = stride([](const GemmArgs& g) { return g.w; });
    const auto sy = stride([](const GemmArgs& g) { return g.y; });
    // The epilogue's bias batch stride (CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE).
    const auto sb = g0.bias.data != nullptr ? stride([](const GemmArgs& g) { return g.bias; })
                                            : std::optional<std::int64_t>{0};
    if (!sx || !sw || !sy || !sb) {
      // The moe op's padded blocks: one shape, but each block reads its own expert's weights (the
      // same for an expert's blocks, skipping inactive experts): pointer arrays, as fused_moe's
      // tiles index their expert.
      pointer_batched(gemms);
      return;
    }
    const LtPlan& p = plan_for(g0, static_cast<int>(gemms.size()), *sx, *sw, *sy, *sb);
    matmul(p, g0);
    if (algorithm_log_.size() < kMaxLoggedAlgorithms)
      log_algorithm(p.algo_text + " batch=" + std::to_string(gemms.size()));
  }

  // Quantized projections (docs/quant.md, "On the GPU"; the calls as data in
  // cuda_scaled_gemm.hpp): our quantize kernels; fp8 as cuBLASLt's e4m3 matmul with the scales
  // applied inside it (SCALAR_32F per tensor, OUTER_VEC_32F per channel / per token,
  // BLK128x128_32F x VEC128_32F for 128x128 weight blocks with 1x128 activation groups); int8 as
  // cuBLASLt's s8 x s8 -> s32 matmul, then our dequantize kernel.
  std::string quant_unsupported_reason(const QuantSpec& spec) const override {
    return cuda_quant_refusal(spec);
  }
  std::string quant_execution(QuantDType dtype) const override {
    if (dtype == QuantDType::int8)
      return "native: cuBLASLt's int8 matmul (s8 x s8 -> s32, exact), then a dequantize kernel "
             "(int32 x row scale x column scale, fp32) and quantize kernels of fusebench's own";
    return "native: cuBLASLt's fp8 e4m3 matmul (fp32 accumulation, the scales applied in the "
           "GEMM), quantize kernels of fusebench's own";
  }

  void quantize(const QuantizeArgs& a) override { scaled_->quantize(a, lane()); }
  void scaled_gemm(const ScaledGemmArgs& a) override { scaled_->scaled_gemm(a, lane(), lane_); }

  // dst[i] = src[rows[i]] (zero where rows[i] < 0): one kernel; the indices are uploaded once per
  // distinct routing (a plan's routing is fixed, so a graph replays the routing it captured).
  void gather_rows(const MatRef& src, const MatRef& dst, std::span<const std::int64_t> rows,
                   std::span<const float> scale) override {
    if (static_cast<std::int64_t>(rows.size()) != dst.rows || src.cols != dst.cols ||
        src.dtype != dst.dtype || (!scale.empty() && scale.size() != rows.size()))
      throw std::invalid_argument("gather_rows: " + std::to_string(rows.size()) + " rows for " +
                                  std::to_string(dst.rows) + ", or src and dst differ");
    for (const std::int64_t r : rows) {
      if (r >= src.rows)
        throw std::invalid_argument("gather_rows: row " + std::to_string(r) + " of " +
                                    std::to_string(src.rows));
    }
    if (rows.empty()) return;
    const auto* dev = static_cast<const std::int64_t*>(
        device_copy(rows.data(), rows.size_bytes(), "uploading a gather's row indices"));
    // Llama-4's router weights on the input rows: uploaded once per routing, as the indices.
    const auto* dev_scale =
        scale.empty() ? nullptr
                      : static_cast<const float*>(device_copy(scale.data(), scale.size_bytes(),
                                                              "uploading a gather's row weights"));
    FUSEBENCH_CUDA(cuda::launch_gather_rows(src.data, src.ld, dst.data, dst.ld, dev, dev_scale,
                                            dst.rows, dst.cols, dst.dtype, lane()));
  }

  // qwen2_moe's gated shared expert: x row t *= sigmoid(gate[t]), one kernel.
  void sigmoid_gate_rows(const MatRef& x, const MatRef& gate) override {
    if (gate.rows != x.rows || gate.cols != 1 || gate.dtype != x.dtype)
      throw std::invalid_argument("sigmoid_gate_rows: the gate is not one column per row of x");
    if (x.rows == 0) return;
    FUSEBENCH_CUDA(cuda::launch_sigmoid_gate_rows(x.data, x.ld, gate.data, gate.ld, x.rows, x.cols,
                                                  x.dtype, lane()));
  }

  // The combine: the routed rows of each dst row added in order (the CPU backend's sum), one
  // kernel over dst rows (no atomics); the inverse map is built here and uploaded once per routing.
  void scatter_add(const MatRef& src, const MatRef& dst, std::span<const std::int64_t> rows,
                   std::span<const float> scale, bool zero_dst) override {
    if (static_cast<std::int64_t>(rows.size()) != src.rows || scale.size() != rows.size() ||
        src.cols != dst.cols || src.dtype != dst.dtype)
      throw std::invalid_argument("scatter_add: " + std::to_string(rows.size()) + " rows for " +
                                  std::to_string(src.rows) + ", or src and dst differ");
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(dst.rows) + 1, 0);
    for (const std::int64_t r : rows) {
      if (r >= dst.rows)
        throw std::invalid_argument("scatter_add: row " + std::to_string(r) + " of " +
                                    std::to_string(dst.rows));
      if (r >= 0) ++offsets[static_cast<std::size_t>(r) + 1];
    }
    for (std::size_t r = 0; r + 1 < offsets.size(); ++r) offsets[r + 1] += offsets[r];
    std::vector<std::int64_t> src_rows(static_cast<std::size_t>(offsets.back()));
    std::vector<float> weights(src_rows.size());
    std::vector<std::int64_t> next(offsets.begin(), offsets.end() - 1);
    for (std::size_t i = 0; i < rows.size(); ++i) {  // ascending i: the CPU's order of adds
      if (rows[i] < 0) continue;
      const auto j = static_cast<std::size_t>(next[static_cast<std::size_t>(rows[i])]++);
      src_rows[j] = static_cast<std::int64_t>(i);
      weights[j] = scale[i];
    }
    const char* what = "uploading a combine's row map";
    const auto* dev_offsets = static_cast<const std::int64_t*>(
        device_copy(offsets.data(), offsets.size() * sizeof(std::int64_t), what));
    const auto* dev_rows = static_cast<const std::int64_t*>(device_copy(
        src_rows.data(), std::max<std::size_t>(src_rows.size(), 1) * sizeof(std::int64_t), what));
    const auto* dev_scale = static_cast<const float*>(device_copy(
        weights.data(), std::max<std::size_t>(weights.size(), 1) * sizeof(float), what));
    FUSEBENCH_CUDA(cuda::launch_scatter_add(src.data, src.ld, dst.data, dst.ld, dev_offsets,
                                            dev_rows, dev_scale, dst.rows, dst.cols, zero_dst,
                                            dst.dtype, lane()));
  }

  void set_gemm_algo_policy(const std::string& policy) override {
    if (policy != "timed" && policy != "heuristic") {
      throw std::invalid_argument("--gemm-algo: unknown policy '" + policy +
                                  "' (valid: timed, heuristic)");
    }
    timed_ = policy == "timed";
  }

  void act_and_mul(const ActAndMulArgs& a) override {
    if (a.gate.rows != a.out.rows || a.up.rows != a.out.rows || a.gate.cols != a.out.cols ||
        a.up.cols != a.out.cols || a.gate.dtype != a.out.dtype || a.up.dtype != a.out.dtype ||
        a.col_stride < 1) {
      throw std::invalid_argument("act_and_mul: gate, up and out differ in shape or dtype");
    }
    FUSEBENCH_CUDA(cuda::launch_act_and_mul(a.act, static_cast<float>(a.limit), a.gate.data,
                                            a.gate.ld, a.up.data, a.up.ld, a.col_stride, a.out.data,
                                            a.out.ld, a.out.rows, a.out.cols, a.out.dtype, lane()));
  }

  // fused_bias_kernel's add (and a grouped GEMM's biases): our kernel, one launch for all.
  void bias_add(std::span<const BiasAddArgs> members) override {
    if (members.empty()) return;
    if (members.size() > static_cast<std::size_t>(cuda::kMaxBiasAddMembers))
      throw std::invalid_argument("bias_add: more than " +
                                  std::to_string(cuda::kMaxBiasAddMembers) + " members");
    std::vector<cuda::BiasAddMember> m;
    for (const auto& a : members) {
      if (a.y.rows != members[0].y.rows || a.y.dtype != members[0].y.dtype ||
          a.bias.rows != a.y.cols || a.bias.dtype != a.y.dtype) {
        throw std::invalid_argument(
            "bias_add: members differ in rows or dtype, or a bias length "
            "differs from its output's columns");
      }
      m.push_back({a.y.data, a.bias.data, a.y.ld, a.y.cols});
    }
    FUSEBENCH_CUDA(cuda::launch_bias_add(m.data(), static_cast<int>(m.size()), members[0].y.rows,
                                         members[0].y.dtype, lane()));
  }

  void rms_norm(const MatRef& x, const MatRef& weight, const MatRef& out, float eps) override {
    if (x.rows != out.rows || x.cols != out.cols || weight.cols != x.cols || weight.rows != 1 ||
        x.dtype != out.dtype || weight.dtype != out.dtype) {
      throw std::invalid_argument("rms_norm: x, weight [1, cols] and out differ in shape or dtype");
    }
    FUSEBENCH_CUDA(cuda::launch_rms_norm(x.data, x.ld, weight.data, out.data, out.ld, out.rows,
                                         out.cols, eps, out.dtype, lane()));
  }

  void synchronize() override {
    FUSEBENCH_CUDA(cudaStreamSynchronize(lane_stream_));
    FUSEBENCH_CUDA(cudaStreamSynchronize(stream_));
  }
  // Reads twice L2's size of clean data through L2 (see launch_evict_l2 for why not a memset).
  void flush_l2() override {
    const DeviceGuard guard(device_);  // a kernel launch needs its stream's device current
    if (flush_buffer_ == nullptr) {
      refuse_inside_capture(stream_, "allocating the L2 flush buffer");
      int l2 = 0, sms = 0;
      FUSEBENCH_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device_));
      FUSEBENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_));
      // Twice L2, so no line of the region survives; a multiple of 16 for the int4 loads.
      flush_bytes_ = (2 * static_cast<std::size_t>(l2) + 15) / 16 * 16;
      flush_blocks_ = 4 * std::max(sms, 1);
      void* buffer = nullptr;
      FUSEBENCH_CUDA(cudaMalloc(&buffer, flush_bytes_ + 16));  // + the kernel's sink
      try {
        FUSEBENCH_CUDA(cudaMemsetAsync(buffer, 0, flush_bytes_ + 16, stream_));
        // The zero-fill left dirty lines: two read passes write them back and leave L2 clean.
        for (int i = 0; i < 2; ++i) evict_l2(buffer);
        FUSEBENCH_CUDA(cudaStreamSynchronize(stream_));
      } catch (...) {
        cudaFree(buffer);  // never keep a buffer that was not zero-filled
        throw;
      }
      flush_buffer_ = buffer;
    }
    evict_l2(flush_buffer_);
  }
  std::unique_ptr<RegionTimer> make_timer() override {
    const DeviceGuard guard(device_);  // events belong to the device of the stream they time
    return std::make_unique<EventTimer>(lane());
  }
  std::vector<std::string> take_algorithm_log() override {
    return std::exchange(algorithm_log_, {});
  }
  void* stream() const override { return lane(); }
  int device() const override { return device_; }

  bool has_device_lanes() const override { return true; }
  void set_lane(int lane) override {
    if (lane < 0 || lane > 1)
      throw std::logic_error("CUDA backend: lane " + std::to_string(lane) + " (lanes 0, 1)");
    lane_ = lane;
  }
  void lane_signal(int id) override {
    if (id < 0) throw std::logic_error("CUDA backend: negative lane event id");
    const DeviceGuard guard(device_);
    if (static_cast<std::size_t>(id) >= lane_events_.size())
      lane_events_.resize(static_cast<std::size_t>(id) + 1, nullptr);
    cudaEvent_t& e = lane_events_[static_cast<std::size_t>(id)];
    if (e == nullptr) FUSEBENCH_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    FUSEBENCH_CUDA(cudaEventRecord(e, lane()));
  }
  void lane_wait(int id) override {
    if (id < 0 || static_cast<std::size_t>(id) >= lane_events_.size() ||
        lane_events_[static_cast<std::size_t>(id)] == nullptr) {
      throw std::logic_error("CUDA backend: wait for lane event " + std::to_string(id) +
                             " that was never recorded");
    }
    FUSEBENCH_CUDA(cudaStreamWaitEvent(lane(), lane_events_[static_cast<std::size_t>(id)], 0));
  }

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
    return {
        {"backend", "cuda"},
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
        {"cublaslt_version", cublasLtGetVersion()},
        {"gemm_algo_policy", timed_
                                 ? "timed: fastest of the top " + std::to_string(kTimedCandidates) +
                                       " cuBLASLt heuristic candidates per shape"
                                 : std::string("heuristic: cuBLASLt's first candidate")}};
  }

 private:
  // The log only needs the first runs' choices (in step order); bounding it keeps string copies
  // out of the host cost the eager regime measures.
  void log_algorithm(const std::string& text) {
    if (algorithm_log_.size() < kMaxLoggedAlgorithms) algorithm_log_.push_back(text);
  }

  void evict_l2(void* buffer) {
    FUSEBENCH_CUDA(cuda::launch_evict_l2(
        buffer, flush_bytes_,
        reinterpret_cast<int*>(static_cast<std::byte*>(buffer) + flush_bytes_), flush_blocks_,
        stream_));
  }

  cudaStream_t lane() const { return lane_ == 0 ? stream_ : lane_stream_; }
  // cublasSetStream resets the handle's workspace to cuBLAS's default pool (cuBLAS docs,
  // cublasSetStream): our workspace is set again after it, every time, as PyTorch does, so
  // the grouped GEMM never allocates (inside a graph capture least of all).
  void bind_blas(cudaStream_t s) {
    FUSEBENCH_CUBLAS(cublasSetStream(blas_, s));
    FUSEBENCH_CUBLAS(cublasSetWorkspace(blas_, blas_workspace_, kWorkspaceBytes));
  }

  // Frees what the constructor made (null handles are skipped).
  void release_handles() noexcept {
    if (blas_ != nullptr) cublasDestroy(blas_);
    cudaFree(blas_workspace_);
    cudaFree(workspace_);
    if (lt_ != nullptr) cublasLtDestroy(lt_);
    if (lane_stream_ != nullptr) cudaStreamDestroy(lane_stream_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  void matmul(const LtPlan& p, const GemmArgs& g, const cublasLtMatmulAlgo_t* algo = nullptr) {
    const float alpha = 1.0f, beta = 0.0f;
    if (g.bias.data != nullptr) {
      // The descriptor is shared by every call of this shape; the bias is this call's (a rotation
      // copy's). Host-side only, so it is safe inside a graph capture.
      FUSEBENCH_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &g.bias.data, sizeof(g.bias.data)));
    }
    // Row-major y = x w^T is column-major y^T = w x^T: A = w (transposed), B = x.
    FUSEBENCH_CUBLAS(cublasLtMatmul(lt_, p.desc, &alpha, g.w.data, p.a, g.x.data, p.b, &beta,
                                    g.y.data, p.c, g.y.data, p.c, algo ? algo : &p.algo, workspace_,
                                    kWorkspaceBytes, lane()));
  }

  // Batched GEMM of one shape over pointer arrays (cublasGemmBatchedEx), for members at no
  // common stride. No bias epilogue there: refused rather than dropped.
  void pointer_batched(std::span<const GemmArgs> gemms) {
    const GemmArgs& g0 = gemms[0];
    if (g0.bias.data != nullptr)
      throw std::invalid_argument(
          "a batched GEMM whose members are at no common stride runs as cublasGemmBatchedEx, "
          "which has no bias epilogue (the moe op's padded variant with expert biases)");
    const auto n = gemms.size();
    std::vector<const void*>& ptrs = grouped_.ptrs;
    ptrs.resize(3 * n);
    for (std::size_t i = 0; i < n; ++i) {
      ptrs[i] = gemms[i].w.data;
      ptrs[n + i] = gemms[i].x.data;
      ptrs[2 * n + i] = gemms[i].y.data;
    }
    void** dev = pointer_array(ptrs);
    const cudaDataType_t type = cuda_type(g0.x.dtype);
    const float alpha = 1.0f, beta = 0.0f;
    bind_blas(lane());
    // Column-major y^T = w^T' x^T, as in gemm_grouped.
    FUSEBENCH_CUBLAS(cublasGemmBatchedEx(
        blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(g0.y.cols), static_cast<int>(g0.y.rows),
        static_cast<int>(g0.x.cols), &alpha, const_cast<const void* const*>(dev), type,
        static_cast<int>(g0.w.ld), const_cast<const void* const*>(dev + n), type,
        static_cast<int>(g0.x.ld), &beta, dev + 2 * n, type, static_cast<int>(g0.y.ld),
        static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (algorithm_log_.size() < kMaxLoggedAlgorithms)
      log_algorithm("cublasGemmBatchedEx batch=" + std::to_string(n) +
                    " (pointer arrays; cuBLAS chooses the kernel; not timed)");
  }

  // A device copy of `bytes` host bytes, made once per distinct content (a routing's indices):
  // after the first call of a plan nothing is uploaded, so a graph can capture the region.
  const void* device_copy(const void* data, std::size_t bytes, const char* what) {
    std::string key(static_cast<const char*>(data), bytes);
    if (const auto it = device_copies_.find(key); it != device_copies_.end()) return it->second;
    refuse_inside_capture(lane(), what);
    void* dev = nullptr;
    FUSEBENCH_CUDA(cudaMalloc(&dev, bytes));
    cudaError_t err = cudaMemcpyAsync(dev, data, bytes, cudaMemcpyHostToDevice, lane());
    if (err == cudaSuccess) err = cudaStreamSynchronize(lane());
    if (err != cudaSuccess) {
      cudaFree(dev);
      FUSEBENCH_CUDA(err);
    }
    device_copies_.emplace(std::move(key), dev);
    return dev;
  }

  // A device array of pointers, uploaded once per distinct set (graph capture needs it stable).
  void** pointer_array(const std::vector<const void*>& ptrs) {
    if (const auto it = pointer_arrays_.find(ptrs); it != pointer_arrays_.end()) return it->second;
    refuse_inside_capture(lane(), "uploading a grouped GEMM's pointer array");
    void** dev = nullptr;
    FUSEBENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(&dev), ptrs.size() * sizeof(void*)));
    cudaError_t err = cudaMemcpyAsync(dev, ptrs.data(), ptrs.size() * sizeof(void*),
                                      cudaMemcpyHostToDevice, lane());
    if (err == cudaSuccess) err = cudaStreamSynchronize(lane());
    if (err != cudaSuccess) {
      cudaFree(dev);  // never cache a half-built array
      FUSEBENCH_CUDA(err);
    }
    pointer_arrays_.emplace(ptrs, dev);
    return dev;
  }

  // Times each candidate on the call's own operands: one warm-up, then enough runs to cover
  // ~0.2 ms; the fastest mean wins. Same rule for every GEMM, split or fused.
  int pick_fastest(const LtPlan& p, const GemmArgs& g,
                   const std::vector<cublasLtMatmulHeuristicResult_t>& c,
                   std::vector<double>* times) {
    refuse_inside_capture(lane(), "GEMM algorithm selection");
    cudaEvent_t e0{}, e1{};
    FUSEBENCH_CUDA(cudaEventCreate(&e0));
    FUSEBENCH_CUDA(cudaEventCreate(&e1));
    int best = 0;
    double best_s = 0;
    try {
      for (std::size_t i = 0; i < c.size(); ++i) {
        const auto time = [&](int reps) {
          FUSEBENCH_CUDA(cudaEventRecord(e0, lane()));
          for (int r = 0; r < reps; ++r) matmul(p, g, &c[i].algo);
          FUSEBENCH_CUDA(cudaEventRecord(e1, lane()));
          FUSEBENCH_CUDA(cudaEventSynchronize(e1));
          float ms = 0;
          FUSEBENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1));
          return ms * 1e-3 / reps;
        };
        double s = 0;
        try {
          time(1);  // warm-up
          s = time(1);
          if (s < 2e-4) s = time(std::clamp(static_cast<int>(2e-4 / std::max(s, 1e-7)), 1, 50));
        } catch (const std::exception&) {
          s = -1;  // a candidate that fails to run is skipped
        }
        times->push_back(s);
        if (s > 0 && (best_s == 0 || s < best_s)) {
          best_s = s;
          best = static_cast<int>(i);
        }
      }
    } catch (...) {
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      throw;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return best;
  }

  const LtPlan& plan_for(const GemmArgs& g, int batch, std::int64_t sx, std::int64_t sw,
                         std::int64_t sy, std::int64_t sb) {
    const std::size_t elem = dtype_size(g.x.dtype);
    const std::uint32_t align_a = alignment(g.w.data, sw, elem),
                        align_b = alignment(g.x.data, sx, elem),
                        align_c = alignment(g.y.data, sy, elem);
    const bool bias = g.bias.data != nullptr;
    // The heuristic reads the bias pointer's alignment (cublasLt.h), so it is in the key too.
    const std::uint32_t bias_key = bias ? 1u | alignment(g.bias.data, sb, elem) << 1 : 0u;
    // The alignments are part of the key: an algorithm chosen for 256-byte aligned operands may
    // be refused for a less aligned view of the same shape.
    const auto key = std::make_tuple(
        g.y.rows, g.y.cols, g.x.cols, g.x.ld, g.w.ld, g.y.ld, static_cast<int>(g.x.dtype), batch,
        sx, sw, sy,
        align_a | align_b << 9 | align_c << 18 | static_cast<std::uint32_t>(timed_) << 27, bias_key,
        sb);
    if (auto it = plans_.find(key); it != plans_.end()) return it->second;
    const std::uint64_t m = static_cast<std::uint64_t>(g.y.rows),
                        n = static_cast<std::uint64_t>(g.y.cols),
                        k = static_cast<std::uint64_t>(g.x.cols);
    const cudaDataType_t type = cuda_type(g.x.dtype);
    LtPlan p;
    FUSEBENCH_CUBLAS(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
    FUSEBENCH_CUBLAS(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
    FUSEBENCH_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans,
                                                    sizeof(no_trans)));
    if (bias) {
      // y^T = w x^T column-major: D has N rows, so the bias vector (length N) is broadcast
      // along the M columns, as F.linear adds it. Its type defaults to D's.
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      FUSEBENCH_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                      &epilogue, sizeof(epilogue)));
      FUSEBENCH_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &g.bias.data, sizeof(g.bias.data)));
      if (batch > 1) {
        FUSEBENCH_CUBLAS(cublasLtMatmulDescSetAttribute(
            p.desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &sb, sizeof(sb)));
      }
    }
    FUSEBENCH_CUBLAS(
        cublasLtMatrixLayoutCreate(&p.a, type, k, n, static_cast<std::int64_t>(g.w.ld)));
    FUSEBENCH_CUBLAS(
        cublasLtMatrixLayoutCreate(&p.b, type, k, m, static_cast<std::int64_t>(g.x.ld)));
    FUSEBENCH_CUBLAS(
        cublasLtMatrixLayoutCreate(&p.c, type, n, m, static_cast<std::int64_t>(g.y.ld)));
    if (batch > 1) {
      const auto set_batch = [&](cublasLtMatrixLayout_t l, std::int64_t stride) {
        FUSEBENCH_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                          &batch, sizeof(batch)));
        FUSEBENCH_CUBLAS(cublasLtMatrixLayoutSetAttribute(
            l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
      };
      set_batch(p.a, sw);
      set_batch(p.b, sx);
      set_batch(p.c, sy);
    }
    cublasLtMatmulPreference_t pref{};
    FUSEBENCH_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    const std::size_t ws = kWorkspaceBytes;
    FUSEBENCH_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    FUSEBENCH_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
    FUSEBENCH_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
    FUSEBENCH_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)));
    FUSEBENCH_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof(align_c)));
    std::vector<cublasLtMatmulHeuristicResult_t> results(timed_ ? kTimedCandidates : 1);
    int returned = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(lt_, p.desc, p.a, p.b, p.c, p.c, pref,
                                       static_cast<int>(results.size()), results.data(), &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    const auto destroy = [&p] {
      cublasLtMatrixLayoutDestroy(p.a);
      cublasLtMatrixLayoutDestroy(p.b);
      cublasLtMatrixLayoutDestroy(p.c);
      cublasLtMatmulDescDestroy(p.desc);
    };
    const std::string shape =
        "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
        " batch=" + std::to_string(batch) + (bias ? " bias epilogue" : "") +
        // Name the strides: a shared operand (stride 0) is what a batched plan is most likely
        // to be refused for.
        (batch > 1 ? " (batch strides x=" + std::to_string(sx) + " w=" + std::to_string(sw) +
                         " y=" + std::to_string(sy) + " elements)"
                   : std::string());
    // Only results whose state is success are valid (cublasLt.h); and ours must fit the workspace.
    results.resize(st == CUBLAS_STATUS_SUCCESS ? static_cast<std::size_t>(returned) : 0u);
    std::erase_if(results, [](const cublasLtMatmulHeuristicResult_t& r) {
      return r.state != CUBLAS_STATUS_SUCCESS || r.workspaceSize > kWorkspaceBytes;
    });
    if (results.empty()) {
      destroy();
      throw std::runtime_error("cuBLASLt has no algorithm for " + shape);
    }
    returned = static_cast<int>(results.size());
    int chosen = 0;
    std::vector<double> times;
    try {
      if (timed_ && returned > 1) {
        chosen = pick_fastest(p, g, results, &times);
        if (!(times[static_cast<std::size_t>(chosen)] > 0)) {
          throw std::runtime_error("none of the " + std::to_string(returned) +
                                   " cuBLASLt candidates ran for " + shape);
        }
      }
    } catch (...) {
      destroy();
      throw;
    }
    p.algo = results[static_cast<std::size_t>(chosen)].algo;
    p.algo_text = describe_algo(p.algo) + (bias ? " epilogue=bias" : "");
    if (!times.empty()) {
      std::ostringstream t;
      t << " (timed: heuristic #" << chosen << " fastest of " << returned << ", "
        << times[static_cast<std::size_t>(chosen)] * 1e6 << " us; #0 ";
      if (times[0] > 0)
        t << times[0] * 1e6 << " us)";
      else
        t << "failed to run)";
      p.algo_text += t.str();
    } else {
      p.algo_text += timed_ ? " (heuristic #0, the only candidate)" : " (heuristic #0)";
    }
    return plans_.emplace(key, p).first->second;
  }

  int device_;
  cudaStream_t stream_{};       // lane 0
  cudaStream_t lane_stream_{};  // lane 1
  int lane_ = 0;
  std::vector<cudaEvent_t> lane_events_;
  cublasLtHandle_t lt_{};
  void* workspace_ = nullptr;
  void* flush_buffer_ = nullptr;
  std::size_t flush_bytes_ = 0;
  int flush_blocks_ = 0;
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                      std::int64_t, int, int, std::int64_t, std::int64_t, std::int64_t,
                      std::uint32_t, std::uint32_t, std::int64_t>,
           LtPlan>
      plans_;
  cublasHandle_t blas_{};
  void* blas_workspace_ = nullptr;
  std::map<std::vector<const void*>, void**> pointer_arrays_;
  // The quantized calls' plans and buffers (cuda_lt_scaled.hpp).
  std::unique_ptr<cuda::LtScaledGemm> scaled_;
  // device_copy's uploads by content (a routing's row indices, its combine's map).
  std::map<std::string, void*> device_copies_;
  // gemm_grouped's host arguments, reused from call to call (see there).
  struct GroupedScratch {
    std::vector<cublasOperation_t> ta, tb;
    std::vector<int> m, n, k, lda, ldb, ldc, group_size;
    std::vector<float> alpha, beta;
    std::vector<const void*> ptrs;  // w..., x..., y...: the key of pointer_arrays_
  } grouped_;
  bool timed_ = true;
  std::vector<std::string> algorithm_log_;
};

}  // namespace

bool cuda_backend_built() { return true; }

// One backend per GPU for the ranks of a single-process multi-GPU run (docs/tp.md).
std::unique_ptr<Backend> make_cuda_backend_on(int device, std::string* why) {
  int count = 0;
  if (const cudaError_t err = cudaGetDeviceCount(&count);
      err != cudaSuccess || device < 0 || device >= count) {
    if (why)
      *why = "CUDA device " + std::to_string(device) + " is not available (" +
             std::to_string(count) + " visible)";
    return nullptr;
  }
  try {
    return std::make_unique<CudaBackend>(device);
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return nullptr;
  }
}

}  // namespace fusebench
