#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "cuda_quant.hpp"

namespace fusebench::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kFp8Max = 448.0f;
constexpr std::int64_t kGroup = 128;

template <class T>
__device__ float load(const T* p) {
  return static_cast<float>(*p);
}
template <>
__device__ float load(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}
template <>
__device__ float load(const __half* p) {
  return __half2float(*p);
}

// fusebench::dynamic_scale: amax / 448 in fp32, never below the smallest denormal, 1 for amax 0.
__device__ float dynamic_scale(float amax) {
  if (!(amax > 0.0f)) return 1.0f;
  return fmaxf(amax / kFp8Max, 1.40129846e-45f);
}

__device__ std::uint8_t code_of(float x, float scale) {
  return static_cast<std::uint8_t>(
      __nv_cvt_float_to_fp8(__fdiv_rn(x, scale), __NV_SATFINITE, __NV_E4M3));
}

// The block's max of v (every thread gets it); blockDim.x a multiple of 32, at most 1024.
__device__ float block_max(float v) {
  __shared__ float warp_max[32];
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // warp_max of an earlier call is read before it is overwritten
  if (lane == 0) warp_max[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? warp_max[lane] : 0.0f;
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <class T>
__global__ void quantize_static_kernel(const T* x, std::int64_t ld_x, std::uint8_t* codes,
                                       std::int64_t ld_codes, std::int64_t rows, std::int64_t cols,
                                       const float* scales) {
  const float scale = scales[0];
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    for (std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         c < cols; c += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
      codes[r * ld_codes + c] = code_of(load(x + r * ld_x + c), scale);
}

// One block per row (grid-stride): for each tile of `group` columns, its amax, its scale, its
// codes. group = cols for per-token scales.
template <class T>
__global__ void quantize_rows_kernel(const T* x, std::int64_t ld_x, std::uint8_t* codes,
                                     std::int64_t ld_codes, std::int64_t rows, std::int64_t cols,
                                     std::int64_t group, float* scales) {
  const std::int64_t groups = (cols + group - 1) / group;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * ld_x;
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::int64_t c0 = g * group, c1 = min(c0 + group, cols);
      float amax = 0.0f;
      for (std::int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x)
        amax = fmaxf(amax, fabsf(load(row + c)));
      const float scale = dynamic_scale(block_max(amax));
      if (threadIdx.x == 0) scales[r * groups + g] = scale;
      for (std::int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x)
        codes[r * ld_codes + c] = code_of(load(row + c), scale);
    }
  }
}

// One cooperative launch: reset the amax, reduce into it (non-negative floats order as their
// bits), wait for the whole grid, then every thread quantizes with the one scale.
template <class T>
__global__ void quantize_tensor_kernel(const T* x, std::int64_t ld_x, std::uint8_t* codes,
                                       std::int64_t ld_codes, std::int64_t rows, std::int64_t cols,
                                       float* scales, unsigned* amax_bits) {
  namespace cg = cooperative_groups;
  cg::grid_group grid = cg::this_grid();
  if (grid.thread_rank() == 0) *amax_bits = 0u;
  grid.sync();
  const std::int64_t total = rows * cols, stride = static_cast<std::int64_t>(grid.size());
  float amax = 0.0f;
  for (std::int64_t i = grid.thread_rank(); i < total; i += stride)
    amax = fmaxf(amax, fabsf(load(x + (i / cols) * ld_x + i % cols)));
  amax = block_max(amax);
  if (threadIdx.x == 0) atomicMax(amax_bits, __float_as_uint(amax));
  grid.sync();
  const float scale = dynamic_scale(__uint_as_float(*amax_bits));
  if (grid.thread_rank() == 0) scales[0] = scale;
  for (std::int64_t i = grid.thread_rank(); i < total; i += stride) {
    const std::int64_t r = i / cols, c = i % cols;
    codes[r * ld_codes + c] = code_of(load(x + r * ld_x + c), scale);
  }
}

template <class T>
cudaError_t launch(Fp8Quantize mode, const void* xv, std::int64_t ld_x, std::uint8_t* codes,
                   std::int64_t ld_codes, std::int64_t rows, std::int64_t cols, float* scales,
                   unsigned* amax_scratch, cudaStream_t stream) {
  const T* x = static_cast<const T*>(xv);
  (void)cudaGetLastError();  // an earlier, handled error must not be blamed on this launch
  switch (mode) {
    case Fp8Quantize::static_tensor: {
      const dim3 grid(static_cast<unsigned>(std::clamp<std::int64_t>(cols / kThreads + 1, 1, 1024)),
                      static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, 65535)));
      quantize_static_kernel<T>
          <<<grid, kThreads, 0, stream>>>(x, ld_x, codes, ld_codes, rows, cols, scales);
      break;
    }
    case Fp8Quantize::dynamic_row:
    case Fp8Quantize::dynamic_group128: {
      const std::int64_t group = mode == Fp8Quantize::dynamic_row ? cols : kGroup;
      const unsigned blocks = static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, 65535));
      quantize_rows_kernel<T>
          <<<blocks, mode == Fp8Quantize::dynamic_row ? kThreads : 128, 0, stream>>>(
              x, ld_x, codes, ld_codes, rows, cols, group, scales);
      break;
    }
    case Fp8Quantize::dynamic_tensor: {
      // As many blocks as can be resident at once (a cooperative launch's limit), at most one
      // per kThreads elements.
      int device = 0, sms = 0, per_sm = 0;
      if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
      if (const cudaError_t e =
              cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
          e != cudaSuccess)
        return e;
      if (const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
              &per_sm, quantize_tensor_kernel<T>, kThreads, 0);
          e != cudaSuccess)
        return e;
      const std::int64_t wanted = (rows * cols + kThreads - 1) / kThreads;
      const dim3 grid(static_cast<unsigned>(
          std::clamp<std::int64_t>(wanted, 1, static_cast<std::int64_t>(sms) * per_sm)));
      void* args[] = {&x, &ld_x, &codes, &ld_codes, &rows, &cols, &scales, &amax_scratch};
      return cudaLaunchCooperativeKernel(reinterpret_cast<void*>(quantize_tensor_kernel<T>), grid,
                                         dim3(kThreads), args, 0, stream);
    }
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_quantize_fp8(Fp8Quantize mode, const void* x, std::int64_t ld_x, DType dtype,
                                std::uint8_t* codes, std::int64_t ld_codes, std::int64_t rows,
                                std::int64_t cols, float* scales, unsigned* amax_scratch,
                                cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  switch (dtype) {
    case DType::bf16:
      return launch<__nv_bfloat16>(mode, x, ld_x, codes, ld_codes, rows, cols, scales, amax_scratch,
                                   stream);
    case DType::f16:
      return launch<__half>(mode, x, ld_x, codes, ld_codes, rows, cols, scales, amax_scratch,
                            stream);
    case DType::f32:
      return launch<float>(mode, x, ld_x, codes, ld_codes, rows, cols, scales, amax_scratch,
                           stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace fusebench::cuda
