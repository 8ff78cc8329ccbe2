// Tensor-parallel MLP, one rank's share: gate_up column-parallel GEMM (this rank's
// intermediate/tp rows of w_gate and w_up and of their biases, vLLM MergedColumnParallelLinear),
// the model's gated activation, down row-parallel GEMM on this rank's intermediate slice (its
// bias on rank 0 only, as RowParallelLinear adds it), then an all-reduce of [M, hidden].
//   paired: no communication between the column and the row layer; one all-reduce.
//   naive:  the gate_up output is all-gathered ([M, 2*intermediate], rank-major blocks
//           [gate_r | up_r]); the activation and down read this rank's slice of it through views;
//           then the all-reduce.
// At tp=1 there is nothing to communicate (vLLM skips the collective), so the plans have none.
#include "tp_common.hpp"

namespace fusebench::ops {
namespace {

Plan build(const ShardShape& s, std::int64_t m, DType dtype, const std::string& variant) {
  if (variant != "naive" && variant != "paired") unknown_variant(tp_mlp_op(), variant);
  if (s.intermediate <= 0 || is_attention_layer(s.mlp))
    throw std::invalid_argument("tp_mlp: this shard has no MLP layer (intermediate_size 0)");
  if (s.interleaved_gate_up)
    throw std::invalid_argument(
        "tp_mlp: an interleaved gate/up weight (gpt-oss experts) is not "
        "modelled");
  const tp::Full f = tp::full_sizes(s);
  Plan p = start_plan("tp_mlp", s, m, dtype, variant);
  const std::int64_t h = s.hidden, il = s.intermediate, r = s.rank;
  const std::string gate_name = tp::mlp_tensor(s.mlp, "w", "gate"),
                    up_name = tp::mlp_tensor(s.mlp, "w", "up"),
                    down_name = tp::mlp_tensor(s.mlp, "w", "down");
  const int x = add_input(p, "x", m, h);
  const int w_gu = tp::add_windowed(p, "w_gate_up", BufferRole::weight,
                                    {{gate_name, il, {f.intermediate, h, r * il, 0}},
                                     {up_name, il, {f.intermediate, h, r * il, 0}}},
                                    h);
  const int w_down = tp::add_windowed(p, "w_down", BufferRole::weight,
                                      {{down_name, h, {h, f.intermediate, 0, r * il}}}, il);
  const int gu = add_output(p, "gate_up", m, 2 * il);
  const int act = add_output(p, "act", m, il);
  const int out = add_output(p, "out", m, h);
  GemmStep column{"gate_up_proj", whole(p, x), whole(p, w_gu), whole(p, gu)};
  if (s.mlp_bias) {
    column.bias = whole(
        p,
        tp::add_windowed(p, "b_gate_up", BufferRole::weight,
                         {{tp::mlp_tensor(s.mlp, "b", "gate"), il, {f.intermediate, 1, r * il, 0}},
                          {tp::mlp_tensor(s.mlp, "b", "up"), il, {f.intermediate, 1, r * il, 0}}},
                         1));
  }
  p.steps.push_back(std::move(column));
  View gate = columns(p, gu, 0, il), up = columns(p, gu, il, il);
  if (variant == "naive" && s.tp > 1) {
    const int g = add_output(p, "gate_up_gathered", m, 2 * il * s.tp);
    p.steps.push_back(AllGatherStep{"all_gather_gate_up", whole(p, gu), whole(p, g)});
    gate = columns(p, g, r * 2 * il, il);  // this rank's slice of the gathered input
    up = columns(p, g, r * 2 * il + il, il);
    p.outputs["gate_up_gathered"] = whole(p, g);
  }
  p.steps.push_back(ActAndMulStep{tp::act_label(s.activation), gate, up, whole(p, act),
                                  s.activation, s.activation_limit});
  GemmStep row{"down_proj", whole(p, act), whole(p, w_down), whole(p, out)};
  // RowParallelLinear: every rank holds the bias, rank 0 alone adds it (bias_ = None if
  // tp_rank > 0), since the all-reduce would add it tp times.
  if (s.mlp_bias) {
    const std::string b = tp::mlp_tensor(s.mlp, "b", "down");
    const int buffer = tp::add_windowed(p, "b_down", BufferRole::weight, {{b, h, {h, 1, 0, 0}}}, 1);
    if (r == 0) row.bias = whole(p, buffer);
  }
  p.steps.push_back(std::move(row));
  if (s.tp > 1) p.steps.push_back(AllReduceStep{"all_reduce_down", whole(p, out)});
  p.outputs["out"] = whole(p, out);
  return p;
}

// The unsharded pair: out = (act(x w_gate^T + b_gate) * (x w_up^T + b_up)) w_down^T + b_down; and,
// for naive, every rank's gate_up block side by side.
ReferenceOutputs reference(const Plan& p, const LogicalTensors& in) {
  const ShardShape& s = p.shard;
  const tp::Full f = tp::full_sizes(s);
  const std::int64_t m = p.tokens, h = s.hidden, il = s.intermediate;
  const auto& x = in.at("x");
  const std::vector<double> xd(x.begin(), x.end());
  const auto project = [&](const char* what) {
    auto y = reference_linear(xd, in.at(tp::mlp_tensor(s.mlp, "w", what)), m, f.intermediate, h);
    if (s.mlp_bias) add_bias(y, m, f.intermediate, in.at(tp::mlp_tensor(s.mlp, "b", what)), 0);
    return y;
  };
  const auto gate = project("gate");
  const auto up = project("up");
  std::vector<double> act(gate.size());
  for (std::size_t i = 0; i < act.size(); ++i)
    act[i] = act_and_mul(s.activation, s.activation_limit, gate[i], up[i]);
  ReferenceOutputs out;
  out["out"] =
      reference_linear(act, in.at(tp::mlp_tensor(s.mlp, "w", "down")), m, h, f.intermediate);
  if (s.mlp_bias)  // once, whatever tp is
    add_bias(out["out"], m, h, in.at(tp::mlp_tensor(s.mlp, "b", "down")), 0);
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
          "TP MLP: gate_up column-parallel + gated activation + down row-parallel + all-reduce "
          "(naive: + all-gather of the gate_up output)",
          {"naive", "paired"},
          build,
          reference};
}

}  // namespace fusebench::ops
