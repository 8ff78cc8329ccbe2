#pragma once
// Host entry points of the quantize and dequantize kernels (cuda_quant.cu). Quantize: the codes
// and scales fusebench::quantize() makes on the host, bit for bit: x / scale correctly rounded
// in fp32, then fp8 e4m3 with round-to-nearest-even and saturation (cvt.rn.satfinite.e4m3x2),
// or int8 with round-half-even clamped to [-127, 127] (NaN to 0), as int8_from_double.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda_scale_layout.hpp"
#include "fusebench/dtype.hpp"

namespace fusebench::cuda {

// The codes (fusebench::QuantDType, which this CUDA 17 header cannot include).
enum class Codes { fp8_e4m3, int8 };

enum class Quantize {
  static_tensor,     // one given scale (scales[0], read)
  dynamic_tensor,    // one scale from the whole matrix's amax: one cooperative launch
  dynamic_row,       // one scale per row (per token): scales [rows]
  dynamic_group128,  // one scale per 1x128 tile of a row, group-major: scales[g * rows + r]
                     // (cuda_scale_layout.hpp, group_scale_index: cuBLASLt's VEC128_32F)
};

// `amax_scratch`: one device word the dynamic per-tensor kernel reduces into. `codes_of`: fp8
// e4m3 codes (dynamic scale amax / 448) or int8 (amax / 127).
cudaError_t launch_quantize(Codes codes_of, Quantize mode, const void* x, std::int64_t ld_x,
                            DType dtype, std::uint8_t* codes, std::int64_t ld_codes,
                            std::int64_t rows, std::int64_t cols, float* scales,
                            unsigned* amax_scratch, cudaStream_t stream);

// int8's second launch: y[r, c] = float(acc[r, c]) * (x_scale(r) * w_scale(c)) in fp32, stored
// in y's dtype (the CPU backend's arithmetic). x_scale(r) = x_scales[x_per_row ? r : 0],
// w_scale(c) = w_scales[w_per_row ? c : 0] (w's rows are y's columns).
cudaError_t launch_dequantize_int32(const std::int32_t* acc, std::int64_t ld_acc,
                                    const float* x_scales, bool x_per_row, const float* w_scales,
                                    bool w_per_row, void* y, std::int64_t ld_y, std::int64_t rows,
                                    std::int64_t cols, DType dtype, cudaStream_t stream);

}  // namespace fusebench::cuda
