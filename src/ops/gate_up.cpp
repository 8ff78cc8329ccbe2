// gate/up projections with the gated activation of the model (SiLU, GeLU-tanh, swigluoai): two
// GEMMs then an activation reading two buffers (split), or one GEMM on the merged weight then the
// activation over its two halves (fused, vLLM's MergedColumnParallelLinear; for one routed
// expert, one expert's slice of FusedMoE's w13). Weights and biases are windows of the whole
// logical tensors of the layer (dense, expert or shared expert), rank `rank`'s rows under TP.
//   gpt-oss stores w13 interleaved (gate, up, gate, up, ... rows): fused does the same and the
//   activation reads every other column, as vLLM's SwigluOAIAndMul does.
//   bias: in the GEMMs (epilogue); fused_bias_kernel adds it in a separate kernel instead;
//   batched passes the two biases to the batched GEMM's epilogue (a bias batch stride).
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "quant_projection.hpp"
#include "tp_common.hpp"

namespace fusebench::ops {
namespace {

Plan build_dense(const ShardShape& s, std::int64_t m, DType dtype, const std::string& variant) {
  if (s.intermediate <= 0 || is_attention_layer(s.mlp))
    throw std::invalid_argument("gate_up: this shard has no MLP layer (intermediate_size 0)");
  if (variant == "fused_bias_kernel" && !s.mlp_bias)
    throw std::invalid_argument("gate_up/fused_bias_kernel: the model has no gate/up bias");
  Plan p = start_plan("gate_up", s, m, dtype, variant);
  const tp::Full f = tp::full_sizes(s);
  const std::int64_t h = s.hidden, inter = s.intermediate, i0 = s.rank * inter;
  const tp::WindowPart wg{tp::mlp_tensor(s.mlp, "w", "gate"), inter, {f.intermediate, h, i0, 0}},
      wu{tp::mlp_tensor(s.mlp, "w", "up"), inter, {f.intermediate, h, i0, 0}},
      bg{tp::mlp_tensor(s.mlp, "b", "gate"), inter, {f.intermediate, 1, i0, 0}},
      bu{tp::mlp_tensor(s.mlp, "b", "up"), inter, {f.intermediate, 1, i0, 0}};
  const auto act = [&](View gate, View up, View out, std::int64_t stride = 1) {
    return ActAndMulStep{tp::act_label(s.activation), gate,  up, out, s.activation,
                         s.activation_limit,          stride};
  };
  const int x = add_input(p, "x", m, h);
  if (variant == "split") {
    const int w_gate = tp::add_windowed(p, "w_gate", BufferRole::weight, {wg}, h);
    const int w_up = tp::add_windowed(p, "w_up", BufferRole::weight, {wu}, h);
    const int g = add_output(p, "gate", m, inter);
    const int u = add_output(p, "up", m, inter);
    const int a = add_output(p, "act", m, inter);
    GemmStep gate{"gate_proj", whole(p, x), whole(p, w_gate), whole(p, g)};
    GemmStep up{"up_proj", whole(p, x), whole(p, w_up), whole(p, u)};
    if (s.mlp_bias) {
      gate.bias = whole(p, tp::add_windowed(p, "b_gate", BufferRole::weight, {bg}, 1));
      up.bias = whole(p, tp::add_windowed(p, "b_up", BufferRole::weight, {bu}, 1));
    }
    p.steps.push_back(std::move(gate));
    p.steps.push_back(std::move(up));
    p.steps.push_back(act(whole(p, g), whole(p, u), whole(p, a)));
    p.outputs = {{"gate", whole(p, g)}, {"up", whole(p, u)}, {"act", whole(p, a)}};
  } else if (variant == "fused" || variant == "fused_bias_kernel") {
    const int w = tp::add_windowed(p, "w_gate_up", BufferRole::weight, {wg, wu}, h);
    p.buffers[static_cast<std::size_t>(w)].interleave_parts = s.interleaved_gate_up;
    const int y = add_output(p, "gate_up", m, 2 * inter);
    const int a = add_output(p, "act", m, inter);
    GemmStep g{"gate_up_proj", whole(p, x), whole(p, w), whole(p, y)};
    std::optional<BiasAddStep> separate;
    if (s.mlp_bias) {
      const int b = tp::add_windowed(p, "b_gate_up", BufferRole::weight, {bg, bu}, 1);
      p.buffers[static_cast<std::size_t>(b)].interleave_parts = s.interleaved_gate_up;
      if (variant == "fused") {
        g.bias = whole(p, b);
      } else {
        separate = BiasAddStep{"fused_bias_kernel", {{whole(p, y), whole(p, b)}}};
      }
    }
    p.steps.push_back(std::move(g));
    if (separate) p.steps.push_back(std::move(*separate));
    if (s.interleaved_gate_up) {
      // gate = columns 0, 2, 4, ...; up = columns 1, 3, 5, ... of the GEMM output.
      p.steps.push_back(act(View{y, 0, 0, m, inter}, View{y, 0, 1, m, inter}, whole(p, a), 2));
      p.outputs = {{"gate_up", whole(p, y)}, {"act", whole(p, a)}};
    } else {
      p.steps.push_back(act(columns(p, y, 0, inter), columns(p, y, inter, inter), whole(p, a)));
      p.outputs = {{"gate", columns(p, y, 0, inter)},
                   {"up", columns(p, y, inter, inter)},
                   {"act", whole(p, a)}};
    }
  } else if (variant == "batched") {
    // One strided-batched GEMM: batch 2 over the gate and up weights (stored at a fixed stride,
    // [w_gate; w_up]), x shared (stride 0), outputs [2, M, inter]: gate = rows [0, M), up = rows
    // [M, 2M). Then the activation over the two. Same weight bytes as fused; one launch.
    const int w = tp::add_windowed(p, "w_gate_up", BufferRole::weight, {wg, wu}, h);
    const int y =
        add_output(p, "gate_up_batched",
                   size_mul_i64(2, m, [&] { return p.size_context() + ": 2 x tokens"; }), inter);
    const int a = add_output(p, "act", m, inter);
    GemmStep gate{"gate_proj", whole(p, x), View{w, 0, 0, inter, h}, View{y, 0, 0, m, inter}};
    GemmStep up{"up_proj", whole(p, x), View{w, inter, 0, inter, h}, View{y, m, 0, m, inter}};
    if (s.mlp_bias) {  // the epilogue's bias batch stride steps from b_gate to b_up
      const int b = tp::add_windowed(p, "b_gate_up", BufferRole::weight, {bg, bu}, 1);
      gate.bias = View{b, 0, 0, inter, 1};
      up.bias = View{b, inter, 0, inter, 1};
    }
    const View gate_out = gate.y, up_out = up.y;
    p.steps.push_back(GroupedGemmStep{"gate_up_batched", {std::move(gate), std::move(up)}, true});
    p.steps.push_back(act(gate_out, up_out, whole(p, a)));
    p.outputs = {{"gate", gate_out}, {"up", up_out}, {"act", whole(p, a)}};
  } else {
    unknown_variant(gate_up_op(), variant);
  }
  return p;
}

Plan build_quantized(const ShardShape& s, std::int64_t m, DType dtype, const QuantSpec& spec,
                     const std::string& variant) {
  if (s.intermediate <= 0 || is_attention_layer(s.mlp))
    throw std::invalid_argument("gate_up: this shard has no MLP layer (intermediate_size 0)");
  check_quant_shard("gate_up", s.mlp_bias,
                    s.interleaved_gate_up
                        ? "the quantized variants do not interleave gate/up rows (gpt-oss) yet"
                        : "");
  Plan p = start_plan("gate_up", s, m, dtype, variant);
  p.quant = spec;
  const tp::Full f = tp::full_sizes(s);
  const std::int64_t h = s.hidden, inter = s.intermediate, i0 = s.rank * inter;
  const std::vector<ProjectionShard> shards = {
      {"gate",
       "gate_proj",
       {tp::mlp_tensor(s.mlp, "w", "gate"), inter, {f.intermediate, h, i0, 0}}},
      {"up", "up_proj", {tp::mlp_tensor(s.mlp, "w", "up"), inter, {f.intermediate, h, i0, 0}}}};
  const int x = add_input(p, "x", m, h);
  const auto y = add_quantized_projection(p, x, shards, "w_gate_up", "gate_up_proj", spec,
                                          2 * f.intermediate, gate_up_op());
  const int a = add_output(p, "act", m, inter);
  p.steps.push_back(ActAndMulStep{tp::act_label(s.activation), y[0], y[1], whole(p, a),
                                  s.activation, s.activation_limit, 1});
  p.outputs = {{"gate", y[0]}, {"up", y[1]}, {"act", whole(p, a)}};
  p.quant_outputs = {"gate", "up"};
  return p;
}

ReferenceOutputs reference(const Plan& p, const LogicalTensors& in) {
  const auto& s = p.shard;
  const std::int64_t m = p.tokens, h = s.hidden, inter = s.intermediate, i0 = s.rank * inter;
  const auto project = [&](const char* what) {
    auto y = reference_linear(
        in.at("x"), shard_rows(in.at(tp::mlp_tensor(s.mlp, "w", what)), h, i0, inter), m, inter, h);
    if (s.mlp_bias) add_bias(y, m, inter, in.at(tp::mlp_tensor(s.mlp, "b", what)), i0);
    return y;
  };
  auto gate = project("gate");
  auto up = project("up");
  std::vector<double> act(gate.size());
  for (std::size_t i = 0; i < act.size(); ++i)
    act[i] = act_and_mul(s.activation, s.activation_limit, gate[i], up[i]);
  ReferenceOutputs out;
  if (p.outputs.count("gate_up")) {  // the interleaved GEMM output
    std::vector<double> gu;
    gu.reserve(2 * gate.size());
    for (std::size_t i = 0; i < gate.size(); ++i) {
      gu.push_back(gate[i]);
      gu.push_back(up[i]);
    }
    out["gate_up"] = std::move(gu);
  }
  out["gate"] = std::move(gate);
  out["up"] = std::move(up);
  out["act"] = std::move(act);
  return out;
}

bool has_variant(const ShardShape& s, const std::string& variant) {
  return variant != "fused_bias_kernel" || s.mlp_bias;
}

// gate_up's layer:expert fixture runs the rows one routed expert gets: tokens * top_k / E_active,
// E_active the experts the tokens hit on average under uniform routing (at least 1; routing.hpp
// expected_active_experts): what one expert of the layer computes, not the M tokens the layer
// sees (docs/models.md).
bool routed_expert_rows(const ModelShape& model, const ShardShape& shard) {
  return shard.mlp == LayerKind::expert && model.experts > 0 && model.experts_per_token > 0;
}

std::int64_t rows(const ModelShape& model, const ShardShape& shard, std::int64_t tokens) {
  if (!routed_expert_rows(model, shard)) return tokens;
  const double active = expected_active_experts(tokens, model.experts, model.experts_per_token);
  const double per_expert = static_cast<double>(tokens * model.experts_per_token) / active;
  return std::max<std::int64_t>(1, std::llround(per_expert));
}

nlohmann::json rows_json(const ModelShape& model, const ShardShape& shard, std::int64_t tokens) {
  if (!routed_expert_rows(model, shard)) return nullptr;
  return {{"rows", rows(model, shard, tokens)},
          {"tokens", tokens},
          {"experts", model.experts},
          {"top_k", model.experts_per_token},
          {"expected_active_experts",
           expected_active_experts(tokens, model.experts, model.experts_per_token)},
          {"rule",
           "one routed expert's rows: tokens * top_k / expected_active_experts (uniform "
           "routing), rounded, at least 1; the whole block at its real routing is the moe op"}};
}

// The op's one builder: quantized where the request carries a spec.
Plan build(const ShardShape& s, std::int64_t m, const PlanRequest& request,
           const std::string& variant) {
  if (request.quant) return build_quantized(s, m, request.dtype, *request.quant, variant);
  return build_dense(s, m, request.dtype, variant);
}

}  // namespace

OpInfo gate_up_op() {
  OpInfo op{"gate_up",
            "gate/up projections + gated activation: 2 GEMMs + act (split) vs 1 GEMM + act "
            "(fused) vs 1 strided-batched GEMM + act (batched); with a bias, fused_bias_kernel "
            "adds it in a separate kernel instead of the GEMM's epilogue",
            {"split", "fused", "batched", "fused_bias_kernel"},
            build,
            reference,
            has_variant,
            quant_projection_variants};
  op.rows = rows;
  op.rows_json = rows_json;
  return op;
}

}  // namespace fusebench::ops
