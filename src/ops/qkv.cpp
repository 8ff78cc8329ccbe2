// q/k/v projections: three GEMMs on separate weights (split) or one GEMM on the concatenated
// weight with q, k, v as column views of its output (fused, vLLM's QKVParallelLinear).
#include "op_list.hpp"

namespace fusebench::ops {
namespace {

Plan build(const ShardShape& s, std::int64_t m, DType dtype, const std::string& variant) {
  Plan p = start_plan("qkv", s, m, dtype, variant);
  const std::int64_t h = s.hidden, q = s.q_size(), kv = s.kv_size();
  const int x = add_input(p, "x", m, h);
  if (variant == "split" || variant == "grouped") {
    const int wq = add_weight(p, "w_q", {{"w_q", q}}, h);
    const int wk = add_weight(p, "w_k", {{"w_k", kv}}, h);
    const int wv = add_weight(p, "w_v", {{"w_v", kv}}, h);
    const int yq = add_output(p, "q", m, q);
    const int yk = add_output(p, "k", m, kv);
    const int yv = add_output(p, "v", m, kv);
    std::vector<GemmStep> gemms = {GemmStep{"q_proj", whole(p, x), whole(p, wq), whole(p, yq)},
                                   GemmStep{"k_proj", whole(p, x), whole(p, wk), whole(p, yk)},
                                   GemmStep{"v_proj", whole(p, x), whole(p, wv), whole(p, yv)}};
    if (variant == "split") {
      for (auto& g : gemms) p.steps.push_back(std::move(g));
    } else {
      // The same three GEMMs as one grouped launch: fusion of launches without concatenating
      // weights (cublasGemmGroupedBatchedEx on CUDA).
      p.steps.push_back(GroupedGemmStep{"qkv_grouped", std::move(gemms), false});
    }
    p.outputs = {{"q", whole(p, yq)}, {"k", whole(p, yk)}, {"v", whole(p, yv)}};
  } else if (variant == "fused") {
    const int w = add_weight(p, "w_qkv", {{"w_q", q}, {"w_k", kv}, {"w_v", kv}}, h);
    const int y = add_output(p, "qkv", m, q + 2 * kv);
    p.steps.push_back(GemmStep{"qkv_proj", whole(p, x), whole(p, w), whole(p, y)});
    p.outputs = {
        {"q", columns(p, y, 0, q)}, {"k", columns(p, y, q, kv)}, {"v", columns(p, y, q + kv, kv)}};
  } else {
    unknown_variant(qkv_op(), variant);
  }
  return p;
}

ReferenceOutputs reference(const Plan& p, const LogicalTensors& in) {
  const auto& s = p.shard;
  const std::int64_t m = p.tokens, h = s.hidden;
  return {{"q", reference_linear(in.at("x"), in.at("w_q"), m, s.q_size(), h)},
          {"k", reference_linear(in.at("x"), in.at("w_k"), m, s.kv_size(), h)},
          {"v", reference_linear(in.at("x"), in.at("w_v"), m, s.kv_size(), h)}};
}

}  // namespace

OpInfo qkv_op() {
  return {"qkv",
          "q/k/v projections: 3 GEMMs (split) vs 1 GEMM on the merged weight (fused) vs 1 grouped "
          "GEMM on the separate weights (grouped)",
          {"split", "fused", "grouped"},
          build,
          reference};
}

}  // namespace fusebench::ops
