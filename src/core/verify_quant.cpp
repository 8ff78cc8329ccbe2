// The verifier of quantized plans: the plan's steps replayed on the host in float64 from the
// same codes and scales the backend computes (quant.hpp's quantize is the CPU backend's own), so
// a mismatch is the kernel's, never the quantization's.
#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

#include "fusebench/verify.hpp"
#include "fusebench/workspace.hpp"
#include "ops/op_list.hpp"

namespace fusebench {
namespace {

// Rows [row0, row0 + rows) of a quantized matrix (its scales: per tensor, row or group; block
// windows start on a 128-row block).
QuantMat row_window(const QuantMat& x, std::int64_t row0, std::int64_t rows) {
  if (row0 == 0 && rows >= x.rows) return x;
  QuantMat h{x.dtype, x.kind, rows, x.cols, {}, {}};
  h.codes.assign(x.codes.begin() + row0 * x.cols, x.codes.begin() + (row0 + rows) * x.cols);
  if (x.kind == ScaleKind::tensor) {
    h.scales = x.scales;
  } else {
    const std::int64_t r0 = row0 / x.tile_rows(), n = h.scale_rows();
    h.scales.assign(x.scales.begin() + r0 * x.scale_cols(),
                    x.scales.begin() + (r0 + n) * x.scale_cols());
  }
  return h;
}

// A value as a buffer of `dtype` stores it (the backends round fp32 results to it).
double stored(DType dtype, double v) {
  const auto f = static_cast<float>(v);
  switch (dtype) {
    case DType::bf16:
      return bf16_to_float(float_to_bf16(f));
    case DType::f16:
      return f16_to_float(float_to_f16(f));
    case DType::f32:
      break;
  }
  return f;
}

// The moe op's quantized plans (gathers, grouped scaled GEMMs, scatter-adds): every step replayed
// in float64 over whole buffers, each buffer's values stored in the plan's dtype as the backend
// stores them, so each quantize step sees the values the backend's does (bitwise, up to the fp32
// accumulation of the GEMM before it). All rows: a per-tensor activation scale reads every row.
std::map<int, std::vector<double>> replay_routed(const Plan& plan, const LogicalTensors& in,
                                                 std::map<int, QuantMat>& mats,
                                                 const std::map<int, float>& static_scales) {
  std::map<int, std::vector<double>> v;  // by buffer: [rows, cols], row-major
  const auto& buffers = plan.buffers;
  for (int i = 0; i < static_cast<int>(buffers.size()); ++i) {
    const BufferSpec& b = buffers[static_cast<std::size_t>(i)];
    if (b.store != BufferSpec::Store::plan_dtype) continue;
    if (b.role == BufferRole::input && b.parts.size() == 1) {
      const std::vector<float>& x = in.at(b.parts.front());
      v[i].assign(x.begin(), x.end());
    } else {
      v[i].assign(static_cast<std::size_t>(b.rows * b.cols), 0.0);
    }
  }
  const auto at = [&](const View& view, std::int64_t r, std::int64_t c) -> double& {
    const std::int64_t ld = buffers[static_cast<std::size_t>(view.buffer)].cols;
    return v.at(view.buffer)[static_cast<std::size_t>((view.row0 + r) * ld + view.col0 + c)];
  };
  const auto gemm = [&](const ScaledGemmStep& g) {
    const QuantMat& xm = mats.at(g.x.codes.buffer);
    const std::vector<double> y = dequantized_product(
        row_window(xm, g.x.codes.row0, g.x.codes.rows), mats.at(g.w.codes.buffer));
    for (std::int64_t r = 0; r < g.y.rows; ++r)
      for (std::int64_t c = 0; c < g.y.cols; ++c)
        at(g.y, r, c) = stored(plan.dtype, y[static_cast<std::size_t>(r * g.y.cols + c)]);
  };
  for (const Step& step : plan.steps) {
    if (const auto* q = std::get_if<QuantizeStep>(&step)) {
      std::vector<float> x(static_cast<std::size_t>(q->x.rows * q->x.cols));
      for (std::int64_t r = 0; r < q->x.rows; ++r)
        for (std::int64_t c = 0; c < q->x.cols; ++c)
          x[static_cast<std::size_t>(r * q->x.cols + c)] = static_cast<float>(at(q->x, r, c));
      mats[q->out.codes.buffer] =
          q->static_scale ? quantize_with_scales(x.data(), q->x.rows, q->x.cols, q->dtype,
                                                 q->out.kind, {static_scales.at(q->out.scales)})
                          : quantize(x.data(), q->x.rows, q->x.cols, q->dtype, q->out.kind);
    } else if (const auto* g = std::get_if<ScaledGemmStep>(&step)) {
      gemm(*g);
    } else if (const auto* gg = std::get_if<GroupedScaledGemmStep>(&step)) {
      for (const auto& member : gg->gemms) gemm(member);
    } else if (const auto* a = std::get_if<ActAndMulStep>(&step)) {
      for (std::int64_t r = 0; r < a->out.rows; ++r)
        for (std::int64_t c = 0; c < a->out.cols; ++c)
          at(a->out, r, c) = stored(
              plan.dtype, ops::act_and_mul(a->act, a->limit, at(a->gate, r, c * a->col_stride),
                                           at(a->up, r, c * a->col_stride)));
    } else if (const auto* gr = std::get_if<GatherRowsStep>(&step)) {
      for (std::int64_t r = 0; r < gr->dst.rows; ++r) {
        const std::int64_t src = gr->rows[static_cast<std::size_t>(r)];
        for (std::int64_t c = 0; c < gr->dst.cols; ++c)
          at(gr->dst, r, c) = src < 0 ? 0.0 : at(gr->src, src, c);
      }
    } else if (const auto* sa = std::get_if<ScatterAddStep>(&step)) {
      if (sa->zero_dst)
        for (std::int64_t r = 0; r < sa->dst.rows; ++r)
          for (std::int64_t c = 0; c < sa->dst.cols; ++c) at(sa->dst, r, c) = 0.0;
      for (std::int64_t r = 0; r < sa->src.rows; ++r) {
        const std::int64_t dst = sa->rows[static_cast<std::size_t>(r)];
        if (dst < 0) continue;
        const double w = sa->scale[static_cast<std::size_t>(r)];
        for (std::int64_t c = 0; c < sa->src.cols; ++c)
          at(sa->dst, dst, c) = stored(plan.dtype, at(sa->dst, dst, c) + w * at(sa->src, r, c));
      }
    } else {
      throw std::logic_error("plan " + plan.op + "/" + plan.variant +
                             ": a step the quantized reference does not replay");
    }
  }
  return v;
}

// The first `rows` rows of a quantized activation (its scales: per tensor, row or group).
QuantMat head_rows(const QuantMat& x, std::int64_t rows) {
  if (rows >= x.rows) return x;
  QuantMat h{x.dtype, x.kind, rows, x.cols, {}, {}};
  h.codes.assign(x.codes.begin(), x.codes.begin() + rows * x.cols);
  if (x.kind == ScaleKind::tensor) {
    h.scales = x.scales;
  } else if (x.kind == ScaleKind::row || x.kind == ScaleKind::group) {
    h.scales.assign(x.scales.begin(), x.scales.begin() + rows * x.scale_cols());
  } else {
    throw std::logic_error("quantized activations with 128x128 block scales");
  }
  return h;
}

}  // namespace

ReferenceOutputs dequantized_reference(const Plan& plan, const LogicalTensors& in,
                                       std::int64_t rows, const TensorSource* weights) {
  std::map<int, QuantMat> mats;          // by codes buffer
  std::map<int, float> static_scales;    // by scales buffer
  std::map<int, std::vector<double>> y;  // by output buffer: [rows, cols]
  for (int i = 0; i < static_cast<int>(plan.buffers.size()); ++i) {
    const BufferSpec& b = plan.buffers[static_cast<std::size_t>(i)];
    if (!b.quantized) continue;
    std::vector<std::vector<float>> parts;
    for (const auto& part : b.parts) parts.push_back(in.at(part));
    if (b.store == BufferSpec::Store::scales) {
      if (const auto stored = stored_static_scale(plan, weights)) {  // a checkpoint's input_scale
        static_scales[i] = *stored;
        continue;
      }
      float amax = 0;
      for (const auto& p : parts)
        for (float v : p) amax = std::max(amax, std::fabs(v));
      static_scales[i] = dynamic_scale(b.quantized->dtype, amax);
    } else if (auto stored = stored_quantized_buffer(plan, b, weights)) {
      mats[i] = std::move(*stored);  // a quantized checkpoint's codes and scales
    } else {
      mats[i] = quantize_shards(parts, b.part_rows, b.cols, b.quantized->dtype, b.quantized->kind,
                                b.quantized->fusion);
    }
  }
  const auto buffer_cols = [&](int buffer) {
    return plan.buffers[static_cast<std::size_t>(buffer)].cols;
  };
  if (plan.moe) y = replay_routed(plan, in, mats, static_scales);
  const std::vector<Step> replayed;  // the moe op's: above
  for (const Step& step : plan.moe ? replayed : plan.steps) {
    if (const auto* q = std::get_if<QuantizeStep>(&step)) {
      const BufferSpec& xb = plan.buffers[static_cast<std::size_t>(q->x.buffer)];
      const std::vector<float>& x = in.at(xb.parts.at(0));
      mats[q->out.codes.buffer] =
          q->static_scale ? quantize_with_scales(x.data(), q->x.rows, q->x.cols, q->dtype,
                                                 q->out.kind, {static_scales.at(q->out.scales)})
                          : quantize(x.data(), q->x.rows, q->x.cols, q->dtype, q->out.kind);
    } else if (const auto* g = std::get_if<ScaledGemmStep>(&step)) {
      y[g->y.buffer] = dequantized_product(head_rows(mats.at(g->x.codes.buffer), rows),
                                           mats.at(g->w.codes.buffer));
    } else if (const auto* a = std::get_if<ActAndMulStep>(&step)) {
      const auto& gate = y.at(a->gate.buffer);
      const auto& up = y.at(a->up.buffer);
      std::vector<double> out(static_cast<std::size_t>(rows * a->out.cols));
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < a->out.cols; ++c) {
          const auto at = [&](const View& v, const std::vector<double>& m) {
            return m[static_cast<std::size_t>(r * buffer_cols(v.buffer) + v.col0 +
                                              c * a->col_stride)];
          };
          out[static_cast<std::size_t>(r * a->out.cols + c)] =
              ops::act_and_mul(a->act, a->limit, at(a->gate, gate), at(a->up, up));
        }
      }
      y[a->out.buffer] = std::move(out);
    } else {
      throw std::logic_error("plan " + plan.op + "/" + plan.variant +
                             ": a step the quantized reference does not replay");
    }
  }
  ReferenceOutputs out;
  for (const auto& [name, v] : plan.outputs) {
    const auto& m = y.at(v.buffer);
    std::vector<double> slice;
    slice.reserve(static_cast<std::size_t>(rows * v.cols));
    for (std::int64_t r = 0; r < rows; ++r) {
      const auto* row = m.data() + r * buffer_cols(v.buffer) + v.col0;
      slice.insert(slice.end(), row, row + v.cols);
    }
    out[name] = std::move(slice);
  }
  return out;
}

std::vector<VerifyResult> verify_quant_op(Backend& backend, const std::string& op,
                                          const ShardShape& shard, std::int64_t tokens, DType dtype,
                                          const QuantSpec& spec, std::uint64_t seed,
                                          std::int64_t reference_rows,
                                          const TensorSource* weights) {
  const OpInfo& info = find_op(op);
  if (!info.quant_variants) throw std::invalid_argument(quant_refusal(info));
  const Tolerance tol = tolerance_for(dtype);
  const std::int64_t rows = reference_rows > 0 && reference_rows < tokens ? reference_rows : tokens;
  std::vector<VerifyResult> results;
  for (const auto& variant : info.quant_variants(spec)) {
    // A variant the shape refuses (vLLM's block rule) has no plan: the sweep leaves it out with
    // the reason, and there is nothing of it to verify.
    std::optional<Plan> built;
    try {
      built = build_plan(op, variant, shard, tokens, dtype, spec);
    } catch (const std::invalid_argument&) {
      continue;
    }
    Plan plan = std::move(*built);
    const ReferenceOutputs want =
        dequantized_reference(plan, logical_inputs(plan, seed, weights, true), rows, weights);
    Workspace ws(backend, plan, seed, weights);
    ws.run();
    VerifyResult result{op, variant, {}, rows};
    for (const auto& [name, view] : ws.plan().outputs) {
      auto got = ws.read(view);
      got.resize(static_cast<std::size_t>(rows * view.cols));
      result.comparisons.push_back(
          compare_outputs(name, "float64_dequantized", got, want.at(name), tol));
    }
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace fusebench
