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
// At tp=1 there is nothing to communicate (vLLM skips the collective), so the plans have none.
#include "tp_common.hpp"

namespace fusebench::ops {
namespace {

Plan build(const ShardShape& s, std::int64_t m, DType dtype, const std::string& variant) {
  if (variant != "naive" && variant != "paired") unknown_variant(tp_attn_op(), variant);
  if (s.attention != LayerKind::attention)
    throw std::invalid_argument(
        "tp_attn: MLA's attention pipeline is not modelled (qkv "
        "benchmarks its fused_qkv_a_proj)");
  const tp::Full f = tp::full_sizes(s);
  Plan p = start_plan("tp_attn", s, m, dtype, variant);
  const std::int64_t h = s.hidden, q = s.q_size(), kv = s.kv_size(), qkv = s.qkv_size();
  const std::int64_t r = s.rank, kv0 = f.kv_head0 * s.head_dim;
  const int x = add_input(p, "x", m, h);
  const int w_qkv = tp::add_windowed(p, "w_qkv", BufferRole::weight,
                                     {{"w_q", q, {f.q, h, r * q, 0}},
                                      {"w_k", kv, {f.kv, h, kv0, 0}},
                                      {"w_v", kv, {f.kv, h, kv0, 0}}},
                                     h);
  const int w_o =
      tp::add_windowed(p, "w_o", BufferRole::weight, {{"w_o", h, {h, f.q, 0, r * q}}}, q);
  const int y = add_output(p, "qkv", m, qkv);
  const int out = add_output(p, "out", m, h);
  GemmStep column{"qkv_proj", whole(p, x), whole(p, w_qkv), whole(p, y)};
  if (s.qkv_bias) {  // column-parallel: each rank adds its own rows of the bias
    column.bias = whole(p, tp::add_windowed(p, "b_qkv", BufferRole::weight,
                                            {{"b_q", q, {f.q, 1, r * q, 0}},
                                             {"b_k", kv, {f.kv, 1, kv0, 0}},
                                             {"b_v", kv, {f.kv, 1, kv0, 0}}},
                                            1));
  }
  p.steps.push_back(std::move(column));
  View o_in = columns(p, y, 0, q);
  if (variant == "naive" && s.tp > 1) {
    const int g = add_output(p, "qkv_gathered", m, qkv * s.tp);
    p.steps.push_back(AllGatherStep{"all_gather_qkv", whole(p, y), whole(p, g)});
    o_in = columns(p, g, r * qkv, q);  // this rank's q slice of the gathered input
    p.outputs["qkv_gathered"] = whole(p, g);
  }
  GemmStep row{"o_proj", o_in, whole(p, w_o), whole(p, out)};
  // RowParallelLinear: every rank holds the bias, rank 0 alone adds it (bias_ = None if
  // tp_rank > 0), since the all-reduce would add it tp times.
  if (s.o_bias) {
    const int b = tp::add_windowed(p, "b_o", BufferRole::weight, {{"b_o", h, {h, 1, 0, 0}}}, 1);
    if (r == 0) row.bias = whole(p, b);
  }
  p.steps.push_back(std::move(row));
  if (s.tp > 1) p.steps.push_back(AllReduceStep{"all_reduce_o", whole(p, out)});
  p.outputs["out"] = whole(p, out);
  return p;
}

// The unsharded pair: out = (x w_q^T) w_o^T; and, for naive, every rank's qkv side by side.
ReferenceOutputs reference(const Plan& p, const LogicalTensors& in) {
  const ShardShape& s = p.shard;
  const tp::Full f = tp::full_sizes(s);
  const std::int64_t m = p.tokens, h = s.hidden;
  const auto& x = in.at("x");
  const std::vector<double> xd(x.begin(), x.end());
  const auto project = [&](const char* w, const char* b, std::int64_t n) {
    auto y = reference_linear(xd, in.at(w), m, n, h);
    if (s.qkv_bias) add_bias(y, m, n, in.at(b), 0);
    return y;
  };
  ReferenceOutputs out;
  const auto q = project("w_q", "b_q", f.q);
  out["out"] = reference_linear(q, in.at("w_o"), m, h, f.q);
  if (s.o_bias) add_bias(out["out"], m, h, in.at("b_o"), 0);  // once, whatever tp is
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

}  // namespace

OpInfo tp_attn_op() {
  return {"tp_attn",
          "TP attention projections: qkv column-parallel + o_proj row-parallel + all-reduce "
          "(naive: + all-gather of the qkv output)",
          {"naive", "paired"},
          build,
          reference};
}

}  // namespace fusebench::ops
