#pragma once
// Where the cuda backend keeps 1x128 activation scales: shared by its quantize kernel
// (cuda_quant.cu, compiled as CUDA 17 without the suite's C++20 headers) and the host code that
// describes its scaled GEMM (cuda_scaled_gemm.hpp, tested without a GPU).
#include <cstdint>

#if defined(__CUDACC__)
#define FUSEBENCH_HOST_DEVICE __host__ __device__
#else
#define FUSEBENCH_HOST_DEVICE
#endif

namespace fusebench::cuda {

// Where the cuda backend's quantize writes the scale of row r, 128-column group g of an [rows, K]
// activation with 1x128 groups: cuBLASLt's VEC128_32F layout, group-major (the ceil(K/128)
// groups one after the other, each the `rows` rows' scales contiguous: stride 1 along M, `rows`
// along K, as PyTorch's scaled_mm hands cuBLASLt DeepSeek-style 1x128 scales). Per-token scales
// (one group) are the same [rows] vector either way. Only the cuda backend's own scaled GEMM
// reads these scales (the host reference quantizes x itself), so this is the backend's layout,
// not QuantMat's row-major [rows, groups].
FUSEBENCH_HOST_DEVICE constexpr std::int64_t group_scale_index(std::int64_t r, std::int64_t g,
                                                               std::int64_t rows) {
  return g * rows + r;
}

}  // namespace fusebench::cuda
