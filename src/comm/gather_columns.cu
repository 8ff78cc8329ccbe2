#include <algorithm>

#include "gather_columns.hpp"

namespace fusebench::comm {
namespace {

// One block row per source row (rank-major), columns grid-strided: one division per row.
template <class T>
__global__ void gather_columns_kernel(const T* stage, T* dst, std::int64_t rows, std::int64_t cols,
                                      std::int64_t ld, std::int64_t ranks) {
  for (std::int64_t i = blockIdx.y; i < rows * ranks; i += gridDim.y) {
    const std::int64_t rank = i / rows, row = i - rank * rows;
    const T* from = stage + i * cols;
    T* to = dst + row * ld + rank * cols;
    for (std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         c < cols; c += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
      to[c] = from[c];
    }
  }
}

template <class T>
cudaError_t launch(const void* stage, void* dst, std::int64_t rows, std::int64_t cols,
                   std::int64_t ld, int ranks, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const dim3 grid(
      static_cast<unsigned>(std::clamp<std::int64_t>((cols + kThreads - 1) / kThreads, 1, 64)),
      static_cast<unsigned>(std::clamp<std::int64_t>(rows * ranks, 1, 65535)));
  (void)cudaGetLastError();  // an earlier, handled error must not be blamed on this launch
  // clang-format off
  gather_columns_kernel<T><<<grid, kThreads, 0, stream>>>(
      static_cast<const T*>(stage), static_cast<T*>(dst), rows, cols, ld, ranks);
  // clang-format on
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_gather_columns(const void* stage, void* dst, std::int64_t rows,
                                  std::int64_t cols, std::int64_t ld, int ranks, std::size_t elem,
                                  cudaStream_t stream) {
  switch (elem) {
    case 2:
      return launch<std::uint16_t>(stage, dst, rows, cols, ld, ranks, stream);
    case 4:
      return launch<std::uint32_t>(stage, dst, rows, cols, ld, ranks, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace fusebench::comm
