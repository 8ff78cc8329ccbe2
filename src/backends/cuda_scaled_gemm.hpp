#pragma once
// The cuda backend's scaled GEMM as data (docs/quant.md, "On the GPU"): which cuBLASLt call runs
// a quantized pair, with which scale mode on each operand, in how many launches, where its scales
// lie, and which calls it refuses and why. Host code, compiled in every build, so a machine
// without a GPU checks what a GPU run will ask of cuBLASLt (tests/test_quant_plans.cpp); the
// cuda backend (cuda_backend.cpp, cuda_quant.cu) follows it.
//
// Row-major y[M, N] = x[M, K] w[N, K]^T runs as column-major y^T = w x^T in the TN layout (the
// one cuBLASLt's fp8 and int8 kernels take): cuBLASLt's A is w (transposed), its B is x.
#include <cstdint>
#include <string>
#include <string_view>

#include "backends/cuda_scale_layout.hpp"  // group_scale_index: x's 1x128 scales, group-major
#include "fusebench/quant.hpp"

namespace fusebench::cuda {

// cuBLASLt's cublasLtMatmulMatrixScale_t, by value (cuda_backend.cpp static_asserts them), and
// `none` where the scales are not cuBLASLt's to apply (int8: our dequantize kernel applies them).
enum class LtScaleMode : std::int32_t {
  none = -1,
  scalar_32f = 0,      // CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F: one scale
  outer_vec_32f = 3,   // OUTER_VEC_32F: one per row of the operand (A: N, B: M)
  vec128_32f = 4,      // VEC128_32F: one per 128 elements along K (x's 1x128 groups)
  blk128x128_32f = 5,  // BLK128x128_32F: one per 128x128 block (w's blocks)
};
std::string_view to_string(LtScaleMode mode);  // "SCALAR_32F", ..., "none"

struct ScaledGemmCall {
  // fp8: one cublasLtMatmul (e4m3 x e4m3, fp32 accumulation, the scales applied inside it).
  // int8: cublasLtMatmul (s8 x s8 -> s32, CUBLAS_COMPUTE_32I) into an int32 accumulator, then
  // our dequantize kernel (acc * x's row scale * w's row scale -> y's dtype).
  LtScaleMode a = LtScaleMode::none;  // w's scales
  LtScaleMode b = LtScaleMode::none;  // x's scales
  int launches = 1;                   // 2 for int8 (scaled_gemm_launches in cost_model.hpp)
  std::string refusal;                // why this call cannot run on cuda; "" when it can
};

// The call for x [m, k] (codes row stride ld_x, scales of kind `x`) times w [n, k]^T (ld_w,
// kind `w`), y [m, n] with row stride ld_y. Refused, naming the rule and the numbers:
//  - int8 with 128x128 weight blocks or 1x128 groups (cuBLASLt's int8 matmul applies no scales
//    along K; a K-blocked int8 GEMM is not written);
//  - int8 where cuBLASLt's IMMA rules fail: n (its m) and k multiples of 4, ld_x, ld_w, ld_y
//    multiples of 4 (cublasLtMatmul's "regular data ordering" int8 requirements);
//  - fp8 128x128 weight blocks whose scale rows cuBLASLt would read at another stride than ours:
//    BLK128x128_32F pads each block row's ceil(k/128) scales to a multiple of 4; our grid
//    ([ceil(n/128), ceil(k/128)], row-major) matches it when ceil(k/128) % 4 == 0 or there is one
//    block row;
//  - a pair of kinds cuBLASLt has no mode for (block weights with other than 1x128 groups).
ScaledGemmCall scaled_gemm_call(QuantDType dtype, ScaleKind x, ScaleKind w, std::int64_t m,
                                std::int64_t n, std::int64_t k, std::int64_t ld_x,
                                std::int64_t ld_w, std::int64_t ld_y);

}  // namespace fusebench::cuda
