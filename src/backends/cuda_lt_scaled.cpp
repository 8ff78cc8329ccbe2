#include "backends/cuda_lt_scaled.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "backends/cuda_check.hpp"
#include "backends/cuda_quant.hpp"

namespace fusebench::cuda {
namespace {

// cuda_scaled_gemm.hpp names cuBLASLt's enumerators by value (it is host code without cuBLASLt).
static_assert(static_cast<int>(LtPreference::max_workspace_bytes) ==
              CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
static_assert(static_cast<int>(LtPreference::min_alignment_a) ==
              CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
static_assert(static_cast<int>(LtPreference::min_alignment_b) ==
              CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES);
static_assert(static_cast<int>(LtPreference::min_alignment_c) ==
              CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES);
static_assert(static_cast<int>(LtPreference::min_alignment_d) ==
              CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
#ifdef FUSEBENCH_CUDA_FP8_GEMM
static_assert(static_cast<int>(LtScaleMode::scalar_32f) == CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F);
static_assert(static_cast<int>(LtScaleMode::outer_vec_32f) ==
              CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F);
static_assert(static_cast<int>(LtScaleMode::vec128_32f) == CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F);
static_assert(static_cast<int>(LtScaleMode::blk128x128_32f) ==
              CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F);
#endif

constexpr std::int64_t kUnitOffset = 4;  // the ones start 16 bytes in (scale vectors' alignment)

}  // namespace

LtScaledGemm::LtScaledGemm(cublasLtHandle_t lt, void* workspace, Backend& owner,
                           std::function<void(const std::string&)> log)
    : lt_(lt), workspace_(workspace), owner_(owner), log_(std::move(log)) {}

LtScaledGemm::~LtScaledGemm() {
  for (auto& [key, p] : plans_) destroy(p);
  cudaFree(amax_scratch_);
  for (const Accumulator& acc : accumulators_) cudaFree(acc.data);
  for (float* u : unit_scales_) cudaFree(u);
}

void LtScaledGemm::quantize(const QuantizeArgs& a, cudaStream_t stream) {
  const QuantRef& o = a.out;
  if (a.x.rows != o.rows || a.x.cols != o.cols)
    throw std::invalid_argument("quantize: x and its codes differ in shape");
  Quantize mode{};
  if (a.static_scale) {
    if (o.kind != ScaleKind::tensor)
      throw std::invalid_argument("quantize: a static scale is one per-tensor scale");
    mode = Quantize::static_tensor;
  } else if (o.kind == ScaleKind::tensor) {
    mode = Quantize::dynamic_tensor;
  } else if (o.kind == ScaleKind::row) {
    mode = Quantize::dynamic_row;
  } else if (o.kind == ScaleKind::group) {
    mode = Quantize::dynamic_group128;
  } else {
    throw std::invalid_argument(
        "quantize on cuda: 128x128 blocks are weights' scales, made when the weights are "
        "prepared, not in the region");
  }
  if (amax_scratch_ == nullptr) {
    refuse_inside_capture(stream, "allocating the quantize kernel's amax word");
    FUSEBENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(&amax_scratch_), sizeof(unsigned)));
  }
  const Codes codes_of = o.dtype == QuantDType::int8 ? Codes::int8 : Codes::fp8_e4m3;
  FUSEBENCH_CUDA(launch_quantize(codes_of, mode, a.x.data, a.x.ld, a.x.dtype, o.codes, o.ld, o.rows,
                                 o.cols, o.scales, amax_scratch_, stream));
}

void LtScaledGemm::scaled_gemm(const ScaledGemmArgs& a, cudaStream_t stream, int lane) {
  if (a.x.dtype != a.w.dtype || a.x.cols != a.w.cols || a.y.rows != a.x.rows ||
      a.y.cols != a.w.rows)
    throw std::invalid_argument("scaled_gemm: x [M, K], w [N, K] and y [M, N] do not agree");
  const std::int64_t m = a.y.rows, n = a.y.cols, k = a.x.cols;
  const auto y_bytes = static_cast<std::int64_t>(dtype_size(a.y.dtype));
  const ScaledGemmShape shape{m, n, k, a.x.ld, a.w.ld, a.y.ld, y_bytes};
  const ScaledGemmCall call = scaled_gemm_call(a.x.dtype, a.x.kind, a.w.kind, shape);
  if (!call.refusal.empty()) throw std::runtime_error(call.refusal);
  if (m == 0 || n == 0) return;
  const bool int8 = a.x.dtype == QuantDType::int8;
  // int8's D is this lane's int32 accumulator (ld N), whose alignment the heuristic is told.
  std::int32_t* acc =
      int8 ? accumulator(lane, static_cast<std::size_t>(m * n) * sizeof(std::int32_t), stream)
           : nullptr;
  const LtAlignments align =
      int8 ? quant_alignments(a.w.codes, a.x.codes, acc, 4)
           : quant_alignments(a.w.codes, a.x.codes, a.y.data, static_cast<std::size_t>(y_bytes));
  const QuantPlanKey key{
      shape, static_cast<int>(a.y.dtype), static_cast<int>(a.x.dtype), call.a, call.b, call.alpha,
      align};
  auto it = plans_.find(key);
  if (it == plans_.end()) it = plans_.emplace(key, make_plan(a, call, align)).first;
  const LtPlan& p = it->second;
  // What a failure names: the cuBLASLt call, the shape and the scale modes.
  const auto what = [&](const char* call_name) {
    return std::string(call_name) + " (" + (int8 ? "int8" : "fp8 e4m3") +
           " scaled GEMM, M=" + std::to_string(m) + " N=" + std::to_string(n) +
           " K=" + std::to_string(k) + ", scale modes A (w) " + std::string(to_string(call.a)) +
           " B (x) " + std::string(to_string(call.b)) + ", alpha from " +
           std::string(to_string(call.alpha)) + ")";
  };
  // The message is made only on failure: this path is timed (the eager regime).
  const auto check = [&](cublasStatus_t st, const char* call_name) {
    if (st != CUBLAS_STATUS_SUCCESS) detail::check_cublas(st, what(call_name).c_str());
  };
  if (!int8) {
    // This call's scales (a rotation copy's): host-side attributes, safe inside a capture. A
    // per-tensor scale meeting a per-row one is alpha (a device pointer), its operand's vector
    // the ones (cuda_scaled_gemm.hpp, AlphaScale).
    const float* units = call.alpha != AlphaScale::none
                             ? unit_scales(std::max(m, n), stream) + kUnitOffset
                             : nullptr;
    const void* a_scales = call.alpha == AlphaScale::w ? units : a.w.scales;
    const void* b_scales = call.alpha == AlphaScale::x ? units : a.x.scales;
    check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scales,
                                         sizeof(a_scales)),
          "cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)");
    check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scales,
                                         sizeof(b_scales)),
          "cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)");
    const float one = 1.0f, zero = 0.0f;
    const void* alpha = &one;
    const void* beta = &zero;
    if (call.alpha != AlphaScale::none) {  // CUBLASLT_POINTER_MODE_DEVICE: both on the device
      alpha = call.alpha == AlphaScale::w ? a.w.scales : a.x.scales;
      beta = units - kUnitOffset;  // element 0: a device zero
    }
    check(cublasLtMatmul(lt_, p.desc, alpha, a.w.codes, p.a, a.x.codes, p.b, beta, a.y.data, p.c,
                         a.y.data, p.c, &p.algo, workspace_, kWorkspaceBytes, stream),
          "cublasLtMatmul");
    return;
  }
  // int8: the exact int32 product into this lane's accumulator, then our dequantize kernel.
  const std::int32_t alpha = 1, beta = 0;
  check(cublasLtMatmul(lt_, p.desc, &alpha, a.w.codes, p.a, a.x.codes, p.b, &beta, acc, p.c, acc,
                       p.c, &p.algo, workspace_, kWorkspaceBytes, stream),
        "cublasLtMatmul");
  if (const cudaError_t e = launch_dequantize_int32(acc, n, a.x.scales, a.x.kind == ScaleKind::row,
                                                    a.w.scales, a.w.kind == ScaleKind::row,
                                                    a.y.data, a.y.ld, m, n, a.y.dtype, stream);
      e != cudaSuccess)
    detail::check_cuda(e, what("the dequantize kernel after cublasLtMatmul").c_str());
}

// A quantized matmul's descriptor: y^T = w x^T column-major (A = w transposed, B = x: the TN
// layout cuBLASLt's fp8 and int8 kernels require). fp8: e4m3 operands, fp32 accumulation, the
// scale modes of `call` (alpha a device pointer where a per-tensor scale meets a per-row one), y
// in its dtype. int8: s8 operands, CUBLAS_COMPUTE_32I with int32 alpha/beta, D an int32 [M, N]
// accumulator (ld N) for the dequantize kernel. The preference carries the workspace and the
// operands' alignments (as the bf16 plans' do); the heuristic's first algorithm is logged, none
// is an error naming M, N, K, the scale modes and the alignments.
LtPlan LtScaledGemm::make_plan(const ScaledGemmArgs& g, const ScaledGemmCall& call,
                               const LtAlignments& align) {
  const std::uint64_t m = static_cast<std::uint64_t>(g.y.rows),
                      n = static_cast<std::uint64_t>(g.y.cols),
                      k = static_cast<std::uint64_t>(g.x.cols);
  const bool int8 = g.x.dtype == QuantDType::int8;
  const std::string what =
      std::string(int8 ? "int8 (s8 x s8 -> s32, CUBLAS_COMPUTE_32I)" : "fp8 e4m3") +
      " scaled GEMM M=" + std::to_string(m) + " N=" + std::to_string(n) +
      " K=" + std::to_string(k) + " (ld x=" + std::to_string(g.x.ld) +
      " w=" + std::to_string(g.w.ld) + " y=" + std::to_string(g.y.ld) + "), scale modes A (w) " +
      std::string(to_string(call.a)) + " B (x) " + std::string(to_string(call.b)) +
      ", alpha from " + std::string(to_string(call.alpha)) +
      ", alignments A=" + std::to_string(align.a) + " B=" + std::to_string(align.b) +
      " C/D=" + std::to_string(align.c) + " bytes";
  LtPlan p;
  const auto check = [&](cublasStatus_t st, const char* call_name) {
    if (st == CUBLAS_STATUS_SUCCESS) return;
    destroy(p);
    detail::check_cublas(st, (std::string(call_name) + " for the " + what).c_str());
  };
  check(cublasLtMatmulDescCreate(&p.desc, int8 ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F,
                                 int8 ? CUDA_R_32I : CUDA_R_32F),
        "cublasLtMatmulDescCreate");
  const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)),
        "cublasLtMatmulDescSetAttribute(TRANSA)");
  check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans,
                                       sizeof(no_trans)),
        "cublasLtMatmulDescSetAttribute(TRANSB)");
  if (!int8) {
#ifdef FUSEBENCH_CUDA_FP8_GEMM
    const auto a_mode = static_cast<std::int32_t>(call.a),
               b_mode = static_cast<std::int32_t>(call.b);
    check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode,
                                         sizeof(a_mode)),
          "cublasLtMatmulDescSetAttribute(A_SCALE_MODE)");
    check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode,
                                         sizeof(b_mode)),
          "cublasLtMatmulDescSetAttribute(B_SCALE_MODE)");
    if (call.alpha != AlphaScale::none) {
      const cublasLtPointerMode_t mode = CUBLASLT_POINTER_MODE_DEVICE;
      check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode,
                                           sizeof(mode)),
            "cublasLtMatmulDescSetAttribute(POINTER_MODE)");
    }
    // The heuristic reads the scale pointers' presence; scaled_gemm sets this call's before
    // every matmul.
    check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g.w.scales,
                                         sizeof(g.w.scales)),
          "cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)");
    check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g.x.scales,
                                         sizeof(g.x.scales)),
          "cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)");
#else
    destroy(p);
    throw std::runtime_error("the " + what +
                             " needs cuBLAS 12.9+ (its scale modes); this build's toolkit is "
                             "older (cmake/CudaFeatures.cmake)");
#endif
  }
  const cudaDataType_t operand = int8 ? CUDA_R_8I : CUDA_R_8F_E4M3;
  check(cublasLtMatrixLayoutCreate(&p.a, operand, k, n, g.w.ld), "cublasLtMatrixLayoutCreate(A)");
  check(cublasLtMatrixLayoutCreate(&p.b, operand, k, m, g.x.ld), "cublasLtMatrixLayoutCreate(B)");
  check(int8 ? cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32I, n, m, static_cast<std::int64_t>(n))
             : cublasLtMatrixLayoutCreate(&p.c, cuda_type(g.y.dtype), n, m, g.y.ld),
        "cublasLtMatrixLayoutCreate(C/D)");
  cublasLtMatmulPreference_t pref{};
  check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  for (const auto& [which, value] : quant_preferences(align, kWorkspaceBytes)) {
    const auto attr = static_cast<cublasLtMatmulPreferenceAttributes_t>(which);
    // MAX_WORKSPACE_BYTES is a uint64_t, the alignments uint32_t (cublasLt.h).
    const std::uint32_t narrow = static_cast<std::uint32_t>(value);
    const cublasStatus_t st =
        which == LtPreference::max_workspace_bytes
            ? cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value))
            : cublasLtMatmulPreferenceSetAttribute(pref, attr, &narrow, sizeof(narrow));
    if (st != CUBLAS_STATUS_SUCCESS) cublasLtMatmulPreferenceDestroy(pref);
    check(st, "cublasLtMatmulPreferenceSetAttribute");
  }
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || returned == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
    destroy(p);
    throw std::runtime_error("cublasLtMatmulAlgoGetHeuristic found no algorithm for the " + what +
                             " (status " + cublasLtGetStatusName(st) + ", " +
                             std::to_string(returned) + " returned)");
  }
  p.algo = result.algo;
  p.algo_text = std::string(int8 ? "int8 " : "fp8 ") + describe_algo(p.algo);
  if (!int8)
    p.algo_text += " scales A=" + std::string(to_string(call.a)) +
                   " B=" + std::string(to_string(call.b)) +
                   (call.alpha != AlphaScale::none
                        ? " alpha=" + std::string(to_string(call.alpha)) + "'s scale"
                        : std::string());
  log_(p.algo_text);
  return p;
}

// This lane's int8 accumulator, grown (outside a capture) to `bytes`: a region's first run
// allocates it, a graph captures the later ones.
std::int32_t* LtScaledGemm::accumulator(int lane, std::size_t bytes, cudaStream_t stream) {
  Accumulator& acc = accumulators_[static_cast<std::size_t>(lane)];
  if (acc.bytes >= bytes) return acc.data;
  refuse_inside_capture(stream, "growing the int8 GEMM's int32 accumulator");
  FUSEBENCH_CUDA(cudaStreamSynchronize(stream));  // the old one may still be read
  cudaFree(acc.data);
  acc = {};
  void* p = owner_.allocate(bytes);  // OutOfMemory names the size and what is free
  acc = {static_cast<std::int32_t*>(p), bytes};
  return acc.data;
}

// At least `count` ones after kUnitOffset zeros, grown outside a capture (a region's first run);
// an older, shorter one is kept alive for the graphs that captured it.
const float* LtScaledGemm::unit_scales(std::int64_t count, cudaStream_t stream) {
  if (count <= unit_count_) return unit_scales_.back();
  refuse_inside_capture(stream, "growing the scaled GEMM's vector of unit scales");
  std::vector<float> host(static_cast<std::size_t>(kUnitOffset + count), 1.0f);
  for (std::int64_t i = 0; i < kUnitOffset; ++i) host[static_cast<std::size_t>(i)] = 0.0f;
  void* dev = owner_.allocate(host.size() * sizeof(float));
  cudaError_t err = cudaMemcpyAsync(dev, host.data(), host.size() * sizeof(float),
                                    cudaMemcpyHostToDevice, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) {
    cudaFree(dev);
    FUSEBENCH_CUDA(err);
  }
  unit_scales_.push_back(static_cast<float*>(dev));
  unit_count_ = count;
  return unit_scales_.back();
}

}  // namespace fusebench::cuda
