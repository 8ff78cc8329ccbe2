// Tensor-parallel MLP, one rank's share: gate_up column-parallel GEMM (this rank's
// intermediate/tp rows of w_gate and w_up, vLLM MergedColumnParallelLinear), SiLU-and-mul,
// down row-parallel GEMM on this rank's intermediate slice, then an all-reduce of [M, hidden].
//   paired: no communication between the column and the row layer; one all-reduce.
//   naive:  the gate_up output is all-gathered ([M, 2*intermediate], rank-major blocks
//           [gate_r | up_r]); SiLU-and-mul and down read this rank's slice of it through views;
//           then the all-reduce.
// At tp=1 there is nothing to communicate (vLLM skips the collective), so the plans have none.
#include "tp_common.hpp"

namespace fusebench::ops {
namespace {

Plan build(const ShardShape& s, std::int64_t m, DType dtype, const std::string& variant) {
  if (variant != "naive" && variant != "paired") unknown_variant(tp_mlp_op(), variant);
  const tp::Full f = tp::full_sizes(s);
  Plan p = start_plan("tp_mlp", s, m, dtype, variant);
  const std::int64_t h = s.hidden, il = s.intermediate, r = s.rank;
  const int x = add_input(p, "x", m, h);
  const int w_gu = tp::add_windowed(p, "w_gate_up", BufferRole::weight,
                                    {{"w_gate", il, {f.intermediate, h, r * il, 0}},
                                     {"w_up", il, {f.intermediate, h, r * il, 0}}},
                                    h);
  const int w_down = tp::add_windowed(p, "w_down", BufferRole::weight,
                                      {{"w_down", h, {h, f.intermediate, 0, r * il}}}, il);
  const int gu = add_output(p, "gate_up", m, 2 * il);
  const int act = add_output(p, "act", m, il);
  const int out = add_output(p, "out", m, h);
  p.steps.push_back(GemmStep{"gate_up_proj", whole(p, x), whole(p, w_gu), whole(p, gu)});
  View gate = columns(p, gu, 0, il), up = columns(p, gu, il, il);
  if (variant == "naive" && s.tp > 1) {
    const int g = add_output(p, "gate_up_gathered", m, 2 * il * s.tp);
    p.steps.push_back(AllGatherStep{"all_gather_gate_up", whole(p, gu), whole(p, g)});
    gate = columns(p, g, r * 2 * il, il);  // this rank's slice of the gathered input
    up = columns(p, g, r * 2 * il + il, il);
    p.outputs["gate_up_gathered"] = whole(p, g);
  }
  p.steps.push_back(SiluMulStep{"silu_and_mul", gate, up, whole(p, act)});
  p.steps.push_back(GemmStep{"down_proj", whole(p, act), whole(p, w_down), whole(p, out)});
  if (s.tp > 1) p.steps.push_back(AllReduceStep{"all_reduce_down", whole(p, out)});
  p.outputs["out"] = whole(p, out);
  return p;
}

// The unsharded pair: out = (silu(x w_gate^T) * (x w_up^T)) w_down^T; and, for naive, every
// rank's gate_up block side by side.
ReferenceOutputs reference(const Plan& p, const LogicalTensors& in) {
  const ShardShape& s = p.shard;
  const tp::Full f = tp::full_sizes(s);
  const std::int64_t m = p.tokens, h = s.hidden, il = s.intermediate;
  const auto& x = in.at("x");
  const std::vector<double> xd(x.begin(), x.end());
  const auto gate = reference_linear(xd, in.at("w_gate"), m, f.intermediate, h);
  const auto up = reference_linear(xd, in.at("w_up"), m, f.intermediate, h);
  std::vector<double> act(gate.size());
  for (std::size_t i = 0; i < act.size(); ++i) act[i] = silu(gate[i]) * up[i];
  ReferenceOutputs out;
  out["out"] = reference_linear(act, in.at("w_down"), m, h, f.intermediate);
  if (p.outputs.count("gate_up_gathered")) {
    std::vector<double> g;
    for (std::int64_t i = 0; i < m; ++i) {
      for (int rank = 0; rank < s.tp; ++rank) {
        for (const auto* src : {&gate, &up}) {
          for (std::int64_t j = 0; j < il; ++j)
            g.push_back((*src)[static_cast<std::size_t>(i * f.intermediate + rank * il + j)]);
        }
      }
    }
    out["gate_up_gathered"] = std::move(g);
  }
  return out;
}

}  // namespace

OpInfo tp_mlp_op() {
  return {"tp_mlp",
          "TP MLP: gate_up column-parallel + SiLU-and-mul + down row-parallel + all-reduce "
          "(naive: + all-gather of the gate_up output)",
          {"naive", "paired"},
          build,
          reference};
}

}  // namespace fusebench::ops
