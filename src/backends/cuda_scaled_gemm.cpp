#include "backends/cuda_scaled_gemm.hpp"

#include <variant>

namespace fusebench::cuda {
namespace {

std::string shape_text(const ScaledGemmShape& s) {
  return "M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k);
}

std::string ld_text(const ScaledGemmShape& s) {
  return "(ld x=" + std::to_string(s.ld_x) + " w=" + std::to_string(s.ld_w) +
         " y=" + std::to_string(s.ld_y) + ")";
}

// int8 (IMMA) in the regular data ordering: cuBLASLt's m (our N) and k multiples of 4, every
// leading dimension a multiple of 4.
std::string int8_shape_refusal(const ScaledGemmShape& s) {
  if (s.n % 4 == 0 && s.k % 4 == 0 && s.ld_x % 4 == 0 && s.ld_w % 4 == 0 && s.ld_y % 4 == 0)
    return {};
  return "int8 on cuda at " + shape_text(s) + " " + ld_text(s) +
         ": cuBLASLt's int8 matmul needs N, K and every leading dimension a multiple of 4";
}

// fp8 on the tensor cores: K a multiple of 16, every leading dimension a multiple of 16 bytes
// (codes are one byte; y's are y_elem_bytes).
std::string fp8_shape_refusal(const ScaledGemmShape& s) {
  if (s.k % 16 == 0 && s.ld_x % 16 == 0 && s.ld_w % 16 == 0 && (s.ld_y * s.y_elem_bytes) % 16 == 0)
    return {};
  return "fp8 on cuda at " + shape_text(s) + " " + ld_text(s) + ", y " +
         std::to_string(s.y_elem_bytes) +
         " bytes an element: cuBLASLt's fp8 matmul needs K a multiple of 16 and every leading "
         "dimension a multiple of 16 bytes";
}

// Block scaling: M and N multiples of 4, and our weight scale grid at cuBLASLt's row stride.
std::string block_shape_refusal(const ScaledGemmShape& s) {
  if (s.m % 4 != 0 || s.n % 4 != 0)
    return "fp8 with 128x128 weight blocks on cuda at " + shape_text(s) +
           ": cuBLASLt's block scaling (VEC128_32F, BLK128x128_32F) needs M and N multiples of "
           "4, and the token rows are not padded; M a multiple of 4 runs";
  const std::int64_t block_rows = (s.n + 127) / 128, block_cols = (s.k + 127) / 128;
  if (block_rows > 1 && block_cols % 4 != 0)
    return "fp8 with 128x128 weight blocks on cuda at " + shape_text(s) +
           ": cuBLASLt's BLK128x128_32F reads each block row's scales at a stride of ceil(K/128) "
           "rounded up to a multiple of 4 (" +
           std::to_string((block_cols + 3) / 4 * 4) + "), our scale grid has " +
           std::to_string(block_cols) + " per row; K a multiple of 512 runs";
  return {};
}

}  // namespace

std::string_view to_string(LtScaleMode mode) {
  switch (mode) {
    case LtScaleMode::none:
      return "none";
    case LtScaleMode::scalar_32f:
      return "SCALAR_32F";
    case LtScaleMode::outer_vec_32f:
      return "OUTER_VEC_32F";
    case LtScaleMode::vec128_32f:
      return "VEC128_32F";
    case LtScaleMode::blk128x128_32f:
      return "BLK128x128_32F";
  }
  return "?";
}

std::string_view to_string(AlphaScale from) {
  switch (from) {
    case AlphaScale::none:
      return "none";
    case AlphaScale::w:
      return "w";
    case AlphaScale::x:
      return "x";
  }
  return "?";
}

ScaledGemmCall scaled_gemm_call(QuantDType dtype, ScaleKind x, ScaleKind w,
                                const ScaledGemmShape& shape) {
  ScaledGemmCall call;  // strings only when refusing: the cuda backend asks on every call
  const auto pair = [&] {
    return "x " + std::string(to_string(x)) + ", w " + std::string(to_string(w));
  };
  const bool outer_x = x == ScaleKind::tensor || x == ScaleKind::row;
  const bool outer_w = w == ScaleKind::tensor || w == ScaleKind::row;
  if (dtype == QuantDType::int8) {
    call.launches = 2;
    if (!outer_x || !outer_w) {
      call.refusal = "int8 on cuda with " + pair() +
                     " scales: cuBLASLt's int8 matmul applies no scales along K, and a K-blocked "
                     "int8 GEMM (one per 128-wide K block, each partial sum scaled) is not "
                     "written; int8 runs per tensor and per channel/token";
      return call;
    }
    call.refusal = int8_shape_refusal(shape);
    return call;
  }
  if (outer_x && outer_w) {
    if (x == ScaleKind::tensor && w == ScaleKind::tensor) {
      call.a = call.b = LtScaleMode::scalar_32f;
    } else {  // rowwise x rowwise; a per-tensor side becomes ones and alpha
      call.a = call.b = LtScaleMode::outer_vec_32f;
      call.alpha = w == ScaleKind::tensor   ? AlphaScale::w
                   : x == ScaleKind::tensor ? AlphaScale::x
                                            : AlphaScale::none;
    }
    call.refusal = fp8_shape_refusal(shape);
    return call;
  }
  if (x != ScaleKind::group || w != ScaleKind::block) {
    call.refusal = "fp8 on cuda with " + pair() +
                   " scales: cuBLASLt has no scale mode pair for them (128x128 weight blocks "
                   "take 1x128 activation groups)";
    return call;
  }
  call.a = LtScaleMode::blk128x128_32f;
  call.b = LtScaleMode::vec128_32f;
  call.refusal = fp8_shape_refusal(shape);
  if (call.refusal.empty()) call.refusal = block_shape_refusal(shape);
  return call;
}

std::vector<PlanScaledGemm> plan_scaled_gemm_calls(const Plan& plan) {
  const auto ld = [&](const View& v) {
    return plan.buffers[static_cast<std::size_t>(v.buffer)].cols;
  };
  const auto y_bytes = static_cast<std::int64_t>(dtype_size(plan.dtype));
  std::vector<PlanScaledGemm> calls;
  for (const Step& step : plan.steps) {
    const auto* g = std::get_if<ScaledGemmStep>(&step);
    if (g == nullptr) continue;
    const ScaledGemmShape shape{g->y.rows,      g->y.cols, g->x.codes.cols, ld(g->x.codes),
                                ld(g->w.codes), ld(g->y),  y_bytes};
    calls.push_back({g->label, scaled_gemm_call(g->dtype, g->x.kind, g->w.kind, shape)});
  }
  return calls;
}

std::string plan_refusal(const Plan& plan) {
  for (const PlanScaledGemm& c : plan_scaled_gemm_calls(plan))
    if (!c.call.refusal.empty()) return c.label + ": " + c.call.refusal;
  return {};
}

std::uint32_t lt_alignment(const void* p, std::int64_t stride_elems, std::size_t elem_bytes) {
  std::uint64_t bits = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)) | 256u;
  if (stride_elems != 0)
    bits |=
        static_cast<std::uint64_t>(stride_elems < 0 ? -stride_elems : stride_elems) * elem_bytes;
  return static_cast<std::uint32_t>(bits & (~bits + 1));
}

LtAlignments quant_alignments(const void* w_codes, const void* x_codes, const void* y,
                              std::size_t y_elem_bytes) {
  const std::uint32_t c = lt_alignment(y, 0, y_elem_bytes);
  return {lt_alignment(w_codes, 0, 1), lt_alignment(x_codes, 0, 1), c, c};
}

std::vector<std::pair<LtPreference, std::uint64_t>> quant_preferences(
    const LtAlignments& align, std::uint64_t workspace_bytes) {
  return {{LtPreference::max_workspace_bytes, workspace_bytes},
          {LtPreference::min_alignment_a, align.a},
          {LtPreference::min_alignment_b, align.b},
          {LtPreference::min_alignment_c, align.c},
          {LtPreference::min_alignment_d, align.d}};
}

}  // namespace fusebench::cuda
