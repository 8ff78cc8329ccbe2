// Tensor-parallel attention projections, one rank's share: qkv column-parallel GEMM (this rank's
// q heads and kv heads of the unsharded weights, vLLM QKVParallelLinear, with its rows of the
// bias), then o_proj row-parallel GEMM on this rank's q shard (its bias on rank 0 only, as
// RowParallelLinear adds it), then an all-reduce of [M, hidden].
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
// all-reduce, sp/overlap on M/tp rows), and adds the same biases (o_proj's on rank 0 only, on
// every chunk, before the reduction), so all compute the same thing (docs/tp.md).
// At tp=1 there is nothing to communicate (vLLM skips the collective), so the plans have none.
#include "tp_common.hpp"
#include "tp_quant.hpp"

namespace fusebench::ops {
namespace {

// This rank's weights: q heads and kv heads of the unsharded q/k/v weights (and of their biases:
// column-parallel, each rank adds its own rows), its q columns of w_o, and the o_proj bias, which
// every rank holds and rank 0 alone adds (RowParallelLinear: bias_ = None if tp_rank > 0; the
// all-reduce or reduce-scatter would add it tp times).
struct AttnWeights {
  int w_qkv = -1, w_o = -1;
  View b_qkv{}, b_o{};  // absent (buffer -1) without the bias, and b_o on ranks other than 0
};
AttnWeights add_weights(Plan& p, const ShardShape& s) {
  const tp::Full f = tp::full_sizes(s);
  const std::int64_t h = s.hidden, q = s.q_size(), kv = s.kv_size(), r = s.rank;
  const std::int64_t kv0 = f.kv_head0 * s.head_dim;
  AttnWeights w;
  w.w_qkv = tp::add_windowed(p, "w_qkv", BufferRole::weight,
                             {{"w_q", q, {f.q, h, r * q, 0}},
                              {"w_k", kv, {f.kv, h, kv0, 0}},
                              {"w_v", kv, {f.kv, h, kv0, 0}}},
                             h);
  w.w_o = tp::add_windowed(p, "w_o", BufferRole::weight, {{"w_o", h, {h, f.q, 0, r * q}}}, q);
  if (s.qkv_bias) {
    w.b_qkv = whole(p, tp::add_windowed(p, "b_qkv", BufferRole::weight,
                                        {{"b_q", q, {f.q, 1, r * q, 0}},
                                         {"b_k", kv, {f.kv, 1, kv0, 0}},
                                         {"b_v", kv, {f.kv, 1, kv0, 0}}},
                                        1));
  }
  if (s.o_bias) {
    const int b = tp::add_windowed(p, "b_o", BufferRole::weight, {{"b_o", h, {h, 1, 0, 0}}}, 1);
    if (r == 0) w.b_o = whole(p, b);
  }
  return w;
}

// sp and overlap (see the top of the file and tp_common.hpp for the row layout). The biases are
// those of paired: qkv's on every chunk of every rank, o_proj's on every chunk of rank 0, before
// the reduce-scatter.
Plan build_sequence_parallel(const ShardShape& s, std::int64_t m, DType dtype,
                             const std::string& variant) {
  Plan p = start_plan("tp_attn", s, m, dtype, variant);
  const std::int64_t h = s.hidden, q = s.q_size(), qkv = s.qkv_size();
  const tp::SpRows rows = tp::sp_rows(s, m);
  p.padded_tokens = rows.padded - m;
  const int x = tp::add_sp_input(p, rows, m, h);
  const AttnWeights w = add_weights(p, s);
  const bool comm = s.tp > 1;
  const int xg = comm ? add_output(p, "x_gathered", rows.padded, h) : x;
  const int y = add_output(p, "qkv", rows.padded, qkv);
  const int z = add_output(p, "o_partial", rows.padded, h);
  const int o = comm ? add_output(p, "o_local", rows.local, h) : z;
  const int w_norm = tp::add_norm_weight(p, h);
  const int out = add_output(p, "out", rows.local, h);
  if (variant == "sp" || !comm) {
    if (comm) p.add_step(AllGatherRowsStep{"all_gather_x", whole(p, x), whole(p, xg)});
    p.add_step(GemmStep{"qkv_proj", whole(p, xg), whole(p, w.w_qkv), whole(p, y), w.b_qkv});
    p.add_step(GemmStep{"o_proj", columns(p, y, 0, q), whole(p, w.w_o), whole(p, z), w.b_o});
    if (comm) p.add_step(ReduceScatterStep{"reduce_scatter_o", whole(p, z), whole(p, o)});
    p.add_step(RmsNormStep{"rms_norm", whole(p, o), whole(p, w_norm), whole(p, out), tp::kNormEps});
  } else {
    const auto chunks = tp::overlap_chunks(rows.local, s.tp);
    tp::add_gathered_column_gemms(p, chunks, s.tp, x, xg, "qkv_proj_chunk", whole(p, w.w_qkv), y,
                                  w.b_qkv);
    const auto q_rows = [&](const tp::Chunk& c) {
      return tp::rows_of(columns(p, y, 0, q), s.tp * c.first, s.tp * c.rows);
    };
    const int last =
        tp::add_scattered_row_gemms(p, chunks, s.tp, q_rows, "o_proj_chunk", whole(p, w.w_o), z,
                                    w.b_o, "reduce_scatter_o_chunk", o);
    p.add_step(RmsNormStep{"rms_norm", whole(p, o), whole(p, w_norm), whole(p, out), tp::kNormEps},
               0, {last});
  }
  p.outputs["out"] = whole(p, out);
  p.output_rows["out"] = {std::min(rows.row0, m), rows.real};
  return p;
}

Plan build_pipeline(const ShardShape& s, std::int64_t m, DType dtype, const std::string& variant) {
  if (variant != "naive" && variant != "paired" && variant != "sp" && variant != "overlap")
    unknown_variant(tp_attn_op(), variant);
  if (s.attention != LayerKind::attention)
    throw std::invalid_argument(
        "tp_attn: MLA's attention pipeline is not modelled (qkv "
        "benchmarks its fused_qkv_a_proj)");
  if (variant == "sp" || variant == "overlap") return build_sequence_parallel(s, m, dtype, variant);
  Plan p = start_plan("tp_attn", s, m, dtype, variant);
  const std::int64_t h = s.hidden, q = s.q_size(), qkv = s.qkv_size();
  const std::int64_t r = s.rank;
  const int x = add_input(p, "x", m, h);
  const AttnWeights w = add_weights(p, s);
  const int y = add_output(p, "qkv", m, qkv);
  const int sum = add_output(p, "o_sum", m, h);
  p.steps.push_back(GemmStep{"qkv_proj", whole(p, x), whole(p, w.w_qkv), whole(p, y), w.b_qkv});
  View o_in = columns(p, y, 0, q);
  if (variant == "naive" && s.tp > 1) {
    const int g = add_output(p, "qkv_gathered", m, qkv * s.tp);
    p.steps.push_back(AllGatherStep{"all_gather_qkv", whole(p, y), whole(p, g)});
    o_in = columns(p, g, r * qkv, q);  // this rank's q slice of the gathered input
    p.outputs["qkv_gathered"] = whole(p, g);
  }
  p.steps.push_back(GemmStep{"o_proj", o_in, whole(p, w.w_o), whole(p, sum), w.b_o});
  if (s.tp > 1) p.steps.push_back(AllReduceStep{"all_reduce_o", whole(p, sum)});
  const int w_norm = tp::add_norm_weight(p, h);
  const int normed = add_output(p, "out", m, h);
  p.steps.push_back(
      RmsNormStep{"rms_norm", whole(p, sum), whole(p, w_norm), whole(p, normed), tp::kNormEps});
  p.outputs["out"] = whole(p, normed);
  return p;
}

// The unsharded pair: out = rms_norm((x w_q^T + b_q) w_o^T + b_o) (sp/overlap: this rank's rows
// of it over the padded rows, tp_common.hpp); and, for naive, every rank's qkv side by side.
ReferenceOutputs reference(const Plan& p, const LogicalTensors& in) {
  const ShardShape& s = p.shard;
  const tp::Full f = tp::full_sizes(s);
  const std::int64_t m = tp::padded_tokens_of(p), h = s.hidden;
  const std::vector<double> xd = tp::reference_input(p, in.at("x"), h);
  const auto project = [&](const char* w, const char* b, std::int64_t n) {
    auto y = reference_linear(xd, in.at(w), m, n, h);
    if (s.qkv_bias) add_bias(y, m, n, in.at(b), 0);
    return y;
  };
  ReferenceOutputs out;
  const auto q = project("w_q", "b_q", f.q);
  auto o = reference_linear(q, in.at("w_o"), m, h, f.q);
  if (s.o_bias) add_bias(o, m, h, in.at("b_o"), 0);  // once, whatever tp is
  out["out"] = tp::rank_rows(p, tp::reference_rms_norm(o, m, h, in.at("w_norm")), h);
  if (p.outputs.count("qkv_gathered")) {
    const auto k = project("w_k", "b_k", f.kv);
    const auto v = project("w_v", "b_v", f.kv);
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

// The op's one builder: the pipeline at the request's dtype, and where the request carries a
// spec, the same plan with each GEMM quantized (quantize_pipeline, tp_quant.hpp).
Plan build(const ShardShape& s, std::int64_t m, const PlanRequest& request,
           const std::string& variant) {
  Plan p = build_pipeline(s, m, request.dtype, variant);
  if (!request.quant) return p;
  return quantize_pipeline(std::move(p), *request.quant);
}

}  // namespace

OpInfo tp_attn_op() {
  OpInfo op{"tp_attn",
            "TP attention projections: qkv column-parallel + o_proj row-parallel + all-reduce + "
            "RMSNorm (naive: + all-gather of the qkv output; sp: all-gather + reduce-scatter of "
            "rows, norm on M/tp rows; overlap: sp in tp chunks overlapped with the GEMMs)",
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
