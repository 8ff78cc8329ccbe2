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
constexpr float kInt8Max = 127.0f;
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

// The code type: fp8 e4m3 or int8 (a template parameter, so each kernel has one rounding).
struct Fp8 {
  static constexpr float kMax = kFp8Max;
  // cvt.rn.satfinite: round to nearest even, beyond +-448 (infinities too) to +-448, NaN to NaN.
  __device__ static std::uint8_t code(float q) {
    return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3));
  }
};
struct Int8 {
  static constexpr float kMax = kInt8Max;
  // fusebench::int8_from_double on an fp32 quotient: NaN to 0, clamped to [-127, 127], then round
  // half to even (__float2int_rn); the clamp is exact and commutes with the rounding (127 is an
  // integer), so this is the host's code bit for bit. The byte is the two's complement.
  __device__ static std::uint8_t code(float q) {
    if (isnan(q)) return 0;
    const int v = __float2int_rn(fminf(fmaxf(q, -kInt8Max), kInt8Max));
    return static_cast<std::uint8_t>(static_cast<std::int8_t>(v));
  }
};

// fusebench::dynamic_scale: amax / qmax in fp32, never below the smallest denormal, 1 for amax 0.
template <class Q>
__device__ float dynamic_scale(float amax) {
  if (!(amax > 0.0f)) return 1.0f;
  return fmaxf(amax / Q::kMax, 1.40129846e-45f);
}

// x / scale correctly rounded in fp32 (as the host's float division), then the code.
template <class Q>
__device__ std::uint8_t code_of(float x, float scale) {
  return Q::code(__fdiv_rn(x, scale));
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

template <class Q, class T>
__global__ void quantize_static_kernel(const T* x, std::int64_t ld_x, std::uint8_t* codes,
                                       std::int64_t ld_codes, std::int64_t rows, std::int64_t cols,
                                       const float* scales) {
  const float scale = scales[0];
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    for (std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         c < cols; c += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
      codes[r * ld_codes + c] = code_of<Q>(load(x + r * ld_x + c), scale);
}

// One block per row (grid-stride): for each tile of `group` columns, its amax, its scale, its
// codes. group = cols for per-token scales. Group g of row r's scale goes to g * rows + r
// (group_scale_index: group-major, as cuBLASLt's VEC128_32F reads it; one group: scales[r]).
template <class Q, class T>
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
      const float scale = dynamic_scale<Q>(block_max(amax));
      if (threadIdx.x == 0) scales[group_scale_index(r, g, rows)] = scale;
      for (std::int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x)
        codes[r * ld_codes + c] = code_of<Q>(load(row + c), scale);
    }
  }
}

// One cooperative launch: reset the amax, reduce into it (non-negative floats order as their
// bits), wait for the whole grid, then every thread quantizes with the one scale.
template <class Q, class T>
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
  const float scale = dynamic_scale<Q>(__uint_as_float(*amax_bits));
  if (grid.thread_rank() == 0) scales[0] = scale;
  for (std::int64_t i = grid.thread_rank(); i < total; i += stride) {
    const std::int64_t r = i / cols, c = i % cols;
    codes[r * ld_codes + c] = code_of<Q>(load(x + r * ld_x + c), scale);
  }
}

template <class T>
__device__ void store(T* p, float v) {
  *p = static_cast<T>(v);
}
template <>
__device__ void store(__nv_bfloat16* p, float v) {
  *p = __float2bfloat16_rn(v);
}
template <>
__device__ void store(__half* p, float v) {
  *p = __float2half_rn(v);
}

// y = float(acc) * (x scale * w scale), rounded once into y's dtype; a 2D grid-stride loop.
template <class T>
__global__ void dequantize_int32_kernel(const std::int32_t* acc, std::int64_t ld_acc,
                                        const float* x_scales, bool x_per_row,
                                        const float* w_scales, bool w_per_row, T* y,
                                        std::int64_t ld_y, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float sx = x_scales[x_per_row ? r : 0];
    for (std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         c < cols; c += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
      const float sw = w_scales[w_per_row ? c : 0];
      store(y + r * ld_y + c, static_cast<float>(acc[r * ld_acc + c]) * (sx * sw));
    }
  }
}

template <class Q, class T>
cudaError_t launch(Quantize mode, const void* xv, std::int64_t ld_x, std::uint8_t* codes,
                   std::int64_t ld_codes, std::int64_t rows, std::int64_t cols, float* scales,
                   unsigned* amax_scratch, cudaStream_t stream) {
  const T* x = static_cast<const T*>(xv);
  (void)cudaGetLastError();  // an earlier, handled error must not be blamed on this launch
  switch (mode) {
    case Quantize::static_tensor: {
      const dim3 grid(static_cast<unsigned>(std::clamp<std::int64_t>(cols / kThreads + 1, 1, 1024)),
                      static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, 65535)));
      quantize_static_kernel<Q, T>
          <<<grid, kThreads, 0, stream>>>(x, ld_x, codes, ld_codes, rows, cols, scales);
      break;
    }
    case Quantize::dynamic_row:
    case Quantize::dynamic_group128: {
      const std::int64_t group = mode == Quantize::dynamic_row ? cols : kGroup;
      const unsigned blocks = static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, 65535));
      quantize_rows_kernel<Q, T>
          <<<blocks, mode == Quantize::dynamic_row ? kThreads : 128, 0, stream>>>(
              x, ld_x, codes, ld_codes, rows, cols, group, scales);
      break;
    }
    case Quantize::dynamic_tensor: {
      // A cooperative launch starts only when all its blocks can be resident at once. Sized to
      // the whole GPU (every SM's resident limit) it would wait for lane 1's kernels (the
      // overlapped collective, docs/tp.md) to leave, serializing the two lanes; one block per SM
      // (a fraction of that limit) leaves room beside them. Capped too by the
      // resident limit (cudaLaunchCooperativeKernel refuses more) and by one block per kThreads
      // elements. What it does to `overlap` is not measured yet (no GPU run so far).
      int device = 0, sms = 0, per_sm = 0;
      if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
      if (const cudaError_t e =
              cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
          e != cudaSuccess)
        return e;
      if (const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
              &per_sm, quantize_tensor_kernel<Q, T>, kThreads, 0);
          e != cudaSuccess)
        return e;
      const std::int64_t wanted = (rows * cols + kThreads - 1) / kThreads;
      const dim3 grid(static_cast<unsigned>(std::clamp<std::int64_t>(
          wanted, 1, std::max<std::int64_t>(1, std::min<std::int64_t>(sms, sms * per_sm)))));
      void* args[] = {&x, &ld_x, &codes, &ld_codes, &rows, &cols, &scales, &amax_scratch};
      return cudaLaunchCooperativeKernel(reinterpret_cast<void*>(quantize_tensor_kernel<Q, T>),
                                         grid, dim3(kThreads), args, 0, stream);
    }
  }
  return cudaGetLastError();
}

template <class Q>
cudaError_t launch_for(Quantize mode, const void* x, std::int64_t ld_x, DType dtype,
                       std::uint8_t* codes, std::int64_t ld_codes, std::int64_t rows,
                       std::int64_t cols, float* scales, unsigned* amax_scratch,
                       cudaStream_t stream) {
  switch (dtype) {
    case DType::bf16:
      return launch<Q, __nv_bfloat16>(mode, x, ld_x, codes, ld_codes, rows, cols, scales,
                                      amax_scratch, stream);
    case DType::f16:
      return launch<Q, __half>(mode, x, ld_x, codes, ld_codes, rows, cols, scales, amax_scratch,
                               stream);
    case DType::f32:
      return launch<Q, float>(mode, x, ld_x, codes, ld_codes, rows, cols, scales, amax_scratch,
                              stream);
  }
  return cudaErrorInvalidValue;
}

template <class T>
cudaError_t launch_dequantize(const std::int32_t* acc, std::int64_t ld_acc, const float* x_scales,
                              bool x_per_row, const float* w_scales, bool w_per_row, void* y,
                              std::int64_t ld_y, std::int64_t rows, std::int64_t cols,
                              cudaStream_t stream) {
  (void)cudaGetLastError();
  const dim3 grid(static_cast<unsigned>(std::clamp<std::int64_t>(cols / kThreads + 1, 1, 1024)),
                  static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, 65535)));
  dequantize_int32_kernel<T><<<grid, kThreads, 0, stream>>>(
      acc, ld_acc, x_scales, x_per_row, w_scales, w_per_row, static_cast<T*>(y), ld_y, rows, cols);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_quantize(Codes codes_of, Quantize mode, const void* x, std::int64_t ld_x,
                            DType dtype, std::uint8_t* codes, std::int64_t ld_codes,
                            std::int64_t rows, std::int64_t cols, float* scales,
                            unsigned* amax_scratch, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (codes_of == Codes::int8)
    return launch_for<Int8>(mode, x, ld_x, dtype, codes, ld_codes, rows, cols, scales, amax_scratch,
                            stream);
  return launch_for<Fp8>(mode, x, ld_x, dtype, codes, ld_codes, rows, cols, scales, amax_scratch,
                         stream);
}

cudaError_t launch_dequantize_int32(const std::int32_t* acc, std::int64_t ld_acc,
                                    const float* x_scales, bool x_per_row, const float* w_scales,
                                    bool w_per_row, void* y, std::int64_t ld_y, std::int64_t rows,
                                    std::int64_t cols, DType dtype, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  switch (dtype) {
    case DType::bf16:
      return launch_dequantize<__nv_bfloat16>(acc, ld_acc, x_scales, x_per_row, w_scales, w_per_row,
                                              y, ld_y, rows, cols, stream);
    case DType::f16:
      return launch_dequantize<__half>(acc, ld_acc, x_scales, x_per_row, w_scales, w_per_row, y,
                                       ld_y, rows, cols, stream);
    case DType::f32:
      return launch_dequantize<float>(acc, ld_acc, x_scales, x_per_row, w_scales, w_per_row, y,
                                      ld_y, rows, cols, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace fusebench::cuda
