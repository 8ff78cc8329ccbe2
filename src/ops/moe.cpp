// The routed-expert block of one MoE layer at M tokens (issue 30), every variant computing
// y = shared(x) + sum over token t's k experts e of w[t, e] * down_e(act(gate_e(x_t)) * up_e(x_t))
// from one routing (ShardShape::moe: the rule and source; Plan::moe: the assignment it gives):
//   per_expert        the eager loop (transformers' MoE blocks): per active expert, gather its
//                     rows, one w13 GEMM (gate/up fused), act-and-mul, down GEMM, scatter-add
//                     scaled by the routing weight: 5 launches per active expert;
//   per_expert_split  the same with gate and up as two GEMMs: 6 per active expert;
//   grouped           one gather, one grouped GEMM over every active expert's w13, one
//                     act-and-mul, one grouped GEMM for w2, one combine: 5 launches at any M;
//   padded            each expert's rows padded to vLLM's block size by M (moe_align_block_size),
//                     the blocks run as strided-batched GEMMs of one fixed shape (what a CUDA
//                     graph can capture), at the cost of the padding rows' FLOPs (Plan::moe).
// The shared expert (DeepSeek, GLM-4-MoE, Llama-4, ...) runs first, gate/up fused, and writes y
// (qwen2_moe's then scaled row by row by sigmoid(x . shared_expert_gate): an [M, 1] GEMV and one
// sigmoid-scale launch); the combine adds the routed experts onto it. Llama-4's router weight
// multiplies the expert's input rows (apply_router_weight_on_input): the gather scales them and
// the combine adds the outputs unscaled, in every variant.
// Weights: w13 [E*2I, H] (expert e's gate/up rows 2I at row e*2I, stacked gate then up, or
// interleaved as gpt-oss stores them), w2 [E*H, I]; every expert is allocated, only the active
// experts' are read. Stacked, expert e's w13 is two parts, w_expert{e}_gate and w_expert{e}_up (as
// vLLM's FusedMoE weight_loader puts w1 and w3 into w13), so that a checkpoint serves them
// (HfLayerWeights::add_expert); interleaved, one part w_expert{e}_gate_up.
#include <cmath>
#include <memory>

#include "fusebench/routing.hpp"
#include "quant_projection.hpp"
#include "tp_common.hpp"

namespace fusebench::ops {
namespace {

std::string expert_tensor(const char* kind, std::int64_t e, const char* what) {
  return std::string(kind) + "_expert" + std::to_string(e) + "_" + what;
}

// Expert e's w13 (kind "w") or its bias ("b") parts: [gate; up] (I rows each), or the one
// interleaved part (2I rows).
std::vector<std::pair<std::string, std::int64_t>> w13_parts_of(const ShardShape& s,
                                                               const char* kind, std::int64_t e) {
  if (s.interleaved_gate_up) return {{expert_tensor(kind, e, "gate_up"), 2 * s.intermediate}};
  return {{expert_tensor(kind, e, "gate"), s.intermediate},
          {expert_tensor(kind, e, "up"), s.intermediate}};
}

// The logical tensor the parts make, rows stacked (what the reference multiplies by).
std::vector<float> stacked(const LogicalTensors& in,
                           const std::vector<std::pair<std::string, std::int64_t>>& parts) {
  std::vector<float> out;
  for (const auto& [name, rows] : parts) {
    const std::vector<float>& part = in.at(name);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

// Row r of the stacked parts, each row `cols` values, without copying them.
std::vector<const float*> stacked_rows(
    const LogicalTensors& in, const std::vector<std::pair<std::string, std::int64_t>>& parts,
    std::int64_t cols) {
  std::vector<const float*> out;
  for (const auto& [name, rows] : parts) {
    const float* part = in.at(name).data();
    for (std::int64_t r = 0; r < rows; ++r) out.push_back(part + r * cols);
  }
  return out;
}

std::vector<std::pair<std::string, std::int64_t>> shared_gate_up_parts(std::int64_t shared) {
  return {{"w_shared_expert_gate", shared}, {"w_shared_expert_up", shared}};
}

// qwen2_moe's shared_expert_gate, a Linear(hidden, 1): one row (not the shared expert's gate_proj,
// which is w_shared_expert_gate).
constexpr const char* kSharedSigmoidGate = "w_shared_expert_sigmoid_gate";

bool gated_shared(const ShardShape& s) {
  return s.moe->shared_intermediate > 0 && s.moe->rule.shared_expert_gate;
}

// What the block does not build, refused naming why (the sweep refuses the op with it).
void check_block(const ShardShape& s, const std::string& variant) {
  if (!s.moe || s.mlp != LayerKind::expert || s.intermediate <= 0)
    throw std::invalid_argument("moe: this shard has no routed experts (the model is not MoE)");
  if (s.tp != 1)
    throw std::invalid_argument(
        "moe: tp=" + std::to_string(s.tp) +
        ": moe is the block on one rank; across ranks (TP-sharded experts against expert "
        "parallelism) run --ops=tp_moe (docs/tp.md), or moe at --tp=1");
  const MoeBlock& b = *s.moe;
  if (b.shared_intermediate > 0 && s.mlp_bias)
    throw std::invalid_argument("moe: a shared expert with biases is not built");
  if (variant == "per_expert_split" && s.interleaved_gate_up)
    throw std::invalid_argument(
        "moe/per_expert_split: the model stores w13 interleaved (gate, up, gate, up rows), so gate "
        "and up are no row windows of it");
}

// The routed rows of one plan: its routing (Plan::moe) and, per row of the expert buffers, the
// token it holds and its routing weight. Row r holds slot expert_slots[r] in expert order (the
// permutation moe_align_block_size sorts into); padded: each expert's rows rounded up to the block
// with padding rows (-1).
struct RoutedRows {
  std::shared_ptr<MoeRouting> moe;
  std::vector<std::int64_t> start;  // first row of each expert, and the end
  std::vector<std::int64_t> token;
  std::vector<float> scale;
  // Llama-4 (apply_router_weight_on_input): the routing weight scales the gathered input row
  // (in_scale) and the combine adds the rows unscaled (scale 1); empty otherwise.
  std::vector<float> in_scale;
  std::int64_t block = 0;  // padded's BLOCK_SIZE_M
  std::int64_t rows() const { return start.back(); }
};

RoutedRows route(const ShardShape& s, std::int64_t m, bool padded) {
  const MoeBlock& b = *s.moe;
  RoutedRows out;
  out.moe = std::make_shared<MoeRouting>();
  out.moe->assignment = b.router ? make_routing(b.source, b.rule, m, s.hidden, b.seed, *b.router)
                                 : make_routing(b.source, b.rule, m, s.hidden, b.seed);
  const RoutingAssignment& a = out.moe->assignment;
  const std::int64_t e_count = a.experts, k = a.top_k, h = s.hidden, inter = s.intermediate;
  const std::vector<std::int64_t> per_expert = a.rows_per_expert();
  out.start.assign(static_cast<std::size_t>(e_count) + 1, 0);
  if (padded) {
    out.block = vllm_block_size_m(m);
    out.moe->padded = align_block_rows(per_expert, out.block);
    out.moe->padding_flops =
        rows_flops(out.moe->padded.wasted_rows(), {{2 * inter, h}, {h, inter}});
  }
  for (std::int64_t e = 0; e < e_count; ++e) {
    const std::int64_t n = per_expert[static_cast<std::size_t>(e)];
    out.start[static_cast<std::size_t>(e) + 1] =
        out.start[static_cast<std::size_t>(e)] +
        (padded ? (n + out.block - 1) / out.block * out.block : n);
  }
  out.token.assign(static_cast<std::size_t>(out.rows()), -1);
  out.scale.assign(static_cast<std::size_t>(out.rows()), 0.0f);
  if (b.rule.weight_on_input) out.in_scale.assign(static_cast<std::size_t>(out.rows()), 0.0f);
  for (std::int64_t e = 0; e < e_count; ++e) {
    for (std::int64_t j = 0; j < a.rows(e); ++j) {
      const std::int64_t slot = a.expert_slots[static_cast<std::size_t>(a.expert_offset[e] + j)];
      const auto r = static_cast<std::size_t>(out.start[static_cast<std::size_t>(e)] + j);
      out.token[r] = slot / k;
      const float w = a.weights[static_cast<std::size_t>(slot)];
      if (b.rule.weight_on_input) {
        out.in_scale[r] = w;
        out.scale[r] = 1.0f;
      } else {
        out.scale[r] = w;
      }
    }
  }
  return out;
}

template <class V>
V slice(const V& v, std::int64_t r0, std::int64_t n) {
  return V(v.begin() + r0, v.begin() + r0 + n);
}

// qwen2_moe: y = sigmoid(x . shared_expert_gate) * y, an [M, 1] GEMV in the plan's dtype (an
// nn.Linear, which vLLM leaves unquantized in a quantized model too) and the row scale.
void add_shared_sigmoid_gate(Plan& p, const ShardShape& s, int x, int y) {
  if (!gated_shared(s)) return;
  const int wg = add_weight(p, "w_shared_sigmoid_gate", {{kSharedSigmoidGate, 1}}, s.hidden);
  const int g = add_output(p, "shared_gate", p.tokens, 1);
  p.steps.push_back(GemmStep{"shared_expert_gate", whole(p, x), whole(p, wg), whole(p, g)});
  p.steps.push_back(SigmoidGateRowsStep{"shared_sigmoid_scale", whole(p, y), whole(p, g)});
}

// The quantized block's shared expert, which writes y first: a dense MLP (vLLM builds it from
// MergedColumnParallelLinear and RowParallelLinear, not FusedMoE), so quantized as the linear
// methods do: gate/up merged for the spec (fp8 per tensor: the larger shard scale; int8 per
// tensor: one scale per output row; row and block scales stacked), each GEMM quantizing its
// input in the region.
void add_quant_shared_expert(Plan& p, const ShardShape& s, int x, int y, const QuantSpec& spec) {
  const std::int64_t h = s.hidden, shared = s.moe->shared_intermediate, m = p.tokens;
  const QuantDType dt = spec.dtype;
  const ScaleKind wk = scale_kind(spec.weights), xk = scale_kind(spec.activations);
  const ShardFusion fusion = spec.weights != WeightScales::tensor ? ShardFusion::stack
                             : dt == QuantDType::int8             ? ShardFusion::channelwise
                                                                  : ShardFusion::max_scale;
  const auto parts = shared_gate_up_parts(shared);
  const QuantView w13 = add_quant_weight(
      p, "w_shared_gate_up",
      {{parts[0].first, shared, {shared, h, 0, 0}}, {parts[1].first, shared, {shared, h, 0, 0}}}, h,
      dt, wk, fusion);
  const QuantView w2 =
      add_quant_weight(p, "w_shared_down", {{"w_shared_expert_down", h, {h, shared, 0, 0}}}, shared,
                       dt, wk, ShardFusion::stack);
  const int gu = add_output(p, "shared_gate_up", m, 2 * shared);
  const int act = add_output(p, "shared_act", m, shared);
  const QuantView xq = add_quantize(p, "shared_x", whole(p, x), dt, xk, "quantize_shared_x");
  p.steps.push_back(ScaledGemmStep{"shared_gate_up_proj", xq, w13, whole(p, gu), dt});
  p.steps.push_back(ActAndMulStep{tp::act_label(s.activation), columns(p, gu, 0, shared),
                                  columns(p, gu, shared, shared), whole(p, act), s.activation,
                                  s.activation_limit, 1});
  const QuantView aq = add_quantize(p, "shared_act", whole(p, act), dt, xk, "quantize_shared_act");
  p.steps.push_back(ScaledGemmStep{"shared_down_proj", aq, w2, whole(p, y), dt});
  add_shared_sigmoid_gate(p, s, x, y);
}

// ---- Quantized (fp8, int8: docs/quant.md, docs/moe.md) ----------------------------------------
// As vLLM's Fp8MoEMethod / CompressedTensorsW8A8{Fp8,Int8}MoEMethod build the block: expert e's
// w13 (w1 gate, w3 up) and w2 quantized at load, the activations of each GEMM (the gathered rows
// for w13, the act-and-mul output for w2) quantized in the region, one counted launch each:
//   per_expert        per active expert: quantize its rows, w13, act, quantize, w2 (each expert its
//                     own layer: its own dynamic activation scales);
//   per_expert_split  gate and up apart, each shard its own weight scale (the exact split: each
//                     shard a layer of its own quantizes its input, as qkv's split);
//   grouped, padded   one quantize per stage (vLLM's fused_moe quantizes a1 and a2 once), each
//                     stage one grouped scaled GEMM over the active experts.
// Per-tensor weights: w13 requantized to max(w1 scale, w3 scale) per expert (vLLM's MoE kernel
// takes one w13 scale per expert: lossy on the smaller shard), except per_expert_split; per-channel
// and block scales stack exactly.

// The block's variants, dense or quantized: the same four.
std::vector<std::string> block_variants() {
  return {"per_expert", "per_expert_split", "grouped", "padded"};
}

std::vector<std::string> quant_variants(const QuantSpec&) { return block_variants(); }

// The quantized block's refusals, naming why; vLLM's block rule first (at tp > 1 it is what a
// 768-wide expert at tp 8 hits), then the block's own (check_block: tp > 1, ...).
void check_quant_block(const ShardShape& s, const QuantSpec& spec, const std::string& variant) {
  if (spec.weights == WeightScales::block && s.moe && s.intermediate > 0) {
    // Fp8MoEMethod.create_weights (block_quant): gate's and up's output (merged into w13) must be
    // whole block_n blocks at any tp; with tp > 1 down's input must be whole block_k blocks.
    // (With tp > 1 down's input_size_per_partition is the same I/tp, against block_k = 128.)
    std::string why;
    if (s.intermediate % kQuantBlock != 0)
      why = "The output_size of gate's and up's weight = " + std::to_string(s.intermediate) +
            " is not divisible by weight quantization block_n = " + std::to_string(kQuantBlock) +
            ".";
    if (!why.empty())
      throw std::invalid_argument(
          "moe/" + variant + " at " + spec.name() +
          " is refused as vLLM refuses it (Fp8MoEMethod, 128x128 weight blocks: the expert "
          "intermediate size per rank must be a multiple of 128" +
          (s.tp > 1
               ? ", here " + std::to_string(s.intermediate * s.tp) + "/tp " + std::to_string(s.tp)
               : std::string{}) +
          "): " + why);
  }
  check_block(s, variant);
  if (s.mlp_bias || s.interleaved_gate_up)
    throw std::invalid_argument(
        "moe at " + spec.name() +
        ": the quantized block adds no expert biases and does not interleave gate/up rows "
        "(gpt-oss) yet");
  if (const std::int64_t shared = s.moe->shared_intermediate;
      shared > 0 && spec.weights == WeightScales::block) {  // its merged gate/up: whole blocks
    const std::string why =
        fp8_block_shape_refusal(s.hidden, 2 * shared, s.hidden, {shared, shared}, s.tp);
    if (!why.empty())
      throw std::invalid_argument(
          "moe/" + variant + " at " + spec.name() +
          " is refused as vLLM refuses the shared expert's gate_up_proj: " + why);
  }
  if (s.moe->rule.weight_on_input)
    throw std::invalid_argument(
        "moe at " + spec.name() +
        ": the quantized block does not scale the gathered rows by the routing weight "
        "(apply_router_weight_on_input, Llama-4) yet");
  if (spec.scheme == ActScheme::static_scale)
    throw std::invalid_argument(
        "moe at " + spec.name() +
        ": a static input scale for w2 needs a calibration of the act-and-mul output, which the "
        "suite does not run yet (vLLM takes w13's and w2's input_scale, max over the experts, "
        "from the checkpoint); the dynamic fp8 runs");
}

// The block's dense shared expert, which writes y first: gate/up fused.
void add_shared_expert(Plan& p, const ShardShape& s, int x, int y) {
  const std::int64_t h = s.hidden, shared = s.moe->shared_intermediate, m = p.tokens;
  const int ws13 = add_weight(p, "w_shared_gate_up", shared_gate_up_parts(shared), h);
  const int ws2 = add_weight(p, "w_shared_down", {{"w_shared_expert_down", h}}, shared);
  const int gu = add_output(p, "shared_gate_up", m, 2 * shared);
  const int act = add_output(p, "shared_act", m, shared);
  p.steps.push_back(GemmStep{"shared_gate_up_proj", whole(p, x), whole(p, ws13), whole(p, gu)});
  p.steps.push_back(ActAndMulStep{tp::act_label(s.activation), columns(p, gu, 0, shared),
                                  columns(p, gu, shared, shared), whole(p, act), s.activation,
                                  s.activation_limit, 1});
  p.steps.push_back(GemmStep{"shared_down_proj", whole(p, act), whole(p, ws2), whole(p, y)});
  add_shared_sigmoid_gate(p, s, x, y);
}

// One builder of the block, dense or quantized (a spec on the plan): the same routing, buffers
// and stages; the spec changes the expert weights (quantized at load, the active experts'
// alone), the shared expert, and each GEMM (a quantize of its input and a scaled GEMM).
class BlockBuilder {
 public:
  BlockBuilder(Plan& p, const ShardShape& s, const std::optional<QuantSpec>& spec,
               const std::string& variant, RoutedRows& routed)
      : p_(p),
        s_(s),
        spec_(spec),
        routed_(routed),
        split_(variant == "per_expert_split"),
        padded_(variant == "padded"),
        h_(s.hidden),
        inter_(s.intermediate) {}

  void emit() {
    const std::int64_t m = p_.tokens, e_count = routed_.moe->assignment.experts;
    x_ = add_input(p_, "x", m, h_);
    if (!spec_) add_dense_weights(e_count);
    y_ = add_output(p_, "y", m, h_);
    shared_ = s_.moe->shared_intermediate > 0;
    if (shared_ && spec_) add_quant_shared_expert(p_, s_, x_, y_, *spec_);  // writes y
    if (shared_ && !spec_) add_shared_expert(p_, s_, x_, y_);               // writes y
    if (spec_) add_quant_weights(e_count);
    const std::int64_t rows = routed_.rows();
    xs_ = add_output(p_, "expert_x", rows, h_);
    gu_ = split_ ? -1 : add_output(p_, "expert_gate_up", rows, 2 * inter_);
    g_ = split_ ? add_output(p_, "expert_gate", rows, inter_) : -1;
    u_ = split_ ? add_output(p_, "expert_up", rows, inter_) : -1;
    act_ = add_output(p_, "expert_act", rows, inter_);
    out_ = add_output(p_, "expert_out", rows, h_);
    if (split_ || p_.variant == "per_expert") {
      expert_loop();
    } else if (spec_) {
      grouped_quant();
    } else {
      grouped_dense();
    }
    p_.outputs = {{"y", whole(p_, y_)}};
    if (spec_) p_.quant_outputs = {"y"};
  }

 private:
  // Each active expert's weights quantized at load: w13 (gate then up, as FusedMoE's
  // weight_loader stacks w1 and w3; split: w1 and w3 apart) and w2.
  struct QuantWeights {
    QuantView w13, w1, w3, w2;
  };

  // Every expert's w13 and w2 (and biases), one buffer each.
  void add_dense_weights(std::int64_t e_count) {
    std::vector<std::pair<std::string, std::int64_t>> w13_parts, w2_parts, b13_parts, b2_parts;
    for (std::int64_t e = 0; e < e_count; ++e) {
      for (auto& part : w13_parts_of(s_, "w", e)) w13_parts.push_back(std::move(part));
      w2_parts.emplace_back(expert_tensor("w", e, "down"), h_);
      for (auto& part : w13_parts_of(s_, "b", e)) b13_parts.push_back(std::move(part));
      b2_parts.emplace_back(expert_tensor("b", e, "down"), h_);
    }
    w13_ = add_weight(p_, "w13", w13_parts, h_);
    w2_ = add_weight(p_, "w2", w2_parts, inter_);
    b13_ = s_.mlp_bias ? add_weight(p_, "b13", b13_parts, 1) : -1;
    b2_ = s_.mlp_bias ? add_weight(p_, "b2", b2_parts, 1) : -1;
  }

  void add_quant_weights(std::int64_t e_count) {
    const RoutingAssignment& a = routed_.moe->assignment;
    const QuantDType dt = spec_->dtype;
    const ScaleKind wk = scale_kind(spec_->weights);
    const ShardFusion w13_fusion =
        spec_->weights == WeightScales::tensor ? ShardFusion::max_scale : ShardFusion::stack;
    qw_.resize(static_cast<std::size_t>(e_count));
    for (std::int64_t e = 0; e < e_count; ++e) {
      if (a.rows(e) == 0) continue;
      const std::string n = std::to_string(e);
      const tp::WindowPart gate{expert_tensor("w", e, "gate"), inter_, {inter_, h_, 0, 0}},
          up{expert_tensor("w", e, "up"), inter_, {inter_, h_, 0, 0}},
          down{expert_tensor("w", e, "down"), h_, {h_, inter_, 0, 0}};
      QuantWeights& ew = qw_[static_cast<std::size_t>(e)];
      if (split_) {
        ew.w1 = add_quant_weight(p_, "w1_expert" + n, {gate}, h_, dt, wk, ShardFusion::stack);
        ew.w3 = add_quant_weight(p_, "w3_expert" + n, {up}, h_, dt, wk, ShardFusion::stack);
      } else {
        ew.w13 = add_quant_weight(p_, "w13_expert" + n, {gate, up}, h_, dt, wk, w13_fusion);
      }
      ew.w2 = add_quant_weight(p_, "w2_expert" + n, {down}, inter_, dt, wk, ShardFusion::stack);
    }
  }

  View part(int buffer, std::int64_t r0, std::int64_t n) const {
    View v = whole(p_, buffer);
    v.row0 = r0;
    v.rows = n;
    return v;
  }

  static QuantView window(QuantView q, std::int64_t r0, std::int64_t n) {
    q.codes.row0 = r0;
    q.codes.rows = n;
    return q;
  }

  QuantView quantize(const std::string& name, const View& v, const std::string& label) {
    return add_quantize(p_, name, v, spec_->dtype, scale_kind(spec_->activations), label);
  }

  ActAndMulStep act_step(std::int64_t r0, std::int64_t n) const {
    if (split_)
      return ActAndMulStep{tp::act_label(s_.activation),
                           part(g_, r0, n),
                           part(u_, r0, n),
                           part(act_, r0, n),
                           s_.activation,
                           s_.activation_limit,
                           1};
    View gate = part(gu_, r0, n), up = gate;
    gate.cols = up.cols = inter_;
    up.col0 = s_.interleaved_gate_up ? 1 : inter_;  // interleaved: gate = columns 0, 2, ...
    return ActAndMulStep{tp::act_label(s_.activation),
                         gate,
                         up,
                         part(act_, r0, n),
                         s_.activation,
                         s_.activation_limit,
                         s_.interleaved_gate_up ? 2 : 1};
  }

  GemmStep w13_gemm(std::int64_t e, std::int64_t r0, std::int64_t n) const {
    GemmStep step{"w13_expert" + std::to_string(e), part(xs_, r0, n),
                  part(w13_, e * 2 * inter_, 2 * inter_), part(gu_, r0, n)};
    if (b13_ >= 0) step.bias = part(b13_, e * 2 * inter_, 2 * inter_);
    return step;
  }

  GemmStep w2_gemm(std::int64_t e, std::int64_t r0, std::int64_t n) const {
    GemmStep step{"w2_expert" + std::to_string(e), part(act_, r0, n), part(w2_, e * h_, h_),
                  part(out_, r0, n)};
    if (b2_ >= 0) step.bias = part(b2_, e * h_, h_);
    return step;
  }

  // Expert e's gate/up GEMMs on its rows [r0, r0 + n) (split: gate and up apart).
  void expert_up(std::int64_t e, std::int64_t r0, std::int64_t n) {
    const std::string en = "expert" + std::to_string(e);
    const QuantWeights* ew = spec_ ? &qw_[static_cast<std::size_t>(e)] : nullptr;
    if (!split_ && ew) {
      const QuantView xq = quantize(en + "_x", part(xs_, r0, n), "quantize_" + en);
      p_.steps.push_back(ScaledGemmStep{"w13_" + en, xq, ew->w13, part(gu_, r0, n), spec_->dtype});
      return;
    }
    if (!split_) {
      p_.steps.push_back(w13_gemm(e, r0, n));
      return;
    }
    for (const auto& [buffer, row0, name] :
         {std::tuple{g_, std::int64_t{0}, "gate"}, std::tuple{u_, inter_, "up"}}) {
      if (ew) {
        const QuantView xq = quantize(en + "_x_" + name, part(xs_, r0, n),
                                      "quantize_" + std::string(name) + "_" + en);
        p_.steps.push_back(ScaledGemmStep{std::string(name) + "_" + en, xq,
                                          row0 == 0 ? ew->w1 : ew->w3, part(buffer, r0, n),
                                          spec_->dtype});
        continue;
      }
      GemmStep step{std::string(name) + "_" + en, part(xs_, r0, n),
                    part(w13_, e * 2 * inter_ + row0, inter_), part(buffer, r0, n)};
      if (b13_ >= 0) step.bias = part(b13_, e * 2 * inter_ + row0, inter_);
      p_.steps.push_back(std::move(step));
    }
  }

  // Expert e's down GEMM (quantized: its input quantized first).
  void expert_down(std::int64_t e, std::int64_t r0, std::int64_t n) {
    if (!spec_) {
      p_.steps.push_back(w2_gemm(e, r0, n));
      return;
    }
    const std::string en = "expert" + std::to_string(e);
    const QuantView aq = quantize(en + "_act", part(act_, r0, n), "quantize_act_" + en);
    p_.steps.push_back(ScaledGemmStep{"w2_" + en, aq, qw_[static_cast<std::size_t>(e)].w2,
                                      part(out_, r0, n), spec_->dtype});
  }

  // per_expert, per_expert_split: per active expert gather, GEMMs, act, down, combine.
  void expert_loop() {
    const RoutingAssignment& a = routed_.moe->assignment;
    const bool on_input = !routed_.in_scale.empty();
    bool first = true;
    for (std::int64_t e = 0; e < a.experts; ++e) {
      const std::int64_t r0 = routed_.start[static_cast<std::size_t>(e)], n = a.rows(e);
      if (n == 0) continue;
      p_.steps.push_back(
          GatherRowsStep{"gather_expert" + std::to_string(e), whole(p_, x_), part(xs_, r0, n),
                         slice(routed_.token, r0, n),
                         on_input ? slice(routed_.in_scale, r0, n) : std::vector<float>{}});
      expert_up(e, r0, n);
      p_.steps.push_back(act_step(r0, n));
      expert_down(e, r0, n);
      p_.steps.push_back(ScatterAddStep{"combine_expert" + std::to_string(e), part(out_, r0, n),
                                        whole(p_, y_), slice(routed_.token, r0, n),
                                        slice(routed_.scale, r0, n), first && !shared_});
      first = false;
    }
  }

  // Calls f(e, r0, n) for each member of a grouped stage: each active expert's rows (padded:
  // one member per block, all of one shape, the fused_moe kernel's tiles).
  template <class F>
  void for_members(F&& f) const {
    const std::vector<std::int64_t>& start = routed_.start;
    for (std::int64_t e = 0; e + 1 < static_cast<std::int64_t>(start.size()); ++e) {
      const std::int64_t r0 = start[static_cast<std::size_t>(e)],
                         n = start[static_cast<std::size_t>(e) + 1] - r0;
      for (std::int64_t b0 = 0; b0 < n; b0 += padded_ ? routed_.block : n)
        f(e, r0 + b0, padded_ ? routed_.block : n);
    }
  }

  void grouped_dense() {
    GroupedGemmStep up{padded_ ? "w13_padded" : "w13_grouped", {}, padded_},
        down{padded_ ? "w2_padded" : "w2_grouped", {}, padded_};
    for_members([&](std::int64_t e, std::int64_t r0, std::int64_t n) {
      up.gemms.push_back(w13_gemm(e, r0, n));
      down.gemms.push_back(w2_gemm(e, r0, n));
    });
    p_.steps.push_back(
        GatherRowsStep{"gather", whole(p_, x_), whole(p_, xs_), routed_.token, routed_.in_scale});
    p_.steps.push_back(std::move(up));
    p_.steps.push_back(act_step(0, routed_.rows()));
    p_.steps.push_back(std::move(down));
    combine();
  }

  // One quantize and one grouped scaled GEMM per stage (vLLM's fused_moe quantizes a1 and a2
  // once).
  void grouped_quant() {
    const QuantDType dt = spec_->dtype;
    p_.steps.push_back(GatherRowsStep{"gather", whole(p_, x_), whole(p_, xs_), routed_.token});
    const QuantView xq = quantize("expert_x", whole(p_, xs_), "quantize_x");
    const std::string kind = padded_ ? "padded" : "grouped";
    GroupedScaledGemmStep up{"w13_" + kind, {}, padded_}, down{"w2_" + kind, {}, padded_};
    for_members([&](std::int64_t e, std::int64_t r0, std::int64_t n) {
      up.gemms.push_back(ScaledGemmStep{"w13_expert" + std::to_string(e), window(xq, r0, n),
                                        qw_[static_cast<std::size_t>(e)].w13, part(gu_, r0, n),
                                        dt});
    });
    p_.steps.push_back(std::move(up));
    p_.steps.push_back(act_step(0, routed_.rows()));
    const QuantView aq = quantize("expert_act", whole(p_, act_), "quantize_act");
    for_members([&](std::int64_t e, std::int64_t r0, std::int64_t n) {
      down.gemms.push_back(ScaledGemmStep{"w2_expert" + std::to_string(e), window(aq, r0, n),
                                          qw_[static_cast<std::size_t>(e)].w2, part(out_, r0, n),
                                          dt});
    });
    p_.steps.push_back(std::move(down));
    combine();
  }

  void combine() {
    p_.steps.push_back(ScatterAddStep{"combine", whole(p_, out_), whole(p_, y_), routed_.token,
                                      routed_.scale, !shared_});
  }

  Plan& p_;
  const ShardShape& s_;
  const std::optional<QuantSpec>& spec_;
  RoutedRows& routed_;
  const bool split_, padded_;
  const std::int64_t h_, inter_;
  bool shared_ = false;
  int x_ = -1, y_ = -1, xs_ = -1, gu_ = -1, g_ = -1, u_ = -1, act_ = -1, out_ = -1;
  int w13_ = -1, w2_ = -1, b13_ = -1, b2_ = -1;  // dense
  std::vector<QuantWeights> qw_;                 // quantized, per expert (active ones set)
};

// The op's one builder: the block at the request's dtype, quantized where it carries a spec.
Plan build(const ShardShape& s, std::int64_t m, const PlanRequest& request,
           const std::string& variant) {
  if (request.quant) {
    check_quant_block(s, *request.quant, variant);
  } else {
    check_block(s, variant);
  }
  const std::vector<std::string> variants = {"per_expert", "per_expert_split", "grouped", "padded"};
  if (std::find(variants.begin(), variants.end(), variant) == variants.end())
    unknown_variant(moe_op(), variant);
  RoutedRows routed = route(s, m, variant == "padded");
  Plan p = start_plan("moe", s, m, request.dtype, variant);
  p.quant = request.quant;
  BlockBuilder(p, s, request.quant, variant, routed).emit();
  p.moe = std::move(routed.moe);
  return p;
}

// The whole block in float64 over the plan's token rows (the first rows of the sweep's shape when
// the verifier caps them: Plan::moe is then the whole shape's routing, whose first rows these are).
ReferenceOutputs reference(const Plan& p, const LogicalTensors& in) {
  const ShardShape& s = p.shard;
  const RoutingAssignment& a = p.moe->assignment;
  const std::int64_t m = p.tokens, h = s.hidden, inter = s.intermediate, k = a.top_k,
                     shared = s.moe->shared_intermediate;
  const std::vector<float>& x = in.at("x");
  std::vector<double> y(static_cast<std::size_t>(m * h), 0.0);
  if (shared > 0) {
    const auto gu =
        reference_linear(x, stacked(in, shared_gate_up_parts(shared)), m, 2 * shared, h);
    std::vector<double> act(static_cast<std::size_t>(m * shared));
    for (std::int64_t t = 0; t < m; ++t) {
      for (std::int64_t c = 0; c < shared; ++c)
        act[static_cast<std::size_t>(t * shared + c)] = act_and_mul(
            s.activation, s.activation_limit, gu[static_cast<std::size_t>(t * 2 * shared + c)],
            gu[static_cast<std::size_t>(t * 2 * shared + shared + c)]);
    }
    y = reference_linear(act, in.at("w_shared_expert_down"), m, h, shared);
    if (gated_shared(p.shard)) {  // qwen2_moe: times sigmoid(x . shared_expert_gate)
      const auto g = reference_linear(x, in.at(kSharedSigmoidGate), m, 1, h);
      for (std::int64_t t = 0; t < m; ++t) {
        const double sig = 1.0 / (1.0 + std::exp(-g[static_cast<std::size_t>(t)]));
        for (std::int64_t c = 0; c < h; ++c) y[static_cast<std::size_t>(t * h + c)] *= sig;
      }
    }
  }
  const bool on_input = s.moe->rule.weight_on_input;
  std::vector<double> gu(static_cast<std::size_t>(2 * inter)), act(static_cast<std::size_t>(inter));
  std::vector<double> xt(static_cast<std::size_t>(h));
  for (std::int64_t t = 0; t < m; ++t) {
    for (std::int64_t i = 0; i < k; ++i) {
      const auto slot = static_cast<std::size_t>(t * k + i);
      const std::int64_t e = a.expert_ids[slot];
      // Llama-4 (apply_router_weight_on_input): the weight scales the expert's input rows and
      // the output is added unscaled; else the output is scaled.
      const double w = a.weights[slot], w_in = on_input ? w : 1.0, w_out = on_input ? 1.0 : w;
      for (std::int64_t c = 0; c < h; ++c)
        xt[static_cast<std::size_t>(c)] =
            w_in * static_cast<double>(x[static_cast<std::size_t>(t * h + c)]);
      const std::vector<const float*> w13 = stacked_rows(in, w13_parts_of(s, "w", e), h);
      const std::vector<const float*> b13 =
          s.mlp_bias ? stacked_rows(in, w13_parts_of(s, "b", e), 1) : std::vector<const float*>{};
      const std::vector<float>& w2 = in.at(expert_tensor("w", e, "down"));
      for (std::int64_t r = 0; r < 2 * inter; ++r) {
        const auto row = static_cast<std::size_t>(r);
        double acc = s.mlp_bias ? static_cast<double>(*b13[row]) : 0.0;
        for (std::int64_t c = 0; c < h; ++c)
          acc += static_cast<double>(w13[row][c]) * xt[static_cast<std::size_t>(c)];
        gu[static_cast<std::size_t>(r)] = acc;
      }
      for (std::int64_t c = 0; c < inter; ++c) {
        const std::int64_t gr = s.interleaved_gate_up ? 2 * c : c,
                           ur = s.interleaved_gate_up ? 2 * c + 1 : inter + c;
        act[static_cast<std::size_t>(c)] =
            act_and_mul(s.activation, s.activation_limit, gu[static_cast<std::size_t>(gr)],
                        gu[static_cast<std::size_t>(ur)]);
      }
      for (std::int64_t r = 0; r < h; ++r) {
        double acc =
            s.mlp_bias ? in.at(expert_tensor("b", e, "down"))[static_cast<std::size_t>(r)] : 0.0;
        for (std::int64_t c = 0; c < inter; ++c)
          acc += static_cast<double>(w2[static_cast<std::size_t>(r * inter + c)]) *
                 act[static_cast<std::size_t>(c)];
        y[static_cast<std::size_t>(t * h + r)] += w_out * acc;
      }
    }
  }
  return {{"y", std::move(y)}};
}

bool has_variant(const ShardShape& s, const std::string& variant) {
  return variant != "per_expert_split" || !s.interleaved_gate_up;
}

// cuBLAS's grouped and pointer-array batched GEMMs have no bias epilogue, and no kernel adds
// every active expert's bias yet: with expert biases (gpt-oss) only the loops run.
std::string cuda_variant_refusal(const ShardShape& shard, const std::string& variant) {
  if (!shard.mlp_bias || (variant != "grouped" && variant != "padded")) return {};
  return "expert biases on cuda: cublasGemmGroupedBatchedEx and cublasGemmBatchedEx have no bias "
         "epilogue, and a kernel adding every expert's bias is not built yet";
}

// The entry's routing (and the padding of the padded variant): routing.hpp moe_json.
void entry_fields(const Plan& plan, nlohmann::json& fields) {
  if (plan.moe) fields["moe"] = moe_json(*plan.moe);
}

}  // namespace

OpInfo moe_op() {
  OpInfo op{"moe",
            "the routed-expert block of one MoE layer (shared expert included): an eager loop of "
            "5 launches per active expert (per_expert; per_expert_split: 6, gate and up apart) vs "
            "one grouped GEMM per stage (grouped) vs every expert padded to vLLM's block size as "
            "fixed-shape batched GEMMs (padded)",
            {"per_expert", "per_expert_split", "grouped", "padded"},
            build,
            reference,
            has_variant,
            quant_variants,
            "per_expert_split"};
  op.in_default_sweep = false;  // every expert's weights: on request
  op.reads_all_experts = true;
  op.own_flags = {"--routing"};
  // Grouped and padded are what its comparison is about on every backend (the CPU's grouped
  // GEMM: one parallel region, docs/measured.md).
  op.one_launch_everywhere = true;
  op.setup = moe_setup;
  op.quant_refusal_on_cuda =
      "the quantized moe block runs on the CPU backend only so far: the cuda backend has no "
      "grouped scaled GEMM (per-expert FP8/INT8 scales through cuBLASLt or CUTLASS) yet";
  op.cuda_variant_refusal = cuda_variant_refusal;
  op.entry_fields = entry_fields;
  // Its accuracy: the measured plan's first rows, routed as in the whole shape (not as `rows`
  // tokens would be routed).
  op.quant_reference = [](const Plan& measured, std::int64_t rows) {
    AccuracyReference ref{measured};
    ref.plan.tokens = rows;
    return ref;
  };
  return op;
}

}  // namespace fusebench::ops
