#include "backends/cuda_scaled_gemm.hpp"

namespace fusebench::cuda {
namespace {

std::string shape_text(std::int64_t m, std::int64_t n, std::int64_t k) {
  return "M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k);
}

}  // namespace

std::string_view to_string(LtScaleMode mode) {
  switch (mode) {
    case LtScaleMode::none:
      return "none";
    case LtScaleMode::scalar_32f:
      return "SCALAR_32F";
    case LtScaleMode::outer_vec_32f:
      return "OUTER_VEC_32F";
    case LtScaleMode::vec128_32f:
      return "VEC128_32F";
    case LtScaleMode::blk128x128_32f:
      return "BLK128x128_32F";
  }
  return "?";
}

ScaledGemmCall scaled_gemm_call(QuantDType dtype, ScaleKind x, ScaleKind w, std::int64_t m,
                                std::int64_t n, std::int64_t k, std::int64_t ld_x,
                                std::int64_t ld_w, std::int64_t ld_y) {
  ScaledGemmCall call;  // strings only when refusing: the cuda backend asks on every call
  const auto pair = [&] {
    return "x " + std::string(to_string(x)) + ", w " + std::string(to_string(w));
  };
  const bool outer_x = x == ScaleKind::tensor || x == ScaleKind::row;
  const bool outer_w = w == ScaleKind::tensor || w == ScaleKind::row;
  if (dtype == QuantDType::int8) {
    call.launches = 2;
    if (!outer_x || !outer_w) {
      call.refusal = "int8 on cuda with " + pair() +
                     " scales: cuBLASLt's int8 matmul applies no scales along K, and a K-blocked "
                     "int8 GEMM (one per 128-wide K block, each partial sum scaled) is not "
                     "written; int8 runs per tensor and per channel/token";
      return call;
    }
    // cublasLtMatmul's int8 (IMMA) kernels in the regular data ordering: cuBLASLt's m (our N)
    // and k multiples of 4, every leading dimension a multiple of 4.
    if (n % 4 != 0 || k % 4 != 0 || ld_x % 4 != 0 || ld_w % 4 != 0 || ld_y % 4 != 0) {
      call.refusal = "int8 on cuda at " + shape_text(m, n, k) + " (ld x=" + std::to_string(ld_x) +
                     " w=" + std::to_string(ld_w) + " y=" + std::to_string(ld_y) +
                     "): cuBLASLt's int8 matmul needs N, K and every leading dimension a "
                     "multiple of 4";
    }
    return call;
  }
  if (outer_x && outer_w) {
    call.a = w == ScaleKind::tensor ? LtScaleMode::scalar_32f : LtScaleMode::outer_vec_32f;
    call.b = x == ScaleKind::tensor ? LtScaleMode::scalar_32f : LtScaleMode::outer_vec_32f;
    return call;
  }
  if (x != ScaleKind::group || w != ScaleKind::block) {
    call.refusal = "fp8 on cuda with " + pair() +
                   " scales: cuBLASLt has no scale mode pair for them (128x128 weight blocks "
                   "take 1x128 activation groups)";
    return call;
  }
  call.a = LtScaleMode::blk128x128_32f;
  call.b = LtScaleMode::vec128_32f;
  const std::int64_t block_rows = (n + 127) / 128, block_cols = (k + 127) / 128;
  if (block_rows > 1 && block_cols % 4 != 0) {
    call.refusal =
        "fp8 with 128x128 weight blocks on cuda at " + shape_text(m, n, k) +
        ": cuBLASLt's BLK128x128_32F reads each block row's scales at a stride of ceil(K/128) "
        "rounded up to a multiple of 4 (" +
        std::to_string((block_cols + 3) / 4 * 4) + "), our scale grid has " +
        std::to_string(block_cols) + " per row; K a multiple of 512 runs";
  }
  return call;
}

}  // namespace fusebench::cuda
