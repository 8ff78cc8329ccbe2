#pragma once
// The cuda backend's scaled GEMM as data (docs/quant.md, "On the GPU"): which cuBLASLt call runs
// a quantized pair, with which scale mode on each operand, in how many launches, where its scales
// lie, and which calls it refuses and why. Host code, compiled in every build, so a machine
// without a GPU checks what a GPU run will ask of cuBLASLt (tests/test_quant_plans.cpp); the
// cuda backend (cuda_lt_scaled.cpp, cuda_quant.cu) follows it.
//
// Row-major y[M, N] = x[M, K] w[N, K]^T runs as column-major y^T = w x^T in the TN layout (the
// one cuBLASLt's fp8 and int8 kernels take): cuBLASLt's A is w (transposed), its B is x, its m
// our N and its n our M.
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cuda_scale_layout.hpp"  // group_scale_index: x's 1x128 scales, group-major
#include "fusebench/plan.hpp"
#include "fusebench/quant.hpp"

namespace fusebench::cuda {

// cuBLASLt's cublasLtMatmulMatrixScale_t, by value (cuda_lt_scaled.cpp static_asserts them), and
// `none` where the scales are not cuBLASLt's to apply (int8: our dequantize kernel applies them).
enum class LtScaleMode : std::int32_t {
  none = -1,
  scalar_32f = 0,      // CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F: one scale
  outer_vec_32f = 3,   // OUTER_VEC_32F: one per row of the operand (A: N, B: M)
  vec128_32f = 4,      // VEC128_32F: one per 128 elements along K (x's 1x128 groups)
  blk128x128_32f = 5,  // BLK128x128_32F: one per 128x128 block (w's blocks)
};
std::string_view to_string(LtScaleMode mode);  // "SCALAR_32F", ..., "none"

// Which operand's one per-tensor scale cuBLASLt reads as alpha (a device pointer) while that
// operand's OUTER_VEC_32F scales are a vector of ones: how a per-tensor scale meets a per-row one.
enum class AlphaScale { none, w, x };
std::string_view to_string(AlphaScale from);  // "none", "w", "x"

struct ScaledGemmCall {
  // fp8: one cublasLtMatmul (e4m3 x e4m3, fp32 accumulation, the scales applied inside it).
  // int8: cublasLtMatmul (s8 x s8 -> s32, CUBLAS_COMPUTE_32I) into an int32 accumulator, then
  // our dequantize kernel (acc * x's row scale * w's row scale -> y's dtype).
  LtScaleMode a = LtScaleMode::none;  // w's scales
  LtScaleMode b = LtScaleMode::none;  // x's scales
  // cuBLASLt's "outer vector scaling" takes OUTER_VEC_32F on both A and B (cublasLt.h: vectors of
  // M and N elements); PyTorch's scaled_mm sends only tensorwise x tensorwise or rowwise x
  // rowwise. So a per-tensor scale paired with a per-row one is never sent as SCALAR_32F beside
  // OUTER_VEC_32F: its operand gets OUTER_VEC_32F over a vector of ones (the backend's, never
  // rewritten) and its scale is the GEMM's alpha, read from the device (CUBLASLT_POINTER_MODE_
  // DEVICE): y = alpha * (a_vec[i] * b_vec[j]) * acc, the same product as scalar * vector.
  AlphaScale alpha = AlphaScale::none;
  int launches = 1;     // 2 for int8 (scaled_gemm_launches in cost_model.hpp)
  std::string refusal;  // why this call cannot run on cuda; "" when it can
};

// The operands' shapes and leading dimensions (elements), and the bytes of one element of y.
struct ScaledGemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t ld_x = 0, ld_w = 0, ld_y = 0;
  std::int64_t y_elem_bytes = 2;
};

// The call for x [m, k] (codes, scales of kind `x`) times w [n, k]^T (kind `w`) into y [m, n].
// Refused, naming the rule and the numbers:
//  - int8 with 128x128 weight blocks or 1x128 groups (cuBLASLt's int8 matmul applies no scales
//    along K; a K-blocked int8 GEMM is not written);
//  - int8 where cuBLASLt's IMMA rules fail: n (its m) and k multiples of 4, ld_x, ld_w, ld_y
//    multiples of 4 (cublasLtMatmul's "regular data ordering" int8 requirements);
//  - fp8 where its tensor-core rules fail: K a multiple of 16 and every leading dimension a
//    multiple of 16 bytes (cublasLtMatmul's FP8 requirements; PyTorch's _scaled_mm checks K % 16
//    before calling it), so an odd TP shard is refused here, not inside cuBLASLt;
//  - fp8 128x128 weight blocks whose scale rows cuBLASLt would read at another stride than ours:
//    BLK128x128_32F pads each block row's ceil(k/128) scales to a multiple of 4; our grid
//    ([ceil(n/128), ceil(k/128)], row-major) matches it when ceil(k/128) % 4 == 0 or there is one
//    block row;
//  - fp8 block scaling (VEC128_32F / BLK128x128_32F) where M or N is not a multiple of 4 (the
//    cuBLAS documentation's block-scaling requirement; decode's 1 token and 37 break it): the
//    token rows are not padded (the plan's codes, scales and y are M rows), so it is refused;
//  - a pair of kinds cuBLASLt has no mode for (block weights with other than 1x128 groups).
ScaledGemmCall scaled_gemm_call(QuantDType dtype, ScaleKind x, ScaleKind w,
                                const ScaledGemmShape& shape);

// Every scaled GEMM step of `plan` as the cuda backend will ask for it (leading dimensions: each
// view's buffer's columns; y in the plan's dtype), with its step's label.
struct PlanScaledGemm {
  std::string label;
  ScaledGemmCall call;
};
std::vector<PlanScaledGemm> plan_scaled_gemm_calls(const Plan& plan);
// The first refusal among them, naming its step ("qkv_proj: fp8 with ..."); "" when all run. A
// GPU sweep leaves such an entry out up front with this reason, rather than failing it on the
// device.
std::string plan_refusal(const Plan& plan);

// Byte alignment (a power of two, at most 256) of an operand starting at `p`: cuBLASLt's
// heuristic assumes 256 unless told (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES), and views
// (a column slice of a fused output, a row window of a codes buffer) can be less aligned. With a
// batch stride, the alignment every member shares.
std::uint32_t lt_alignment(const void* p, std::int64_t stride_elems, std::size_t elem_bytes);

// The alignments a quantized matmul's heuristic is told (A = w codes, B = x codes, C = D = y),
// and where they go: CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES (5, 6, 7, 8 in
// cublasLt.h; cuda_lt_scaled.cpp static_asserts them).
struct LtAlignments {
  std::uint32_t a = 256, b = 256, c = 256, d = 256;
  auto operator<=>(const LtAlignments&) const = default;
};
LtAlignments quant_alignments(const void* w_codes, const void* x_codes, const void* y,
                              std::size_t y_elem_bytes);
enum class LtPreference : std::int32_t {
  max_workspace_bytes = 1,  // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
  min_alignment_a = 5,
  min_alignment_b = 6,
  min_alignment_c = 7,
  min_alignment_d = 8,
};
// The preferences a quantized plan sets, in order: the workspace, then the four alignments.
std::vector<std::pair<LtPreference, std::uint64_t>> quant_preferences(
    const LtAlignments& align, std::uint64_t workspace_bytes);

// What a quantized matmul plan (descriptor, layouts, algorithm) depends on: two calls with the
// same key may share one plan. The alignments are in it: an algorithm chosen for 256-byte
// aligned operands may not run on a less aligned view of the same shape.
struct QuantPlanKey {
  ScaledGemmShape shape_key{};  // m, n, k, the leading dimensions, y's element bytes
  int y_dtype = 0;
  int codes = 0;  // QuantDType
  LtScaleMode a = LtScaleMode::none, b = LtScaleMode::none;
  AlphaScale alpha = AlphaScale::none;
  LtAlignments align{};
  auto operator<=>(const QuantPlanKey& o) const {
    const auto tie = [](const QuantPlanKey& k) {
      const ScaledGemmShape& s = k.shape_key;
      return std::make_tuple(s.m, s.n, s.k, s.ld_x, s.ld_w, s.ld_y, s.y_elem_bytes, k.y_dtype,
                             k.codes, static_cast<int>(k.a), static_cast<int>(k.b),
                             static_cast<int>(k.alpha), k.align);
    };
    return tie(*this) <=> tie(o);
  }
  bool operator==(const QuantPlanKey& o) const { return (*this <=> o) == 0; }
};

}  // namespace fusebench::cuda
