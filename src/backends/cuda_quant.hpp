#pragma once
// Host entry points of the FP8 quantize kernels (cuda_quant.cu): the codes and scales
// fusebench::quantize() makes on the host, bit for bit (x / scale correctly rounded in fp32, then
// round-to-nearest-even with saturation to e4m3, as cvt.rn.satfinite.e4m3x2 does).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "fusebench/dtype.hpp"

namespace fusebench::cuda {

enum class Fp8Quantize {
  static_tensor,     // one given scale (scales[0], read)
  dynamic_tensor,    // one scale from the whole matrix's amax: one cooperative launch
  dynamic_row,       // one scale per row (per token)
  dynamic_group128,  // one scale per 1x128 tile of a row: scales [rows, ceil(cols / 128)]
};

// `amax_scratch`: one device word the dynamic per-tensor kernel reduces into.
cudaError_t launch_quantize_fp8(Fp8Quantize mode, const void* x, std::int64_t ld_x, DType dtype,
                                std::uint8_t* codes, std::int64_t ld_codes, std::int64_t rows,
                                std::int64_t cols, float* scales, unsigned* amax_scratch,
                                cudaStream_t stream);

}  // namespace fusebench::cuda
