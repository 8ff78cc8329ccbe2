// Tensor-parallel MLP, one rank's share: gate_up column-parallel GEMM (this rank's
// intermediate/tp rows of w_gate and w_up and of their biases, vLLM MergedColumnParallelLinear),
// the model's gated activation, down row-parallel GEMM on this rank's intermediate slice (its
// bias on rank 0 only, as RowParallelLinear adds it), then an all-reduce of [M, hidden].
//   paired: no communication between the column and the row layer; one all-reduce.
//   naive:  the gate_up output is all-gathered ([M, 2*intermediate], rank-major blocks
//           [gate_r | up_r]); the activation and down read this rank's slice of it through views;
//           then the all-reduce.
//   sp:     sequence parallel: x arrives as this rank's M/tp rows; all-gather (rows) -> gate_up
//           -> activation -> down -> reduce-scatter (rows) -> this rank's M/tp rows.
//   overlap: sp with the all-gather and the reduce-scatter in tp chunks on a communication
//           lane, each chunk's collective overlapping the neighbouring chunk's GEMM (fused
//           all-gather-matmul for gate_up, then the activation on all rows, then fused
//           matmul-reduce-scatter for down, as vLLM's async TP does).
// Every variant ends with the RMSNorm of the result (paired/naive on M rows after the
// all-reduce, sp/overlap on M/tp rows), and adds the same biases (down's on rank 0 only, on
// every chunk, before the reduction), so all compute the same thing (docs/tp.md).
// At tp=1 there is nothing to communicate (vLLM skips the collective), so the plans have none.
#include "tp_common.hpp"
#include "tp_quant.hpp"

namespace fusebench::ops {
namespace {

// This rank's weights and biases (absent views have buffer -1; down's bias on rank 0 only).
struct MlpWeights {
  int w_gate_up = -1, w_down = -1;
  View b_gate_up{}, b_down{};
};
MlpWeights add_weights(Plan& p, const ShardShape& s) {
  const tp::Full f = tp::full_sizes(s);
  const std::int64_t h = s.hidden, il = s.intermediate, r = s.rank;
  MlpWeights w;
  w.w_gate_up =
      tp::add_windowed(p, "w_gate_up", BufferRole::weight,
                       {{tp::mlp_tensor(s.mlp, "w", "gate"), il, {f.intermediate, h, r * il, 0}},
                        {tp::mlp_tensor(s.mlp, "w", "up"), il, {f.intermediate, h, r * il, 0}}},
                       h);
  w.w_down = tp::add_windowed(
      p, "w_down", BufferRole::weight,
      {{tp::mlp_tensor(s.mlp, "w", "down"), h, {h, f.intermediate, 0, r * il}}}, il);
  if (s.mlp_bias) {
    w.b_gate_up = whole(
        p,
        tp::add_windowed(p, "b_gate_up", BufferRole::weight,
                         {{tp::mlp_tensor(s.mlp, "b", "gate"), il, {f.intermediate, 1, r * il, 0}},
                          {tp::mlp_tensor(s.mlp, "b", "up"), il, {f.intermediate, 1, r * il, 0}}},
                         1));
    // RowParallelLinear: every rank holds the bias, rank 0 alone adds it (bias_ = None if
    // tp_rank > 0), since the all-reduce (or reduce-scatter) would add it tp times.
    const std::string b = tp::mlp_tensor(s.mlp, "b", "down");
    const int buffer = tp::add_windowed(p, "b_down", BufferRole::weight, {{b, h, {h, 1, 0, 0}}}, 1);
    if (r == 0) w.b_down = whole(p, buffer);
  }
  return w;
}

ActAndMulStep act_step(const ShardShape& s, View gate, View up, View out) {
  return ActAndMulStep{tp::act_label(s.activation), gate, up, out, s.activation,
                       s.activation_limit};
}

// sp and overlap (see the top of the file and tp_common.hpp for the row layout).
Plan build_sequence_parallel(const ShardShape& s, std::int64_t m, DType dtype,
                             const std::string& variant) {
  Plan p = start_plan("tp_mlp", s, m, dtype, variant);
  const std::int64_t h = s.hidden, il = s.intermediate;
  const tp::SpRows rows = tp::sp_rows(s, m);
  p.padded_tokens = rows.padded - m;
  const int x = tp::add_sp_input(p, rows, m, h);
  const MlpWeights w = add_weights(p, s);
  const bool comm = s.tp > 1;
  const int xg = comm ? add_output(p, "x_gathered", rows.padded, h) : x;
  const int gu = add_output(p, "gate_up", rows.padded, 2 * il);
  const int act = add_output(p, "act", rows.padded, il);
  const int z = add_output(p, "down_partial", rows.padded, h);
  const int o = comm ? add_output(p, "down_local", rows.local, h) : z;
  const int w_norm = tp::add_norm_weight(p, h);
  const int out = add_output(p, "out", rows.local, h);
  const auto activation = [&] {
    p.add_step(act_step(s, columns(p, gu, 0, il), columns(p, gu, il, il), whole(p, act)));
  };
  if (variant == "sp" || !comm) {
    if (comm) p.add_step(AllGatherRowsStep{"all_gather_x", whole(p, x), whole(p, xg)});
    p.add_step(
        GemmStep{"gate_up_proj", whole(p, xg), whole(p, w.w_gate_up), whole(p, gu), w.b_gate_up});
    activation();
    p.add_step(GemmStep{"down_proj", whole(p, act), whole(p, w.w_down), whole(p, z), w.b_down});
    if (comm) p.add_step(ReduceScatterStep{"reduce_scatter_down", whole(p, z), whole(p, o)});
    p.add_step(RmsNormStep{"rms_norm", whole(p, o), whole(p, w_norm), whole(p, out), tp::kNormEps});
  } else {
    const auto chunks = tp::overlap_chunks(rows.local, s.tp);
    tp::add_gathered_column_gemms(p, chunks, s.tp, x, xg, "gate_up_proj_chunk",
                                  whole(p, w.w_gate_up), gu, w.b_gate_up);
    activation();
    const auto act_rows = [&](const tp::Chunk& c) { return tp::gathered_rows(p, act, c, s.tp); };
    const int last = tp::add_scattered_row_gemms(p, chunks, s.tp, act_rows, "down_proj_chunk",
                                                 whole(p, w.w_down), z, w.b_down,
                                                 "reduce_scatter_down_chunk", o);
    p.add_step(RmsNormStep{"rms_norm", whole(p, o), whole(p, w_norm), whole(p, out), tp::kNormEps},
               0, {last});
  }
  p.outputs["out"] = whole(p, out);
  p.output_rows["out"] = {std::min(rows.row0, m), rows.real};
  return p;
}

Plan build_pipeline(const ShardShape& s, std::int64_t m, DType dtype, const std::string& variant) {
  if (variant != "naive" && variant != "paired" && variant != "sp" && variant != "overlap")
    unknown_variant(tp_mlp_op(), variant);
  if (s.intermediate <= 0 || is_attention_layer(s.mlp))
    throw std::invalid_argument("tp_mlp: this shard has no MLP layer (intermediate_size 0)");
  if (s.interleaved_gate_up)
    throw std::invalid_argument(
        "tp_mlp: an interleaved gate/up weight (gpt-oss experts) is not "
        "modelled");
  if (variant == "sp" || variant == "overlap") return build_sequence_parallel(s, m, dtype, variant);
  Plan p = start_plan("tp_mlp", s, m, dtype, variant);
  const std::int64_t h = s.hidden, il = s.intermediate, r = s.rank;
  const int x = add_input(p, "x", m, h);
  const MlpWeights w = add_weights(p, s);
  const int gu = add_output(p, "gate_up", m, 2 * il);
  const int act = add_output(p, "act", m, il);
  const int sum = add_output(p, "down_sum", m, h);
  p.steps.push_back(
      GemmStep{"gate_up_proj", whole(p, x), whole(p, w.w_gate_up), whole(p, gu), w.b_gate_up});
  View gate = columns(p, gu, 0, il), up = columns(p, gu, il, il);
  if (variant == "naive" && s.tp > 1) {
    const int g = add_output(p, "gate_up_gathered", m, 2 * il * s.tp);
    p.steps.push_back(AllGatherStep{"all_gather_gate_up", whole(p, gu), whole(p, g)});
    gate = columns(p, g, r * 2 * il, il);  // this rank's slice of the gathered input
    up = columns(p, g, r * 2 * il + il, il);
    p.outputs["gate_up_gathered"] = whole(p, g);
  }
  p.steps.push_back(act_step(s, gate, up, whole(p, act)));
  p.steps.push_back(
      GemmStep{"down_proj", whole(p, act), whole(p, w.w_down), whole(p, sum), w.b_down});
  if (s.tp > 1) p.steps.push_back(AllReduceStep{"all_reduce_down", whole(p, sum)});
  const int w_norm = tp::add_norm_weight(p, h);
  const int normed = add_output(p, "out", m, h);
  p.steps.push_back(
      RmsNormStep{"rms_norm", whole(p, sum), whole(p, w_norm), whole(p, normed), tp::kNormEps});
  p.outputs["out"] = whole(p, normed);
  return p;
}

// The unsharded pair: out = rms_norm((act(x w_gate^T + b_gate) * (x w_up^T + b_up)) w_down^T +
// b_down) (sp/overlap: this rank's rows of it over the padded rows, tp_common.hpp); and, for
// naive, every rank's gate_up block side by side.
ReferenceOutputs reference(const Plan& p, const LogicalTensors& in) {
  const ShardShape& s = p.shard;
  const tp::Full f = tp::full_sizes(s);
  const std::int64_t m = tp::padded_tokens_of(p), h = s.hidden, il = s.intermediate;
  const std::vector<double> xd = tp::reference_input(p, in.at("x"), h);
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
  auto down =
      reference_linear(act, in.at(tp::mlp_tensor(s.mlp, "w", "down")), m, h, f.intermediate);
  if (s.mlp_bias)  // once, whatever tp is
    add_bias(down, m, h, in.at(tp::mlp_tensor(s.mlp, "b", "down")), 0);
  ReferenceOutputs out;
  out["out"] = tp::rank_rows(p, tp::reference_rms_norm(down, m, h, in.at("w_norm")), h);
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

// The op's one builder: the pipeline at the request's dtype, and where the request carries a
// spec, the same plan with each GEMM quantized (quantize_pipeline, tp_quant.hpp).
Plan build(const ShardShape& s, std::int64_t m, const PlanRequest& request,
           const std::string& variant) {
  Plan p = build_pipeline(s, m, request.dtype, variant);
  if (!request.quant) return p;
  return quantize_pipeline(std::move(p), *request.quant);
}

}  // namespace

OpInfo tp_mlp_op() {
  OpInfo op{"tp_mlp",
            "TP MLP: gate_up column-parallel + gated activation + down row-parallel + all-reduce + "
            "RMSNorm (naive: + all-gather of the gate_up output; sp: all-gather + reduce-scatter "
            "of rows, norm on M/tp rows; overlap: sp in tp chunks overlapped with the GEMMs)",
            {"naive", "paired", "sp", "overlap"},
            build,
            reference,
            nullptr,
            tp_quant_variants,
            "naive"};
  op.in_default_sweep = false;  // a TP pipeline runs on request
  op.quant_reference = tp_quant_reference;
  op.quant_shard_fusion = tp_quant_shard_fusion;
  op.across_ranks = true;
  return op;
}

}  // namespace fusebench::ops
