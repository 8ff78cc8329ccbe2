#include "backends/cpu_elementwise.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "backends/cpu_vector.hpp"
#include "fusebench/cost_model.hpp"

namespace fusebench::cpu {

VectorIsa vector_isa() {
  static const VectorIsa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
      return VectorIsa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VectorIsa::avx2;
    return VectorIsa::x86_64;
  }();
  return isa;
}

std::string elementwise_isa() {
  switch (vector_isa()) {
    case VectorIsa::avx512:
      return "avx512";
    case VectorIsa::avx2:
      return "avx2";
    case VectorIsa::x86_64:
      break;
  }
  return "x86-64";
}

namespace {

// One kernel's tile, compiled once per instruction set: the body is inlined into each.
template <class Tile>
FB_AVX512 void tile_avx512(const Tile& t, std::int64_t r, std::int64_t c0, std::int64_t c1) {
  t(r, c0, c1);
}
template <class Tile>
FB_AVX2 void tile_avx2(const Tile& t, std::int64_t r, std::int64_t c0, std::int64_t c1) {
  t(r, c0, c1);
}
template <class Tile>
void tile_x86_64(const Tile& t, std::int64_t r, std::int64_t c0, std::int64_t c1) {
  t(r, c0, c1);
}

template <class Tile>
void run_tiles(const Tile& t, std::int64_t rows, std::int64_t cols, std::int64_t cols_per_tile,
               int threads, std::int64_t work = -1) {
  using Fn = void (*)(const Tile&, std::int64_t, std::int64_t, std::int64_t);
  Fn fn = &tile_x86_64<Tile>;
  if (vector_isa() == VectorIsa::avx512) fn = &tile_avx512<Tile>;
  if (vector_isa() == VectorIsa::avx2) fn = &tile_avx2<Tile>;
  for_tiles(rows, cols, cols_per_tile, threads, work < 0 ? rows * cols : work,
            [&](std::int64_t r, std::int64_t c0, std::int64_t c1) { fn(t, r, c0, c1); });
}

// Columns per tile: whole rows of most matrices, split where a few rows are long (decode).
constexpr std::int64_t kTileCols = 2048;

struct ActTile {
  const ActAndMulArgs& a;
  FB_INLINE void operator()(std::int64_t r, std::int64_t c0, std::int64_t c1) const {
    const std::int64_t st = a.col_stride;
    const auto limit = static_cast<float>(a.limit);
    const auto alpha = static_cast<float>(kSwigluOaiAlpha);
    float g[kChunk], u[kChunk], v[kChunk];
    for (std::int64_t c = c0; c < c1; c += kChunk) {
      const std::int64_t n = std::min(kChunk, c1 - c);
      to_float(element(a.gate, r, c * st), a.gate.dtype, st, n, g);
      to_float(element(a.up, r, c * st), a.up.dtype, st, n, u);
      switch (a.act) {
        case Activation::silu:
          for (std::int64_t i = 0; i < n; ++i) v[i] = g[i] / (1.0f + fast_exp(-g[i])) * u[i];
          break;
        case Activation::gelu_tanh:
          for (std::int64_t i = 0; i < n; ++i) {
            // 0.5 (1 + tanh(y)) = sigmoid(2y): no cancellation near y = 0.
            const float y = 0.7978845608f * (g[i] + 0.044715f * g[i] * g[i] * g[i]);
            v[i] = g[i] / (1.0f + fast_exp(-2.0f * y)) * u[i];
          }
          break;
        case Activation::gelu:
          for (std::int64_t i = 0; i < n; ++i)
            v[i] = 0.5f * g[i] * one_plus_erf(g[i] * 0.70710678f) * u[i];
          break;
        case Activation::swigluoai:
          for (std::int64_t i = 0; i < n; ++i) {
            const float gc = std::min(g[i], limit), uc = std::min(std::max(u[i], -limit), limit);
            v[i] = (uc + 1.0f) * gc / (1.0f + fast_exp(-alpha * gc));
          }
          break;
      }
      from_float(v, n, element(a.out, r, c), a.out.dtype);
    }
  }
};

struct BiasTile {
  const MatRef &y, &bias;
  FB_INLINE void operator()(std::int64_t r, std::int64_t c0, std::int64_t c1) const {
    float v[kChunk], b[kChunk];
    for (std::int64_t c = c0; c < c1; c += kChunk) {
      const std::int64_t n = std::min(kChunk, c1 - c);
      to_float(element(y, r, c), y.dtype, 1, n, v);
      to_float(element(bias, c, 0), bias.dtype, bias.ld, n, b);
      for (std::int64_t i = 0; i < n; ++i) v[i] += b[i];
      from_float(v, n, element(y, r, c), y.dtype);
    }
  }
};

struct GatherTile {
  const MatRef &src, &dst;
  const std::int64_t* rows;
  const float* scale;
  FB_INLINE void operator()(std::int64_t i, std::int64_t c0, std::int64_t c1) const {
    const std::int64_t r = rows[i];
    if (r < 0) {  // zero in every dtype
      std::memset(element(dst, i, c0), 0,
                  static_cast<std::size_t>(c1 - c0) * dtype_size(dst.dtype));
      return;
    }
    if (scale == nullptr) {
      std::memcpy(element(dst, i, c0), element(src, r, c0),
                  static_cast<std::size_t>(c1 - c0) * dtype_size(dst.dtype));
      return;
    }
    const float w = scale[i];
    float v[kChunk];
    for (std::int64_t c = c0; c < c1; c += kChunk) {
      const std::int64_t n = std::min(kChunk, c1 - c);
      to_float(element(src, r, c), src.dtype, 1, n, v);
      for (std::int64_t k = 0; k < n; ++k) v[k] *= w;
      from_float(v, n, element(dst, i, c), dst.dtype);
    }
  }
};

// A column slice of every row: each thread owns its columns of dst, so two source rows adding
// into one token's row never race, and every element's adds keep the source order.
struct ScatterTile {
  const MatRef &src, &dst;
  const std::int64_t* rows;
  const float* scale;
  FB_INLINE void operator()(std::int64_t, std::int64_t c0, std::int64_t c1) const {
    float d[kChunk], s[kChunk];
    for (std::int64_t i = 0; i < src.rows; ++i) {
      const std::int64_t r = rows[i];
      if (r < 0) continue;
      const float w = scale[i];
      for (std::int64_t c = c0; c < c1; c += kChunk) {
        const std::int64_t n = std::min(kChunk, c1 - c);
        to_float(element(dst, r, c), dst.dtype, 1, n, d);
        to_float(element(src, i, c), src.dtype, 1, n, s);
        for (std::int64_t k = 0; k < n; ++k) d[k] += w * s[k];
        from_float(d, n, element(dst, r, c), dst.dtype);
      }
    }
  }
};

struct SigmoidGateTile {
  const MatRef &x, &gate;
  FB_INLINE void operator()(std::int64_t r, std::int64_t c0, std::int64_t c1) const {
    float gv = 0;
    to_float(element(gate, r, 0), gate.dtype, 1, 1, &gv);
    const float g = 1.0f / (1.0f + std::exp(-gv));
    float v[kChunk];
    for (std::int64_t c = c0; c < c1; c += kChunk) {
      const std::int64_t n = std::min(kChunk, c1 - c);
      to_float(element(x, r, c), x.dtype, 1, n, v);
      for (std::int64_t k = 0; k < n; ++k) v[k] *= g;
      from_float(v, n, element(x, r, c), x.dtype);
    }
  }
};

struct RmsNormTile {  // whole rows: the sum of squares needs every column
  const MatRef &x, &weight, &out;
  float eps;
  FB_INLINE void operator()(std::int64_t r, std::int64_t, std::int64_t) const {
    float v[kChunk], w[kChunk];
    float sum = 0;  // fp32 accumulation, as the CUDA kernel
    for (std::int64_t c = 0; c < x.cols; c += kChunk) {
      const std::int64_t n = std::min(kChunk, x.cols - c);
      to_float(element(x, r, c), x.dtype, 1, n, v);
      FB_SIMD_SUM
      for (std::int64_t k = 0; k < n; ++k) sum += v[k] * v[k];
    }
    const float inv = 1.0f / std::sqrt(sum / static_cast<float>(x.cols) + eps);
    for (std::int64_t c = 0; c < x.cols; c += kChunk) {
      const std::int64_t n = std::min(kChunk, x.cols - c);
      to_float(element(x, r, c), x.dtype, 1, n, v);
      to_float(element(weight, 0, c), weight.dtype, 1, n, w);
      for (std::int64_t k = 0; k < n; ++k) v[k] = v[k] * inv * w[k];
      from_float(v, n, element(out, r, c), out.dtype);
    }
  }
};

struct StoreTile {
  const float* src;
  std::int64_t ld;
  const MatRef& out;
  FB_INLINE void operator()(std::int64_t r, std::int64_t c0, std::int64_t c1) const {
    from_float(src + r * ld + c0, c1 - c0, element(out, r, c0), out.dtype);
  }
};

// out (+)= y * (row scale * column scale), as apply_int8_epilogue.
template <class Product>
struct EpilogueTile {
  const Int8Epilogue& e;
  const Product* y;
  std::int64_t n;
  FB_INLINE void operator()(std::int64_t i, std::int64_t c0, std::int64_t c1) const {
    const Product* src = y + i * n;
    const float* cs = e.col_scale;
    const float rs = e.row_scale[i];
    if (e.out_bf16 != nullptr) {
      std::uint16_t* dst = e.out_bf16 + i * e.ld_bf16;
      for (std::int64_t j = c0; j < c1; ++j)
        dst[j] = bf16_bits(static_cast<float>(src[j]) * (rs * cs[j]));
      return;
    }
    float* dst = e.out + i * n;
    if (e.accumulate) {
      for (std::int64_t j = c0; j < c1; ++j) dst[j] += static_cast<float>(src[j]) * (rs * cs[j]);
    } else {
      for (std::int64_t j = c0; j < c1; ++j) dst[j] = static_cast<float>(src[j]) * (rs * cs[j]);
    }
  }
};

struct DecodeTile {
  const QuantRef& q;
  float* out;
  FB_INLINE void operator()(std::int64_t r, std::int64_t c0, std::int64_t c1) const {
    const std::uint8_t* row = q.codes + r * q.ld;
    float* dst = out + r * q.cols;
    if (q.dtype == QuantDType::int8) {
      for (std::int64_t c = c0; c < c1; ++c)
        dst[c] = static_cast<float>(static_cast<std::int8_t>(row[c]));
    } else {
      FB_SIMD
      for (std::int64_t c = c0; c < c1; ++c) dst[c] = fp8_value(row[c]);
    }
  }
};

}  // namespace

void decode_codes(const QuantRef& q, float* out, int threads) {
  run_tiles(DecodeTile{q, out}, q.rows, q.cols, kTileCols, threads);
}

void int8_epilogue(const Int8Epilogue& e, const std::int32_t* y, std::int64_t m, std::int64_t n,
                   int threads) {
  run_tiles(EpilogueTile<std::int32_t>{e, y, n}, m, n, kTileCols, threads);
}

void int8_epilogue(const Int8Epilogue& e, const float* y, std::int64_t m, std::int64_t n,
                   int threads) {
  run_tiles(EpilogueTile<float>{e, y, n}, m, n, kTileCols, threads);
}

void act_and_mul(const ActAndMulArgs& a, int threads) {
  run_tiles(ActTile{a}, a.out.rows, a.out.cols, kTileCols, threads);
}

void add_bias(const MatRef& y, const MatRef& bias, int threads) {
  if (bias.rows != y.cols || bias.dtype != y.dtype)
    throw std::invalid_argument("bias of " + std::to_string(bias.rows) + " elements for " +
                                std::to_string(y.cols) + " columns");
  run_tiles(BiasTile{y, bias}, y.rows, y.cols, kTileCols, threads);
}

void gather_scaled(const MatRef& src, const MatRef& dst, std::span<const std::int64_t> rows,
                   std::span<const float> scale, int threads) {
  run_tiles(GatherTile{src, dst, rows.data(), scale.empty() ? nullptr : scale.data()}, dst.rows,
            dst.cols, kTileCols, threads);
}

void scatter_add(const MatRef& src, const MatRef& dst, std::span<const std::int64_t> rows,
                 std::span<const float> scale, bool zero_dst, int threads) {
  if (zero_dst) {
    const std::size_t row = static_cast<std::size_t>(dst.cols) * dtype_size(dst.dtype);
    for (std::int64_t r = 0; r < dst.rows; ++r) std::memset(element(dst, r, 0), 0, row);
  }
  // Column slices of 256: enough of them for every thread even at a small hidden size.
  const std::int64_t slice = kChunk;
  const std::int64_t work = src.rows * src.cols;
  run_tiles(ScatterTile{src, dst, rows.data(), scale.data()}, 1, dst.cols, slice, threads, work);
}

void sigmoid_gate_rows(const MatRef& x, const MatRef& gate, int threads) {
  run_tiles(SigmoidGateTile{x, gate}, x.rows, x.cols, kTileCols, threads);
}

void rms_norm(const MatRef& x, const MatRef& weight, const MatRef& out, float eps, int threads) {
  run_tiles(RmsNormTile{x, weight, out, eps}, x.rows, x.cols, x.cols, threads);
}

void store_rows(const float* src, std::int64_t ld, const MatRef& out, int threads) {
  run_tiles(StoreTile{src, ld, out}, out.rows, out.cols, kTileCols, threads);
}

}  // namespace fusebench::cpu
