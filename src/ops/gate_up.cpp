// gate/up projections with SiLU-and-mul: two GEMMs then an activation reading two buffers
// (split), or one GEMM on the merged weight then the activation over its two halves (fused,
// vLLM's MergedColumnParallelLinear).
#include "op_list.hpp"

namespace fusebench::ops {
namespace {

Plan build(const ShardShape& s, std::int64_t m, DType dtype, const std::string& variant) {
  Plan p = start_plan("gate_up", s, m, dtype, variant);
  const std::int64_t h = s.hidden, inter = s.intermediate;
  const int x = add_input(p, "x", m, h);
  if (variant == "split") {
    const int wg = add_weight(p, "w_gate", {{"w_gate", inter}}, h);
    const int wu = add_weight(p, "w_up", {{"w_up", inter}}, h);
    const int g = add_output(p, "gate", m, inter);
    const int u = add_output(p, "up", m, inter);
    const int a = add_output(p, "act", m, inter);
    p.steps.push_back(GemmStep{"gate_proj", whole(p, x), whole(p, wg), whole(p, g)});
    p.steps.push_back(GemmStep{"up_proj", whole(p, x), whole(p, wu), whole(p, u)});
    p.steps.push_back(SiluMulStep{"silu_and_mul", whole(p, g), whole(p, u), whole(p, a)});
    p.outputs = {{"gate", whole(p, g)}, {"up", whole(p, u)}, {"act", whole(p, a)}};
  } else if (variant == "fused") {
    const int w = add_weight(p, "w_gate_up", {{"w_gate", inter}, {"w_up", inter}}, h);
    const int y = add_output(p, "gate_up", m, 2 * inter);
    const int a = add_output(p, "act", m, inter);
    p.steps.push_back(GemmStep{"gate_up_proj", whole(p, x), whole(p, w), whole(p, y)});
    p.steps.push_back(SiluMulStep{"silu_and_mul", columns(p, y, 0, inter),
                                  columns(p, y, inter, inter), whole(p, a)});
    p.outputs = {{"gate", columns(p, y, 0, inter)},
                 {"up", columns(p, y, inter, inter)},
                 {"act", whole(p, a)}};
  } else if (variant == "batched") {
    // One strided-batched GEMM: batch 2 over the gate and up weights (stored at a fixed stride,
    // [w_gate; w_up]), x shared (stride 0), outputs [2, M, inter]: gate = rows [0, M), up = rows
    // [M, 2M). Then SiLU-and-mul over the two. Same weight bytes as fused; one launch.
    const int w = add_weight(p, "w_gate_up", {{"w_gate", inter}, {"w_up", inter}}, h);
    const int y = add_output(p, "gate_up_batched", 2 * m, inter);
    const int a = add_output(p, "act", m, inter);
    const View w_gate{w, 0, 0, inter, h}, w_up{w, inter, 0, inter, h};
    const View gate{y, 0, 0, m, inter}, up{y, m, 0, m, inter};
    p.steps.push_back(GroupedGemmStep{"gate_up_batched",
                                      {GemmStep{"gate_proj", whole(p, x), w_gate, gate},
                                       GemmStep{"up_proj", whole(p, x), w_up, up}},
                                      true});
    p.steps.push_back(SiluMulStep{"silu_and_mul", gate, up, whole(p, a)});
    p.outputs = {{"gate", gate}, {"up", up}, {"act", whole(p, a)}};
  } else {
    unknown_variant(gate_up_op(), variant);
  }
  return p;
}

ReferenceOutputs reference(const Plan& p, const LogicalTensors& in) {
  const auto& s = p.shard;
  const std::int64_t m = p.tokens, h = s.hidden, inter = s.intermediate;
  auto gate = reference_linear(in.at("x"), in.at("w_gate"), m, inter, h);
  auto up = reference_linear(in.at("x"), in.at("w_up"), m, inter, h);
  std::vector<double> act(gate.size());
  for (std::size_t i = 0; i < act.size(); ++i) act[i] = silu(gate[i]) * up[i];
  return {{"gate", std::move(gate)}, {"up", std::move(up)}, {"act", std::move(act)}};
}

}  // namespace

OpInfo gate_up_op() {
  return {"gate_up",
          "gate/up projections + SiLU-and-mul: 2 GEMMs + act (split) vs 1 GEMM + act (fused) vs 1 "
          "strided-batched GEMM + act (batched)",
          {"split", "fused", "batched"},
          build,
          reference};
}

}  // namespace fusebench::ops
