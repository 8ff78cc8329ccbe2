#include "backends/cpu_quant.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "backends/cpu_elementwise.hpp"
#include "backends/host_mat.hpp"

namespace fusebench::cpu {
namespace {

// Scale grid of a QuantRef, as QuantMat lays it out.
QuantMat grid_of(const QuantRef& q) { return QuantMat{q.dtype, q.kind, q.rows, q.cols, {}, {}}; }

}  // namespace

std::string execution(const CpuGemm& gemm, QuantDType dtype) {
  if (dtype == QuantDType::int8 && !gemm.int8_kernel().empty())
    return "native: " + gemm.int8_kernel() + ", the scales applied in fp32 to its int32 products";
  std::string text = "emulated: the " + std::string(to_string(dtype)) +
                     " codes decoded to fp32 (exact) on every call, an fp32 GEMM, the scales "
                     "applied after (per 128-wide K block for block scales); no " +
                     std::string(to_string(dtype)) + " instructions run";
  if (dtype == QuantDType::int8) text += " (no native int8: " + gemm.int8_unavailable() + ")";
  return text;
}

void scaled_gemm(CpuGemm& gemm, const ScaledGemmArgs& a) {
  const QuantRef &x = a.x, &w = a.w;
  if (x.cols != w.cols || a.y.rows != x.rows || a.y.cols != w.rows)
    throw std::invalid_argument("scaled_gemm: shapes do not match");
  const std::int64_t m = x.rows, n = w.rows, k = x.cols;
  const bool int8 = x.dtype == QuantDType::int8 && !gemm.int8_kernel().empty();
  // The emulation's operands as fp32, decoded on the run's threads (kept across calls).
  thread_local std::vector<float> xf, wf;
  if (!int8) {
    xf.resize(static_cast<std::size_t>(x.rows * x.cols));
    wf.resize(static_cast<std::size_t>(w.rows * w.cols));
    decode_codes(x, xf.data(), gemm.threads());
    decode_codes(w, wf.data(), gemm.threads());
  }
  const QuantMat xg = grid_of(x), wg = grid_of(w);
  // One scale for the whole K per (row, column) unless a scale changes along K.
  const std::int64_t kstep =
      xg.tile_cols() < k || wg.tile_cols() < k ? std::min(xg.tile_cols(), wg.tile_cols()) : k;
  const bool one_block = kstep >= k;
  const auto mn = static_cast<std::size_t>(m * n);
  // One K block into bf16: the scales are applied and rounded straight into y (for int8 by the
  // kernel's threads as each tile finishes), with no pass over an fp32 result after (a sixth of
  // the int8 call at 1024^3).
  const bool bf16_direct = one_block && a.y.dtype == DType::bf16;
  // Kept across calls (a GEMM of 1024 x 4096 outputs would otherwise allocate and zero 16 MiB
  // twice a call, in the timed region).
  thread_local std::vector<std::int32_t> part32;
  thread_local std::vector<float> part, acc, sx, sw;
  if (int8) part32.resize(mn);
  if (!int8 || !bf16_direct) part.resize(mn);  // fp32 products, or (one K block) the result
  if (!one_block) acc.assign(mn, 0.0f);
  sx.resize(static_cast<std::size_t>(m));
  sw.resize(static_cast<std::size_t>(n));
  for (std::int64_t k0 = 0; k0 < k; k0 += kstep) {
    const std::int64_t kb = std::min(kstep, k - k0);
    // This K block's scale of each row of x and each row of w (= column of y).
    for (std::int64_t i = 0; i < m; ++i)
      sx[i] = x.scales[(i / xg.tile_rows()) * xg.scale_cols() + k0 / xg.tile_cols()];
    for (std::int64_t j = 0; j < n; ++j)
      sw[j] = w.scales[(j / wg.tile_rows()) * wg.scale_cols() + k0 / wg.tile_cols()];
    // The scaled products: straight into `part` (one K block) or summed in acc.
    Int8Epilogue scale{sx.data(), sw.data(), one_block ? part.data() : acc.data(), !one_block};
    if (bf16_direct) scale.out_bf16 = static_cast<std::uint16_t*>(a.y.data), scale.ld_bf16 = a.y.ld;
    if (int8) {  // int8 codes are the two's-complement bytes themselves
      if (!gemm.int8_gemm(reinterpret_cast<const std::int8_t*>(x.codes) + k0, x.ld,
                          reinterpret_cast<const std::int8_t*>(w.codes) + k0, w.ld, part32.data(),
                          m, n, kb, &scale))
        throw std::invalid_argument("scaled_gemm: the int8 kernel takes no K = " +
                                    std::to_string(kb));
      continue;
    }
    const MatRef xr{const_cast<float*>(xf.data()) + k0, DType::f32, m, kb, k};
    const MatRef wr{const_cast<float*>(wf.data()) + k0, DType::f32, n, kb, k};
    const MatRef pr{part.data(), DType::f32, m, n, n};
    gemm.run({xr, wr, pr, {}});
    int8_epilogue(scale, part.data(), m, n, gemm.threads());
  }
  if (bf16_direct) return;  // the epilogue wrote y
  const float* result = one_block ? part.data() : acc.data();
  store_rows(result, n, a.y, gemm.threads());
}

}  // namespace fusebench::cpu
