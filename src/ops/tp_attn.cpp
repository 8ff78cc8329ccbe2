// Tensor-parallel attention projections, one rank's share: qkv column-parallel GEMM (this rank's
// q heads and kv heads of the unsharded weights, vLLM QKVParallelLinear), then o_proj
// row-parallel GEMM on this rank's q shard, then an all-reduce of [M, hidden].
// Attention itself is out of scope: o_proj consumes the q columns of the qkv output as a view,
// which has the shape attention's output would have ([M, q_size/tp]).
//   paired: column -> row with no communication between them; one all-reduce.
//   naive:  the column output is all-gathered (gather_output=True); the row layer takes the
//           full gathered input and uses its own slice through a view (input_is_parallel=False);
//           then the all-reduce.
//   sp:     sequence parallel: x arrives as this rank's M/tp rows; all-gather (rows) -> qkv ->
//           o_proj -> reduce-scatter (rows) -> this rank's M/tp rows.
//   overlap: sp with the all-gather and the reduce-scatter in tp chunks on a communication
//           lane, each chunk's collective overlapping the neighbouring chunk's GEMM (as fused
//           all-gather-matmul and matmul-reduce-scatter do; attention would sit between the
//           two phases, so all qkv chunks finish before o_proj's start).
// Every variant ends with the RMSNorm of the result (paired/naive on M rows after the
// all-reduce, sp/overlap on M/tp rows), so all compute the same thing (docs/tp.md).
// At tp=1 there is nothing to communicate (vLLM skips the collective), so the plans have none.
#include "tp_common.hpp"

namespace fusebench::ops {
namespace {

struct AttnWeights {
  int w_qkv, w_o;
};
AttnWeights add_weights(Plan& p, const ShardShape& s) {
  const tp::Full f = tp::full_sizes(s);
  const std::int64_t h = s.hidden, q = s.q_size(), kv = s.kv_size(), r = s.rank, d = s.head_dim;
  const int w_qkv = tp::add_windowed(p, "w_qkv", BufferRole::weight,
                                     {{"w_q", q, {f.q, h, r * q, 0}},
                                      {"w_k", kv, {f.kv, h, f.kv_head0 * d, 0}},
                                      {"w_v", kv, {f.kv, h, f.kv_head0 * d, 0}}},
                                     h);
  const int w_o =
      tp::add_windowed(p, "w_o", BufferRole::weight, {{"w_o", h, {h, f.q, 0, r * q}}}, q);
  return {w_qkv, w_o};
}

// sp and overlap (see the top of the file and tp_common.hpp for the row layout).
Plan build_sequence_parallel(const ShardShape& s, std::int64_t m, DType dtype,
                             const std::string& variant) {
  Plan p = start_plan("tp_attn", s, m, dtype, variant);
  const std::int64_t h = s.hidden, q = s.q_size(), qkv = s.qkv_size();
  const tp::SpRows rows = tp::sp_rows(s, m);
  p.padded_tokens = rows.padded - m;
  const int x = tp::add_sp_input(p, rows, m, h);
  const auto [w_qkv, w_o] = add_weights(p, s);
  const bool comm = s.tp > 1;
  const int xg = comm ? add_output(p, "x_gathered", rows.padded, h) : x;
  const int y = add_output(p, "qkv", rows.padded, qkv);
  const int z = add_output(p, "o_partial", rows.padded, h);
  const int o = comm ? add_output(p, "o_local", rows.local, h) : z;
  const int w_norm = tp::add_norm_weight(p, h);
  const int out = add_output(p, "out", rows.local, h);
  if (variant == "sp" || !comm) {
    if (comm) p.add_step(AllGatherRowsStep{"all_gather_x", whole(p, x), whole(p, xg)});
    p.add_step(GemmStep{"qkv_proj", whole(p, xg), whole(p, w_qkv), whole(p, y)});
    p.add_step(GemmStep{"o_proj", columns(p, y, 0, q), whole(p, w_o), whole(p, z)});
    if (comm) p.add_step(ReduceScatterStep{"reduce_scatter_o", whole(p, z), whole(p, o)});
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
      p.add_step(GemmStep{"qkv_proj_chunk", gathered(xg, chunks[i]), whole(p, w_qkv),
                          gathered(y, chunks[i])},
                 0, {ag[i]});
    }
    for (const auto& c : chunks) {
      const int g = p.add_step(
          GemmStep{"o_proj_chunk", tp::rows_of(columns(p, y, 0, q), s.tp * c.first, s.tp * c.rows),
                   whole(p, w_o), gathered(z, c)});
      rs.push_back(p.add_step(ReduceScatterStep{"reduce_scatter_o_chunk", gathered(z, c),
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
  if (variant != "naive" && variant != "paired") unknown_variant(tp_attn_op(), variant);
  const tp::Full f = tp::full_sizes(s);
  Plan p = start_plan("tp_attn", s, m, dtype, variant);
  const std::int64_t h = s.hidden, q = s.q_size(), kv = s.kv_size(), qkv = s.qkv_size();
  const std::int64_t r = s.rank, d = s.head_dim;
  const int x = add_input(p, "x", m, h);
  const int w_qkv = tp::add_windowed(p, "w_qkv", BufferRole::weight,
                                     {{"w_q", q, {f.q, h, r * q, 0}},
                                      {"w_k", kv, {f.kv, h, f.kv_head0 * d, 0}},
                                      {"w_v", kv, {f.kv, h, f.kv_head0 * d, 0}}},
                                     h);
  const int w_o =
      tp::add_windowed(p, "w_o", BufferRole::weight, {{"w_o", h, {h, f.q, 0, r * q}}}, q);
  const int y = add_output(p, "qkv", m, qkv);
  const int out = add_output(p, "o_sum", m, h);
  p.steps.push_back(GemmStep{"qkv_proj", whole(p, x), whole(p, w_qkv), whole(p, y)});
  View o_in = columns(p, y, 0, q);
  if (variant == "naive" && s.tp > 1) {
    const int g = add_output(p, "qkv_gathered", m, qkv * s.tp);
    p.steps.push_back(AllGatherStep{"all_gather_qkv", whole(p, y), whole(p, g)});
    o_in = columns(p, g, r * qkv, q);  // this rank's q slice of the gathered input
    p.outputs["qkv_gathered"] = whole(p, g);
  }
  p.steps.push_back(GemmStep{"o_proj", o_in, whole(p, w_o), whole(p, out)});
  if (s.tp > 1) p.steps.push_back(AllReduceStep{"all_reduce_o", whole(p, out)});
  const int w_norm = tp::add_norm_weight(p, h);
  const int normed = add_output(p, "out", m, h);
  p.steps.push_back(
      RmsNormStep{"rms_norm", whole(p, out), whole(p, w_norm), whole(p, normed), tp::kNormEps});
  p.outputs["out"] = whole(p, normed);
  return p;
}

// The unsharded pair: out = rms_norm((x w_q^T) w_o^T) (sp/overlap: this rank's rows of it);
// and, for naive, every rank's qkv side by side.
ReferenceOutputs reference(const Plan& p, const LogicalTensors& in) {
  const ShardShape& s = p.shard;
  const tp::Full f = tp::full_sizes(s);
  const std::int64_t m = p.tokens, h = s.hidden;
  const auto& x = in.at("x");
  const std::vector<double> xd(x.begin(), x.end());
  ReferenceOutputs out;
  const auto q = reference_linear(xd, in.at("w_q"), m, f.q, h);
  out["out"] = tp::rank_rows(
      p,
      tp::reference_rms_norm(reference_linear(q, in.at("w_o"), m, h, f.q), m, h, in.at("w_norm")),
      h);
  if (p.outputs.count("qkv_gathered")) {
    const auto k = reference_linear(xd, in.at("w_k"), m, f.kv, h);
    const auto v = reference_linear(xd, in.at("w_v"), m, f.kv, h);
    std::vector<double> g;
    const std::int64_t ql = s.q_size(), kvl = s.kv_size();
    for (std::int64_t i = 0; i < m; ++i) {
      for (int rank = 0; rank < s.tp; ++rank) {
        ShardShape other = s;
        other.rank = rank;
        const std::int64_t kv0 = tp::full_sizes(other).kv_head0 * s.head_dim;
        for (std::int64_t j = 0; j < ql; ++j)
          g.push_back(q[static_cast<std::size_t>(i * f.q + rank * ql + j)]);
        for (std::int64_t j = 0; j < kvl; ++j)
          g.push_back(k[static_cast<std::size_t>(i * f.kv + kv0 + j)]);
        for (std::int64_t j = 0; j < kvl; ++j)
          g.push_back(v[static_cast<std::size_t>(i * f.kv + kv0 + j)]);
      }
    }
    out["qkv_gathered"] = std::move(g);
  }
  return out;
}

}  // namespace

OpInfo tp_attn_op() {
  return {"tp_attn",
          "TP attention projections: qkv column-parallel + o_proj row-parallel + all-reduce + "
          "RMSNorm (naive: + all-gather of the qkv output; sp: all-gather + reduce-scatter of "
          "rows, norm on M/tp rows; overlap: sp in tp chunks overlapped with the GEMMs)",
          {"naive", "paired", "sp", "overlap"},
          build,
          reference};
}

}  // namespace fusebench::ops
