#include "tp_quant.hpp"

#include <map>

namespace fusebench::ops {

std::vector<std::string> tp_quant_variants(const QuantSpec&) {
  return {"naive", "paired", "sp", "overlap"};
}

AccuracyReference tp_quant_reference(const Plan& measured, std::int64_t rows) {
  return {build_plan(measured.op, "paired", measured.shard, rows, measured.dtype), true};
}

std::string tp_quant_shard_fusion(const QuantSpec& spec, const std::string&) {
  if (spec.weights != WeightScales::tensor) return "column layer: stacked (exact)";
  return "column layer: " +
         (spec.dtype == QuantDType::int8
              ? std::string("channelwise (exact; vLLM's INT8 w8a8)")
              : std::string("max-scale requantization (vLLM's fused FP8; lossy)"));
}

namespace {

// vLLM's merged form of a column layer's shards for `spec` (Fp8LinearMethod: max scale;
// the INT8 w8a8 methods: convert_to_channelwise); one part needs none.
ShardFusion fusion_of(const BufferSpec& w, const QuantSpec& spec) {
  if (w.parts.size() < 2 || spec.weights != WeightScales::tensor) return ShardFusion::stack;
  return spec.dtype == QuantDType::int8 ? ShardFusion::channelwise : ShardFusion::max_scale;
}

// vLLM's block rule for this rank's weight (a window of the logical tensors): the column
// layer's output shards and the row layer's input shard must be whole 128-blocks.
void check_block_shape(const Plan& p, const BufferSpec& w, const std::string& label) {
  std::int64_t output_size = 0;
  for (const auto& win : w.part_windows) output_size += win.logical_rows;
  const std::int64_t input_size = w.part_windows.empty() ? w.cols : w.part_windows[0].logical_cols;
  const std::string why =
      fp8_block_shape_refusal(input_size, output_size, w.cols, w.part_rows, p.shard.tp);
  if (!why.empty())
    throw std::invalid_argument(p.op + "/" + p.variant + " at " + p.quant->name() +
                                " tp=" + std::to_string(p.shard.tp) +
                                " is refused as vLLM refuses " + label + ": " + why);
}

}  // namespace

Plan quantize_pipeline(Plan p, const QuantSpec& spec) {
  const std::string what = p.op + " at " + spec.name();
  if (spec.scheme == ActScheme::static_scale)
    throw std::invalid_argument(what +
                                ": static input scales are not modelled in the TP pipelines (the "
                                "row layer's input is an intermediate with no calibrated scale); "
                                "use dynamic activations");
  if (op_has_bias(p.op, p.shard))  // on every rank: o_proj's and down's are on rank 0 alone
    throw std::invalid_argument(what +
                                ": the model's layers have a bias, which the quantized variants "
                                "do not add yet");
  p.quant = spec;
  const ScaleKind wk = scale_kind(spec.weights), xk = scale_kind(spec.activations);
  std::map<int, QuantView> weights;  // by weight buffer: quantized once, whatever reads it
  std::vector<Step> steps;
  std::vector<StepOrder> order;
  std::vector<int> moved(p.steps.size());  // old step index -> new (a GEMM: its scaled GEMM)
  const bool ordered = !p.order.empty();
  const auto remap = [&](std::vector<int> after) {
    for (int& a : after) a = moved[static_cast<std::size_t>(a)];
    return after;
  };
  for (std::size_t i = 0; i < p.steps.size(); ++i) {
    const StepOrder o = ordered ? p.order[i] : StepOrder{};
    const auto* g = std::get_if<GemmStep>(&p.steps[i]);
    if (g == nullptr) {
      steps.push_back(p.steps[i]);
      order.push_back({o.lane, remap(o.after)});
      moved[i] = static_cast<int>(steps.size()) - 1;
      continue;
    }
    auto [it, fresh] = weights.try_emplace(g->w.buffer);
    if (fresh) {
      const BufferSpec& w = p.buffers[static_cast<std::size_t>(g->w.buffer)];
      if (spec.weights == WeightScales::block) check_block_shape(p, w, g->label);
      it->second = quantize_weight_buffer(p, g->w.buffer, spec.dtype, wk, fusion_of(w, spec));
    }
    // The quantize, where the GEMM was in the order; the scaled GEMM after it on its lane.
    const std::string name = "x_" + g->label + "_" + std::to_string(i);
    QuantizeStep q = make_quantize(p, name, g->x, spec.dtype, xk, "quantize_" + g->label);
    const QuantView xq = q.out;
    steps.push_back(std::move(q));
    order.push_back({o.lane, remap(o.after)});
    steps.push_back(ScaledGemmStep{g->label, xq, it->second, g->y, spec.dtype});
    order.push_back({o.lane, {}});
    moved[i] = static_cast<int>(steps.size()) - 1;
  }
  p.steps = std::move(steps);
  p.order = ordered ? std::move(order) : std::vector<StepOrder>{};
  p.quant_outputs = {"out"};
  p.check_order();
  return p;
}

}  // namespace fusebench::ops
