#pragma once
// Building blocks of the CPU backend's vectorized elementwise kernels (cpu_elementwise.cpp,
// cpu_quantize.cpp): runs of a matrix's elements to fp32 and back, a branch-free exp, the
// instruction-set variants of a kernel and the OpenMP tiling of a matrix. Header-only and
// always inlined, so that each kernel is vectorized inside its own AVX-512/AVX2/x86-64 function.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "fusebench/backend.hpp"

#define FB_INLINE [[gnu::always_inline]] inline
// `omp simd` where GCC needs it to vectorize a loop of selects (the code encoders) or a float
// reduction; clang vectorizes those itself and warns when told to.
#if defined(_OPENMP) && !defined(__clang__)
#define FB_SIMD _Pragma("omp simd")
// (a reduction names its variable: `sum` and `m` by convention)
#define FB_SIMD_SUM _Pragma("omp simd reduction(+ : sum)")
#define FB_SIMD_MAX _Pragma("omp simd reduction(max : m)")
#else
#define FB_SIMD
#define FB_SIMD_SUM
#define FB_SIMD_MAX
#endif
// What each variant may use; picked at run time by what the CPU offers (cpu::vector_isa()).
#define FB_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
#define FB_AVX2 __attribute__((target("avx2,fma")))

namespace fusebench::cpu {

enum class VectorIsa { x86_64, avx2, avx512 };
VectorIsa vector_isa();  // cpu_elementwise.cpp

// Elements per chunk: a kernel converts a chunk of each operand to fp32 on the stack, computes
// and converts back, so its working set stays in L1.
inline constexpr std::int64_t kChunk = 256;

FB_INLINE std::byte* element(const MatRef& m, std::int64_t r, std::int64_t c) {
  return static_cast<std::byte*>(m.data) +
         static_cast<std::size_t>(r * m.ld + c) * dtype_size(m.dtype);
}

// n elements from p, `stride` elements apart, into out as fp32.
FB_INLINE void to_float(const std::byte* p, DType dtype, std::int64_t stride, std::int64_t n,
                        float* out) {
  if (dtype == DType::f32) {
    const auto* s = reinterpret_cast<const float*>(p);
    for (std::int64_t i = 0; i < n; ++i) out[i] = s[i * stride];
  } else if (dtype == DType::bf16) {
    const auto* s = reinterpret_cast<const std::uint16_t*>(p);
    for (std::int64_t i = 0; i < n; ++i)
      out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(s[i * stride]) << 16);
  } else {
    const auto* s = reinterpret_cast<const std::uint16_t*>(p);
    for (std::int64_t i = 0; i < n; ++i) out[i] = f16_to_float(s[i * stride]);
  }
}

// float_to_bf16 (round to nearest even, NaN kept quiet) without a branch.
FB_INLINE std::uint16_t bf16_bits(float v) {
  const auto bits = std::bit_cast<std::uint32_t>(v);
  const std::uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const std::uint32_t nan = (bits >> 16) | 0x40u;
  return static_cast<std::uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

// n fp32 values into p (contiguous), rounded to dtype.
FB_INLINE void from_float(const float* in, std::int64_t n, std::byte* p, DType dtype) {
  if (dtype == DType::f32) {
    std::memcpy(p, in, static_cast<std::size_t>(n) * sizeof(float));
  } else if (dtype == DType::bf16) {
    auto* d = reinterpret_cast<std::uint16_t*>(p);
    for (std::int64_t i = 0; i < n; ++i) d[i] = bf16_bits(in[i]);
  } else {
    auto* d = reinterpret_cast<std::uint16_t*>(p);
    for (std::int64_t i = 0; i < n; ++i) d[i] = float_to_f16(in[i]);
  }
}

// e^x to about 1 ulp over the clamped range (Cephes' expf polynomial), with no branch or libm
// call, so a loop of it vectorizes; beyond +-88 it saturates (e^88 = 1.7e38) rather than
// overflowing, which every activation here tolerates.
FB_INLINE float fast_exp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // Round x / ln 2 to the nearest integer with the 1.5 * 2^23 trick (no rounding call).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const auto scale =
      std::bit_cast<float>(static_cast<std::uint32_t>(static_cast<int>(n) + 127) << 23);
  return y * scale;
}

// 1 + erf(x) to 1.5e-7 absolute (Abramowitz and Stegun 7.1.26, on erfc(|x|) so that the
// negative tail, where 1 + erf(x) is small, does not cancel), branch-free.
FB_INLINE float one_plus_erf(float x) {
  const float a = std::min(std::fabs(x), 9.0f);
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  const float poly =
      t * (0.254829592f +
           t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  const float erfc = poly * fast_exp(-a * a);  // erfc(|x|)
  return x < 0 ? erfc : 2.0f - erfc;
}

// fp32 -> fp8 e4m3fn code, saturating, round half to even: bit for bit fp8_e4m3fn_from_float
// (quant.cpp's rule on the double's bits, here on the float's), without a branch.
FB_INLINE std::uint8_t fp8_code(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 24) & 0x80u, magnitude = bits & 0x7fffffffu;
  const std::int32_t exponent = static_cast<std::int32_t>(magnitude >> 23) - 127;
  const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  // 4 significant bits for a normal (binade >= 2^-6), fewer below, where the step is 2^-9; from
  // 25 on nothing is kept and what is dropped is under half a step, so the shift stops there.
  std::int32_t shift = exponent >= -6 ? 20 : 14 - exponent;
  shift = shift < 25 ? shift : 25;
  std::uint32_t kept = significand >> shift;
  const std::uint32_t dropped = significand & ((1u << shift) - 1u), half = 1u << (shift - 1);
  // (selects of unsigned values, not bools: GCC vectorizes these)
  kept += (dropped > half ? 1u : 0u) | (dropped == half ? (kept & 1u) : 0u);
  const std::uint32_t code =
      exponent >= -6 ? (static_cast<std::uint32_t>(exponent + 7) << 3) + (kept - 8u) : kept;
  const std::uint32_t out = magnitude > 0x7f800000u    ? 0x7fu  // NaN
                            : magnitude >= 0x43e00000u ? 0x7eu  // |x| >= 448: 448
                                                       : code;
  return static_cast<std::uint8_t>(sign | out);
}

// The int8 code of the quotient q as int8_from_double rounds it: NaN to 0, clamped to +-127,
// half to even (nearbyint in the default rounding mode; one instruction with SSE4.1 and up).
FB_INLINE std::uint8_t int8_code(float q) {
  q = q == q ? q : 0.0f;
  q = std::min(std::max(q, -127.0f), 127.0f);
  return static_cast<std::uint8_t>(static_cast<std::int8_t>(static_cast<int>(std::nearbyint(q))));
}

// A code's value as fp32 (exact for both dtypes): decode_code without a table, so it vectorizes.
FB_INLINE float fp8_value(std::uint8_t code) {
  const std::uint32_t c = code, e = (c >> 3) & 15u, mantissa = c & 7u;
  const float normal = std::bit_cast<float>(((e + 120u) << 23) | (mantissa << 20));
  const float subnormal = static_cast<float>(mantissa) * (1.0f / 512.0f);
  float v = e == 0 ? subnormal : normal;
  v = (e == 15u && mantissa == 7u) ? std::numeric_limits<float>::quiet_NaN() : v;
  return (c & 0x80u) != 0 ? -v : v;
}

// Tiles of a [rows, cols] matrix, `cols_per_tile` wide, shared out over `threads` OpenMP threads
// (one thread for small ones, where forking costs more than it saves). tile(r, c0, c1).
// `work`: the elements the whole call touches, where the tiles do not say (a scatter's).
template <class Tile>
void for_tiles(std::int64_t rows, std::int64_t cols, std::int64_t cols_per_tile, int threads,
               std::int64_t work, Tile&& tile) {
  const std::int64_t per_row =
      std::max<std::int64_t>(1, (cols + cols_per_tile - 1) / cols_per_tile);
  const std::int64_t tiles = rows * per_row;
  [[maybe_unused]] const int team =
      work < 16384 ? 1 : static_cast<int>(std::clamp<std::int64_t>(threads, 1, tiles));
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(team) if (team > 1)
#endif
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::int64_t r = t / per_row, c0 = (t % per_row) * cols_per_tile;
    tile(r, c0, std::min(cols, c0 + cols_per_tile));
  }
}

}  // namespace fusebench::cpu
