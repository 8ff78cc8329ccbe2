// Tensor-parallel MLP, one rank's share: gate_up column-parallel GEMM (this rank's
// intermediate/tp rows of w_gate and w_up, vLLM MergedColumnParallelLinear), SiLU-and-mul,
// down row-parallel GEMM on this rank's intermediate slice, then an all-reduce of [M, hidden].
//   paired: no communication between the column and the row layer; one all-reduce.
//   naive:  the gate_up output is all-gathered ([M, 2*intermediate], rank-major blocks
//           [gate_r | up_r]); SiLU-and-mul and down read this rank's slice of it through views;
//           then the all-reduce.
//   sp:     sequence parallel: x arrives as this rank's M/tp rows; all-gather (rows) -> gate_up
//           -> SiLU-and-mul -> down -> reduce-scatter (rows) -> this rank's M/tp rows.
//   overlap: sp with the all-gather and the reduce-scatter in tp chunks on a communication
//           lane, each chunk's collective overlapping the neighbouring chunk's GEMM (fused
//           all-gather-matmul for gate_up, then SiLU-and-mul on all rows, then fused
//           matmul-reduce-scatter for down, as vLLM's async TP does).
// Every variant ends with the RMSNorm of the result (paired/naive on M rows after the
// all-reduce, sp/overlap on M/tp rows), so all compute the same thing (docs/tp.md).
// At tp=1 there is nothing to communicate (vLLM skips the collective), so the plans have none.
#include "tp_common.hpp"

namespace fusebench::ops {
namespace {

// sp and overlap (see the top of the file and tp_common.hpp for the row layout).
Plan build_sequence_parallel(const ShardShape& s, std::int64_t m, DType dtype,
                             const std::string& variant) {
  const tp::Full f = tp::full_sizes(s);
  Plan p = start_plan("tp_mlp", s, m, dtype, variant);
  const std::int64_t h = s.hidden, il = s.intermediate, r = s.rank;
  const tp::SpRows rows = tp::sp_rows(s, m);
  p.padded_tokens = rows.padded - m;
  const int x = tp::add_sp_input(p, rows, m, h);
  const int w_gu = tp::add_windowed(p, "w_gate_up", BufferRole::weight,
                                    {{"w_gate", il, {f.intermediate, h, r * il, 0}},
                                     {"w_up", il, {f.intermediate, h, r * il, 0}}},
                                    h);
  const int w_down = tp::add_windowed(p, "w_down", BufferRole::weight,
                                      {{"w_down", h, {h, f.intermediate, 0, r * il}}}, il);
  const bool comm = s.tp > 1;
  const int xg = comm ? add_output(p, "x_gathered", rows.padded, h) : x;
  const int gu = add_output(p, "gate_up", rows.padded, 2 * il);
  const int act = add_output(p, "act", rows.padded, il);
  const int z = add_output(p, "down_partial", rows.padded, h);
  const int o = comm ? add_output(p, "down_local", rows.local, h) : z;
  const int w_norm = tp::add_norm_weight(p, h);
  const int out = add_output(p, "out", rows.local, h);
  const auto silu_mul = [&] {
    p.add_step(
        SiluMulStep{"silu_and_mul", columns(p, gu, 0, il), columns(p, gu, il, il), whole(p, act)});
  };
  if (variant == "sp" || !comm) {
    if (comm) p.add_step(AllGatherRowsStep{"all_gather_x", whole(p, x), whole(p, xg)});
    p.add_step(GemmStep{"gate_up_proj", whole(p, xg), whole(p, w_gu), whole(p, gu)});
    silu_mul();
    p.add_step(GemmStep{"down_proj", whole(p, act), whole(p, w_down), whole(p, z)});
    if (comm) p.add_step(ReduceScatterStep{"reduce_scatter_down", whole(p, z), whole(p, o)});
    p.add_step(RmsNormStep{"rms_norm", whole(p, o), whole(p, w_norm), whole(p, out), tp::kNormEps});
  } else {
    const auto chunks = tp::overlap_chunks(rows.local, s.tp);
    const auto gathered = [&](int buffer, const tp::Chunk& c) {
      return tp::rows_of(whole(p, buffer), s.tp * c.first, s.tp * c.rows);
    };
    std::vector<int> ag, rs;
    for (const auto& c : chunks) {
      ag.push_back(
          p.add_step(AllGatherRowsStep{"all_gather_x_chunk",
                                       tp::rows_of(whole(p, x), c.first, c.rows), gathered(xg, c)},
                     1));
    }
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      p.add_step(GemmStep{"gate_up_proj_chunk", gathered(xg, chunks[i]), whole(p, w_gu),
                          gathered(gu, chunks[i])},
                 0, {ag[i]});
    }
    silu_mul();
    for (const auto& c : chunks) {
      const int g = p.add_step(
          GemmStep{"down_proj_chunk", gathered(act, c), whole(p, w_down), gathered(z, c)});
      rs.push_back(p.add_step(ReduceScatterStep{"reduce_scatter_down_chunk", gathered(z, c),
                                                tp::rows_of(whole(p, o), c.first, c.rows)},
                              1, {g}));
    }
    p.add_step(RmsNormStep{"rms_norm", whole(p, o), whole(p, w_norm), whole(p, out), tp::kNormEps},
               0, {rs.back()});
  }
  p.outputs["out"] = whole(p, out);
  p.output_rows["out"] = {std::min(rows.row0, m), rows.real};
  return p;
}

Plan build(const ShardShape& s, std::int64_t m, DType dtype, const std::string& variant) {
  if (variant == "sp" || variant == "overlap") return build_sequence_parallel(s, m, dtype, variant);
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
  const int out = add_output(p, "down_sum", m, h);
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
  const int w_norm = tp::add_norm_weight(p, h);
  const int normed = add_output(p, "out", m, h);
  p.steps.push_back(
      RmsNormStep{"rms_norm", whole(p, out), whole(p, w_norm), whole(p, normed), tp::kNormEps});
  p.outputs["out"] = whole(p, normed);
  return p;
}

// The unsharded pair: out = rms_norm((silu(x w_gate^T) * (x w_up^T)) w_down^T) (sp/overlap:
// this rank's rows of it); and, for naive, every rank's gate_up block side by side.
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
  out["out"] = tp::rank_rows(
      p,
      tp::reference_rms_norm(reference_linear(act, in.at("w_down"), m, h, f.intermediate), m, h,
                             in.at("w_norm")),
      h);
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
          "TP MLP: gate_up column-parallel + SiLU-and-mul + down row-parallel + all-reduce + "
          "RMSNorm (naive: + all-gather of the gate_up output; sp: all-gather + reduce-scatter "
          "of rows, norm on M/tp rows; overlap: sp in tp chunks overlapped with the GEMMs)",
          {"naive", "paired", "sp", "overlap"},
          build,
          reference};
}

}  // namespace fusebench::ops
