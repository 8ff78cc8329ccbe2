// The verifier of quantized plans: the plan's steps replayed on the host in float64 from the
// same codes and scales the backend computes (quant.hpp's quantize is the CPU backend's own), so
// a mismatch is the kernel's, never the quantization's.
#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

#include "fusebench/tp.hpp"
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

// A part's values: its window of a whole logical tensor, or the tensor itself where it is only
// that window already (logical_inputs with windows_only, or no window).
std::vector<float> part_values(const BufferSpec& b, std::size_t part, const std::vector<float>& t) {
  const std::int64_t rows = b.part_rows[part];
  if (b.part_windows.empty() || static_cast<std::int64_t>(t.size()) == rows * b.cols) return t;
  const BufferSpec::Window& w = b.part_windows[part];
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(rows * b.cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto* row = t.data() + (w.row0 + r) * w.logical_cols + w.col0;
    out.insert(out.end(), row, row + b.cols);
  }
  return out;
}

// A plan replayed on the host in float64 over whole buffers, each buffer's values stored in the
// plan's dtype as the backend stores them, so each quantize step sees the values the backend's
// does (bitwise, up to the fp32 accumulation of the GEMM before it). All rows: a per-tensor
// activation scale reads every row. The moe op's plans (gathers, grouped scaled GEMMs,
// scatter-adds) and the TP pipelines' (norms; their collectives across every rank's replay:
// replay_ranks).
class HostReplay {
 public:
  HostReplay(const Plan& plan, const LogicalTensors& in, std::map<int, QuantMat>& mats,
             const std::map<int, float>& static_scales)
      : plan_(plan), mats_(mats), static_scales_(static_scales) {
    for (int i = 0; i < static_cast<int>(plan.buffers.size()); ++i) {
      const BufferSpec& b = plan.buffers[static_cast<std::size_t>(i)];
      if (b.store != BufferSpec::Store::plan_dtype) continue;
      std::vector<double>& v = v_[i];
      v.assign(static_cast<std::size_t>(b.rows * b.cols), 0.0);
      if (b.parts.empty()) continue;  // an output, or a buffer the run fills
      std::size_t at = 0;  // the parts stacked by rows (rows past them stay zero: padding)
      for (std::size_t part = 0; part < b.parts.size(); ++part) {
        for (float x : part_values(b, part, in.at(b.parts[part]))) v[at++] = x;
      }
    }
  }
  double& at(const View& view, std::int64_t r, std::int64_t c) {
    const std::int64_t ld = plan_.buffers[static_cast<std::size_t>(view.buffer)].cols;
    return v_.at(view.buffer)[static_cast<std::size_t>((view.row0 + r) * ld + view.col0 + c)];
  }
  double store(double v) const { return stored(plan_.dtype, v); }
  std::map<int, std::vector<double>>& values() { return v_; }

  // Runs a step of this plan alone; false for a collective (replay_ranks runs those).
  bool local(const Step& step) {
    if (const auto* q = std::get_if<QuantizeStep>(&step)) {
      std::vector<float> x(static_cast<std::size_t>(q->x.rows * q->x.cols));
      for (std::int64_t r = 0; r < q->x.rows; ++r)
        for (std::int64_t c = 0; c < q->x.cols; ++c)
          x[static_cast<std::size_t>(r * q->x.cols + c)] = static_cast<float>(at(q->x, r, c));
      mats_[q->out.codes.buffer] =
          q->static_scale ? quantize_with_scales(x.data(), q->x.rows, q->x.cols, q->dtype,
                                                 q->out.kind, {static_scales_.at(q->out.scales)})
                          : quantize(x.data(), q->x.rows, q->x.cols, q->dtype, q->out.kind);
    } else if (const auto* g = std::get_if<ScaledGemmStep>(&step)) {
      gemm(*g);
    } else if (const auto* gg = std::get_if<GroupedScaledGemmStep>(&step)) {
      for (const auto& member : gg->gemms) gemm(member);
    } else if (const auto* a = std::get_if<ActAndMulStep>(&step)) {
      for (std::int64_t r = 0; r < a->out.rows; ++r)
        for (std::int64_t c = 0; c < a->out.cols; ++c)
          at(a->out, r, c) =
              store(ops::act_and_mul(a->act, a->limit, at(a->gate, r, c * a->col_stride),
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
          at(sa->dst, dst, c) = store(at(sa->dst, dst, c) + w * at(sa->src, r, c));
      }
    } else if (const auto* lin = std::get_if<GemmStep>(&step)) {  // an unquantized layer
      for (std::int64_t r = 0; r < lin->y.rows; ++r)
        for (std::int64_t c = 0; c < lin->y.cols; ++c) {
          double acc = lin->has_bias() ? at(lin->bias, c, 0) : 0.0;
          for (std::int64_t k = 0; k < lin->x.cols; ++k) acc += at(lin->x, r, k) * at(lin->w, c, k);
          at(lin->y, r, c) = store(acc);
        }
    } else if (const auto* sg = std::get_if<SigmoidGateRowsStep>(&step)) {
      for (std::int64_t r = 0; r < sg->x.rows; ++r) {
        const double scale = 1.0 / (1.0 + std::exp(-at(sg->gate, r, 0)));
        for (std::int64_t c = 0; c < sg->x.cols; ++c)
          at(sg->x, r, c) = store(at(sg->x, r, c) * scale);
      }
    } else if (const auto* n = std::get_if<RmsNormStep>(&step)) {
      for (std::int64_t r = 0; r < n->x.rows; ++r) {
        double sum = 0;
        for (std::int64_t c = 0; c < n->x.cols; ++c) sum += at(n->x, r, c) * at(n->x, r, c);
        const double inv =
            1.0 / std::sqrt(sum / static_cast<double>(n->x.cols) + static_cast<double>(n->eps));
        for (std::int64_t c = 0; c < n->x.cols; ++c)
          at(n->out, r, c) = store(at(n->x, r, c) * inv * at(n->weight, 0, c));
      }
    } else if (std::holds_alternative<AllReduceStep>(step) ||
               std::holds_alternative<AllGatherStep>(step) ||
               std::holds_alternative<AllGatherRowsStep>(step) ||
               std::holds_alternative<ReduceScatterStep>(step)) {
      return false;
    } else {
      throw std::logic_error("plan " + plan_.op + "/" + plan_.variant +
                             ": a step the quantized reference does not replay");
    }
    return true;
  }

 private:
  void gemm(const ScaledGemmStep& g) {
    const QuantMat& xm = mats_.at(g.x.codes.buffer);
    const std::vector<double> y = dequantized_product(
        row_window(xm, g.x.codes.row0, g.x.codes.rows), mats_.at(g.w.codes.buffer));
    for (std::int64_t r = 0; r < g.y.rows; ++r)
      for (std::int64_t c = 0; c < g.y.cols; ++c)
        at(g.y, r, c) = store(y[static_cast<std::size_t>(r * g.y.cols + c)]);
  }
  const Plan& plan_;
  std::map<int, QuantMat>& mats_;
  const std::map<int, float>& static_scales_;
  std::map<int, std::vector<double>> v_;  // by buffer: [rows, cols], row-major
};

// Every rank's replay in step (the plans are one pipeline's ranks: the same steps in the same
// order), each collective across all of them: sums in float64, stored once.
void replay_ranks(const std::vector<const Plan*>& plans, std::vector<HostReplay>& ranks) {
  const std::size_t n = ranks.size();
  for (std::size_t i = 0; i < plans.front()->steps.size(); ++i) {
    const Step& step = plans.front()->steps[i];
    bool all_local = true;
    for (std::size_t r = 0; r < n; ++r) all_local &= ranks[r].local(plans[r]->steps.at(i));
    if (all_local) continue;
    const auto sum = [&](const auto& view_of, std::int64_t row, std::int64_t c) {
      double s = 0;
      for (std::size_t r = 0; r < n; ++r) s += ranks[r].at(view_of(r), row, c);
      return ranks.front().store(s);
    };
    if (const auto* ar = std::get_if<AllReduceStep>(&step)) {
      const auto view = [&](std::size_t r) {
        return std::get<AllReduceStep>(plans[r]->steps[i]).data;
      };
      for (std::int64_t row = 0; row < ar->data.rows; ++row)
        for (std::int64_t c = 0; c < ar->data.cols; ++c) {
          const double s = sum(view, row, c);
          for (std::size_t r = 0; r < n; ++r) ranks[r].at(view(r), row, c) = s;
        }
    } else if (const auto* ag = std::get_if<AllGatherStep>(&step)) {
      for (std::size_t r = 0; r < n; ++r) {
        const auto& mine = std::get<AllGatherStep>(plans[r]->steps[i]);
        for (std::size_t from = 0; from < n; ++from) {
          const auto& theirs = std::get<AllGatherStep>(plans[from]->steps[i]);
          for (std::int64_t row = 0; row < ag->src.rows; ++row)
            for (std::int64_t c = 0; c < ag->src.cols; ++c)
              ranks[r].at(mine.dst, row, static_cast<std::int64_t>(from) * ag->src.cols + c) =
                  ranks[from].at(theirs.src, row, c);
        }
      }
    } else if (const auto* gr = std::get_if<AllGatherRowsStep>(&step)) {
      for (std::size_t r = 0; r < n; ++r) {
        const auto& mine = std::get<AllGatherRowsStep>(plans[r]->steps[i]);
        for (std::size_t from = 0; from < n; ++from) {
          const auto& theirs = std::get<AllGatherRowsStep>(plans[from]->steps[i]);
          for (std::int64_t row = 0; row < gr->src.rows; ++row)
            for (std::int64_t c = 0; c < gr->src.cols; ++c)
              ranks[r].at(mine.dst, static_cast<std::int64_t>(from) * gr->src.rows + row, c) =
                  ranks[from].at(theirs.src, row, c);
        }
      }
    } else if (const auto* rs = std::get_if<ReduceScatterStep>(&step)) {
      const auto src = [&](std::size_t r) {
        return std::get<ReduceScatterStep>(plans[r]->steps[i]).src;
      };
      for (std::size_t r = 0; r < n; ++r) {
        const auto& mine = std::get<ReduceScatterStep>(plans[r]->steps[i]);
        for (std::int64_t row = 0; row < rs->dst.rows; ++row)
          for (std::int64_t c = 0; c < rs->dst.cols; ++c)
            ranks[r].at(mine.dst, row, c) =
                sum(src, static_cast<std::int64_t>(r) * rs->dst.rows + row, c);
      }
    }
  }
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

namespace {

// The plan's quantized buffers as the workspace fills them: weights quantized at load (or a
// checkpoint's stored codes and scales), static input scales.
void load_quantized(const Plan& plan, const LogicalTensors& in, const TensorSource* weights,
                    std::map<int, QuantMat>& mats, std::map<int, float>& static_scales) {
  for (int i = 0; i < static_cast<int>(plan.buffers.size()); ++i) {
    const BufferSpec& b = plan.buffers[static_cast<std::size_t>(i)];
    if (!b.quantized) continue;
    if (b.store == BufferSpec::Store::scales) {
      if (const auto stored = stored_static_scale(plan, weights)) {  // a checkpoint's input_scale
        static_scales[i] = *stored;
        continue;
      }
      float amax = 0;  // the given scale: calibrated on the whole input
      for (const auto& part : b.parts)
        for (float v : in.at(part)) amax = std::max(amax, std::fabs(v));
      static_scales[i] = dynamic_scale(b.quantized->dtype, amax);
    } else if (auto stored = stored_quantized_buffer(plan, b, weights)) {
      mats[i] = std::move(*stored);  // a quantized checkpoint's codes and scales
    } else {
      std::vector<std::vector<float>> parts;
      for (std::size_t part = 0; part < b.parts.size(); ++part)
        parts.push_back(part_values(b, part, in.at(b.parts[part])));
      mats[i] = quantize_shards(parts, b.part_rows, b.cols, b.quantized->dtype, b.quantized->kind,
                                b.quantized->fusion);
    }
  }
}

// Every output's first `rows` rows (all: -1) from replayed buffer values.
ReferenceOutputs outputs_of(const Plan& plan, const std::map<int, std::vector<double>>& y,
                            std::int64_t rows) {
  ReferenceOutputs out;
  for (const auto& [name, v] : plan.outputs) {
    const auto& m = y.at(v.buffer);
    const std::int64_t ld = plan.buffers[static_cast<std::size_t>(v.buffer)].cols;
    const std::int64_t n = rows < 0 ? v.rows : std::min(rows, v.rows);
    std::vector<double> slice;
    slice.reserve(static_cast<std::size_t>(n * v.cols));
    for (std::int64_t r = 0; r < n; ++r) {
      const auto* row = m.data() + (v.row0 + r) * ld + v.col0;
      slice.insert(slice.end(), row, row + v.cols);
    }
    out[name] = std::move(slice);
  }
  return out;
}

}  // namespace

std::vector<ReferenceOutputs> dequantized_tp_reference(const std::vector<Plan>& ranks,
                                                       const LogicalTensors& whole,
                                                       const TensorSource* weights) {
  std::vector<std::map<int, QuantMat>> mats(ranks.size());
  std::vector<std::map<int, float>> static_scales(ranks.size());
  std::vector<HostReplay> replays;
  std::vector<const Plan*> plans;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    load_quantized(ranks[r], whole, weights, mats[r], static_scales[r]);
    replays.emplace_back(ranks[r], whole, mats[r], static_scales[r]);
    plans.push_back(&ranks[r]);
  }
  replay_ranks(plans, replays);
  std::vector<ReferenceOutputs> out;
  for (std::size_t r = 0; r < ranks.size(); ++r)
    out.push_back(outputs_of(ranks[r], replays[r].values(), -1));
  return out;
}

ReferenceOutputs dequantized_reference(const Plan& plan, const LogicalTensors& in,
                                       std::int64_t rows, const TensorSource* weights) {
  std::map<int, QuantMat> mats;          // by codes buffer
  std::map<int, float> static_scales;    // by scales buffer
  std::map<int, std::vector<double>> y;  // by output buffer: [rows, cols]
  load_quantized(plan, in, weights, mats, static_scales);
  if (plan.moe || is_tp_op(plan.op)) {  // every step over whole buffers (one rank: tp = 1)
    if (plan.shard.tp > 1 && !plan.moe)
      throw std::logic_error(
          "dequantized_reference: a TP plan at tp > 1 needs every rank's "
          "(dequantized_tp_reference)");
    HostReplay replay(plan, in, mats, static_scales);
    for (const Step& step : plan.steps)
      if (!replay.local(step))
        throw std::logic_error("plan " + plan.op + "/" + plan.variant + ": a collective at tp 1");
    return outputs_of(plan, replay.values(), rows);
  }
  const auto buffer_cols = [&](int buffer) {
    return plan.buffers[static_cast<std::size_t>(buffer)].cols;
  };
  for (const Step& step : plan.steps) {
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
