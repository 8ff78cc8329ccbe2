// The CPU backend's dynamic (and static) quantize: the same codes and scales as the host's
// quantize() bit for bit, at memory speed. x is read in fp32 chunks and never stored as fp32; a
// per-token or per-group scale is found and applied in one pass over each row while the row is
// in cache, a scale shared by several rows (per tensor) in two passes.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cpu_quant.hpp"
#include "backends/cpu_vector.hpp"
#include "fusebench/quant.hpp"

namespace fusebench::cpu {
namespace {

// x's row r: each scale tile's amax over the row, into amax[0 .. scale_cols).
struct AmaxRow {
  const MatRef& x;
  std::int64_t tile_cols;
  FB_INLINE void operator()(std::int64_t r, float* amax) const {
    float v[kChunk];
    for (std::int64_t c = 0; c < x.cols; c += kChunk) {
      const std::int64_t n = std::min(kChunk, x.cols - c);
      to_float(element(x, r, c), x.dtype, 1, n, v);
      // Segments of the chunk under one scale tile.
      for (std::int64_t s = 0; s < n;) {
        const std::int64_t t = (c + s) / tile_cols, end = std::min(n, (t + 1) * tile_cols - c);
        float m = amax[t];
        FB_SIMD_MAX
        for (std::int64_t i = s; i < end; ++i) m = std::max(m, std::fabs(v[i]));
        amax[t] = m;
        s = end;
      }
    }
  }
};

// x's row r as codes, each element divided by its tile's scale (scale[0 .. scale_cols)).
struct CodeRow {
  const MatRef& x;
  const QuantRef& o;
  std::int64_t tile_cols;
  FB_INLINE void operator()(std::int64_t r, const float* scale) const {
    float v[kChunk];
    std::uint8_t* codes = o.codes + r * o.ld;
    const bool int8 = o.dtype == QuantDType::int8;
    for (std::int64_t c = 0; c < x.cols; c += kChunk) {
      const std::int64_t n = std::min(kChunk, x.cols - c);
      to_float(element(x, r, c), x.dtype, 1, n, v);
      for (std::int64_t s = 0; s < n;) {
        const std::int64_t t = (c + s) / tile_cols, end = std::min(n, (t + 1) * tile_cols - c);
        const float d = scale[t];
        std::uint8_t* out = codes + c;
        // (omp simd: without it GCC leaves the encoders' selects scalar)
        if (int8) {
          FB_SIMD
          for (std::int64_t i = s; i < end; ++i) out[i] = int8_code(v[i] / d);
        } else {
          FB_SIMD
          for (std::int64_t i = s; i < end; ++i) out[i] = fp8_code(v[i] / d);
        }
        s = end;
      }
    }
  }
};

// One row's work in each instruction set (cpu_vector.hpp): AMAX and CODE are the passes; with
// `fused`, the row's own scales are set between them (tile_rows 1).
struct RowJob {
  const QuantizeArgs& a;
  std::int64_t tile_rows, tile_cols, scale_cols;
  bool amax_pass, code_pass, fused;
  float* row_amax;  // [rows, scale_cols]; null for a codes-only pass
  FB_INLINE void operator()(std::int64_t r) const {
    float* amax = row_amax != nullptr ? row_amax + r * scale_cols : nullptr;
    if (amax_pass) AmaxRow{a.x, tile_cols}(r, amax);
    if (fused)
      for (std::int64_t t = 0; t < scale_cols; ++t)
        a.out.scales[r * scale_cols + t] = dynamic_scale(a.out.dtype, amax[t]);
    if (code_pass) CodeRow{a.x, a.out, tile_cols}(r, a.out.scales + (r / tile_rows) * scale_cols);
  }
};

FB_AVX512 void row_avx512(const RowJob& j, std::int64_t r) { j(r); }
FB_AVX2 void row_avx2(const RowJob& j, std::int64_t r) { j(r); }
void row_x86_64(const RowJob& j, std::int64_t r) { j(r); }

// The rows of a job on `threads` threads, each in the CPU's best instruction set.
void run_rows(const RowJob& job, std::int64_t rows, int threads) {
  auto fn = &row_x86_64;
  if (vector_isa() == VectorIsa::avx512) fn = &row_avx512;
  if (vector_isa() == VectorIsa::avx2) fn = &row_avx2;
  for_tiles(rows, 1, 1, threads, rows * job.a.x.cols,
            [&](std::int64_t r, std::int64_t, std::int64_t) { fn(job, r); });
}

}  // namespace

void quantize(const QuantizeArgs& a, int threads) {
  const QuantRef& o = a.out;
  if (a.x.rows != o.rows || a.x.cols != o.cols)
    throw std::invalid_argument("quantize: x and its codes differ in shape");
  const QuantMat grid{o.dtype, o.kind, o.rows, o.cols, {}, {}};
  const std::int64_t rows = o.rows, tile_rows = grid.tile_rows(), tile_cols = grid.tile_cols(),
                     scale_cols = grid.scale_cols();
  const auto scales = static_cast<std::size_t>(grid.scale_rows() * scale_cols);
  if (a.static_scale) {
    for (std::size_t i = 0; i < scales; ++i)
      if (!(o.scales[i] > 0) || !std::isfinite(o.scales[i]))
        throw std::invalid_argument("quantize: scale " + std::to_string(o.scales[i]) +
                                    " is not a positive finite number");
    run_rows(RowJob{a, tile_rows, tile_cols, scale_cols, false, true, false, nullptr}, rows,
             threads);
    return;
  }
  thread_local std::vector<float> row_amax;
  row_amax.assign(static_cast<std::size_t>(rows * scale_cols), 0.0f);
  if (tile_rows == 1) {  // each row's own scales: one pass, the row still in cache
    run_rows(RowJob{a, tile_rows, tile_cols, scale_cols, true, true, true, row_amax.data()}, rows,
             threads);
    return;
  }
  // A scale shared by rows: every row's amax, the tiles' scales, then the codes.
  run_rows(RowJob{a, tile_rows, tile_cols, scale_cols, true, false, false, row_amax.data()}, rows,
           threads);
  std::fill(o.scales, o.scales + scales, 0.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t t = 0; t < scale_cols; ++t) {
      float& m = o.scales[(r / tile_rows) * scale_cols + t];
      m = std::max(m, row_amax[static_cast<std::size_t>(r * scale_cols + t)]);
    }
  for (std::size_t i = 0; i < scales; ++i) o.scales[i] = dynamic_scale(o.dtype, o.scales[i]);
  run_rows(RowJob{a, tile_rows, tile_cols, scale_cols, false, true, false, nullptr}, rows, threads);
}

}  // namespace fusebench::cpu
