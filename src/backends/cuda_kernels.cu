#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_kernels.hpp"

namespace fusebench::cuda {
namespace {

template <class T>
__device__ float to_float(T v) {
  return static_cast<float>(v);
}
template <>
__device__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ float to_float(__half v) {
  return __half2float(v);
}

template <class T>
__device__ T from_float(float v) {
  return static_cast<T>(v);
}
template <>
__device__ __nv_bfloat16 from_float(float v) {
  return __float2bfloat16(v);
}
template <>
__device__ __half from_float(float v) {
  return __float2half(v);
}

// Grid-stride loop: one launch whatever the size, like vLLM's act_and_mul kernel.
template <class T>
__global__ void silu_mul_kernel(const T* gate, std::int64_t ld_gate, const T* up,
                                std::int64_t ld_up, T* out, std::int64_t ld_out, std::int64_t rows,
                                std::int64_t cols) {
  const std::int64_t total = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols, c = i % cols;
    const float g = to_float(gate[r * ld_gate + c]);
    const float u = to_float(up[r * ld_up + c]);
    out[r * ld_out + c] = from_float<T>(g / (1.0f + __expf(-g)) * u);
  }
}

template <class T>
cudaError_t launch(const void* gate, std::int64_t ld_gate, const void* up, std::int64_t ld_up,
                   void* out, std::int64_t ld_out, std::int64_t rows, std::int64_t cols,
                   cudaStream_t stream) {
  constexpr int kThreads = 256;
  const std::int64_t blocks_needed = (rows * cols + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(blocks_needed < 65535 ? blocks_needed : 65535);
  const int grid = blocks > 0 ? blocks : 1;
  // clang-format 14 splits "<T><<<" apart:
  // clang-format off
  silu_mul_kernel<T><<<grid, kThreads, 0, stream>>>(
      static_cast<const T*>(gate), ld_gate, static_cast<const T*>(up), ld_up, static_cast<T*>(out),
      ld_out, rows, cols);
  // clang-format on
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_silu_mul(const void* gate, std::int64_t ld_gate, const void* up,
                            std::int64_t ld_up, void* out, std::int64_t ld_out, std::int64_t rows,
                            std::int64_t cols, DType dtype, cudaStream_t stream) {
  switch (dtype) {
    case DType::bf16:
      return launch<__nv_bfloat16>(gate, ld_gate, up, ld_up, out, ld_out, rows, cols, stream);
    case DType::f16:
      return launch<__half>(gate, ld_gate, up, ld_up, out, ld_out, rows, cols, stream);
    case DType::f32:
      return launch<float>(gate, ld_gate, up, ld_up, out, ld_out, rows, cols, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace fusebench::cuda
