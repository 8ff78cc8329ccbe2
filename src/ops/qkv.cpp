// q/k/v projections: three GEMMs on separate weights (split) or one GEMM on the concatenated
// weight with q, k, v as column views of its output (fused, vLLM's QKVParallelLinear). Every
// weight and bias is a window of the whole logical tensor (rank `rank`'s rows under TP, kv rows
// replicated as vLLM does when tp > kv heads), so a checkpoint's tensors drop in unchanged.
//   bias (Qwen2, gpt-oss, gpt_neox, attention_bias): split adds each GEMM's own bias, fused the
//   concatenated one, both in the GEMM (cuBLASLt's bias epilogue); fused_bias_kernel runs the
//   fused GEMM without it and adds the bias in a separate kernel, to show what the epilogue
//   saves; grouped (cuBLAS's grouped GEMM has no epilogue) adds the three biases in one kernel.
//   MLA (DeepSeek V2/V3): q_a_proj + kv_a_proj_with_mqa (split) vs fused_qkv_a_proj, replicated
//   (the same N at every tp), no bias.
#include "quant_projection.hpp"
#include "tp_common.hpp"

namespace fusebench::ops {
namespace {

Plan build_mla(Plan p, const ShardShape& s, const std::string& variant) {
  const std::int64_t m = p.tokens, h = s.hidden, ql = s.q_lora_rank, kva = s.kv_a_size;
  if (variant == "fused_bias_kernel") unknown_variant(qkv_op(), variant);  // MLA has no bias
  const int x = add_input(p, "x", m, h);
  if (variant == "split" || variant == "grouped") {
    const int wq = add_weight(p, "w_q_a", {{"w_q_a", ql}}, h);
    const int wkv = add_weight(p, "w_kv_a", {{"w_kv_a", kva}}, h);
    const int yq = add_output(p, "q_a", m, ql);
    const int ykv = add_output(p, "kv_a", m, kva);
    std::vector<GemmStep> gemms = {
        GemmStep{"q_a_proj", whole(p, x), whole(p, wq), whole(p, yq)},
        GemmStep{"kv_a_proj_with_mqa", whole(p, x), whole(p, wkv), whole(p, ykv)}};
    if (variant == "split") {
      for (auto& g : gemms) p.steps.push_back(std::move(g));
    } else {
      p.steps.push_back(GroupedGemmStep{"qkv_a_grouped", std::move(gemms), false});
    }
    p.outputs = {{"q_a", whole(p, yq)}, {"kv_a", whole(p, ykv)}};
  } else if (variant == "fused") {
    const int w = add_weight(p, "w_qkv_a", {{"w_q_a", ql}, {"w_kv_a", kva}}, h);
    const int y = add_output(p, "qkv_a", m, ql + kva);
    p.steps.push_back(GemmStep{"fused_qkv_a_proj", whole(p, x), whole(p, w), whole(p, y)});
    p.outputs = {{"q_a", columns(p, y, 0, ql)}, {"kv_a", columns(p, y, ql, kva)}};
  } else {
    unknown_variant(qkv_op(), variant);
  }
  return p;
}

Plan build_dense(const ShardShape& s, std::int64_t m, DType dtype, const std::string& variant) {
  Plan p = start_plan("qkv", s, m, dtype, variant);
  if (s.attention == LayerKind::mla) {
    if (s.q_lora_rank <= 0)
      throw std::invalid_argument(
          "qkv: this MLA model has no q_lora_rank (q_lora_rank null): "
          "there is no fused_qkv_a_proj pair");
    return build_mla(std::move(p), s, variant);
  }
  const tp::Full f = tp::full_sizes(s);
  const std::int64_t h = s.hidden, q = s.q_size(), kv = s.kv_size(), r = s.rank;
  const std::int64_t q0 = r * q, kv0 = f.kv_head0 * s.head_dim;
  const bool bias = s.qkv_bias;
  if (variant == "fused_bias_kernel" && !bias)
    throw std::invalid_argument("qkv/fused_bias_kernel: the model has no q/k/v bias");
  const tp::WindowPart wq{"w_q", q, {f.q, h, q0, 0}}, wk{"w_k", kv, {f.kv, h, kv0, 0}},
      wv{"w_v", kv, {f.kv, h, kv0, 0}};
  const tp::WindowPart bq{"b_q", q, {f.q, 1, q0, 0}}, bk{"b_k", kv, {f.kv, 1, kv0, 0}},
      bv{"b_v", kv, {f.kv, 1, kv0, 0}};
  const int x = add_input(p, "x", m, h);
  if (variant == "split" || variant == "grouped") {
    const int w[3] = {tp::add_windowed(p, "w_q", BufferRole::weight, {wq}, h),
                      tp::add_windowed(p, "w_k", BufferRole::weight, {wk}, h),
                      tp::add_windowed(p, "w_v", BufferRole::weight, {wv}, h)};
    const int y[3] = {add_output(p, "q", m, q), add_output(p, "k", m, kv),
                      add_output(p, "v", m, kv)};
    int b[3] = {-1, -1, -1};
    if (bias) {
      b[0] = tp::add_windowed(p, "b_q", BufferRole::weight, {bq}, 1);
      b[1] = tp::add_windowed(p, "b_k", BufferRole::weight, {bk}, 1);
      b[2] = tp::add_windowed(p, "b_v", BufferRole::weight, {bv}, 1);
    }
    const char* labels[3] = {"q_proj", "k_proj", "v_proj"};
    std::vector<GemmStep> gemms;
    BiasAddStep bias_add{"qkv_bias_add", {}};
    for (int i = 0; i < 3; ++i) {
      GemmStep g{labels[i], whole(p, x), whole(p, w[i]), whole(p, y[i])};
      if (bias && variant == "split") g.bias = whole(p, b[i]);
      if (bias && variant == "grouped")
        bias_add.members.push_back({whole(p, y[i]), whole(p, b[i])});
      gemms.push_back(std::move(g));
    }
    if (variant == "split") {
      for (auto& g : gemms) p.steps.push_back(std::move(g));
    } else {
      // The same three GEMMs as one grouped launch: fusion of launches without concatenating
      // weights (cublasGemmGroupedBatchedEx on CUDA); its biases in one more launch.
      p.steps.push_back(GroupedGemmStep{"qkv_grouped", std::move(gemms), false});
      if (bias) p.steps.push_back(std::move(bias_add));
    }
    p.outputs = {{"q", whole(p, y[0])}, {"k", whole(p, y[1])}, {"v", whole(p, y[2])}};
  } else if (variant == "fused" || variant == "fused_bias_kernel") {
    const int w = tp::add_windowed(p, "w_qkv", BufferRole::weight, {wq, wk, wv}, h);
    const int y = add_output(p, "qkv", m, q + 2 * kv);
    GemmStep g{"qkv_proj", whole(p, x), whole(p, w), whole(p, y)};
    if (bias) {
      const int b = tp::add_windowed(p, "b_qkv", BufferRole::weight, {bq, bk, bv}, 1);
      if (variant == "fused") {
        g.bias = whole(p, b);
        p.steps.push_back(std::move(g));
      } else {
        p.steps.push_back(std::move(g));
        p.steps.push_back(BiasAddStep{"fused_bias_kernel", {{whole(p, y), whole(p, b)}}});
      }
    } else {
      p.steps.push_back(std::move(g));
    }
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
  if (s.attention == LayerKind::mla) {
    return {{"q_a", reference_linear(in.at("x"), in.at("w_q_a"), m, s.q_lora_rank, h)},
            {"kv_a", reference_linear(in.at("x"), in.at("w_kv_a"), m, s.kv_a_size, h)}};
  }
  const tp::Full f = tp::full_sizes(s);
  const std::int64_t q = s.q_size(), kv = s.kv_size();
  const std::int64_t q0 = s.rank * q, kv0 = f.kv_head0 * s.head_dim;
  // This rank's rows of the whole tensors (all of them at tp = 1).
  const auto project = [&](const char* w, const char* b, std::int64_t row0, std::int64_t n) {
    auto y = reference_linear(in.at("x"), shard_rows(in.at(w), h, row0, n), m, n, h);
    if (s.qkv_bias) add_bias(y, m, n, in.at(b), row0);
    return y;
  };
  return {{"q", project("w_q", "b_q", q0, q)},
          {"k", project("w_k", "b_k", kv0, kv)},
          {"v", project("w_v", "b_v", kv0, kv)}};
}

Plan build_quantized(const ShardShape& s, std::int64_t m, DType dtype, const QuantSpec& spec,
                     const std::string& variant) {
  check_quant_shard("qkv", s.attention == LayerKind::attention && s.qkv_bias,
                    s.attention == LayerKind::mla
                        ? "the quantized variants cover q/k/v attention, not MLA, yet"
                        : "");
  Plan p = start_plan("qkv", s, m, dtype, variant);
  p.quant = spec;
  const tp::Full f = tp::full_sizes(s);
  const std::int64_t h = s.hidden, q = s.q_size(), kv = s.kv_size();
  const std::int64_t q0 = s.rank * q, kv0 = f.kv_head0 * s.head_dim;
  const int x = add_input(p, "x", m, h);
  const std::vector<ProjectionShard> shards = {{"q", "q_proj", {"w_q", q, {f.q, h, q0, 0}}},
                                               {"k", "k_proj", {"w_k", kv, {f.kv, h, kv0, 0}}},
                                               {"v", "v_proj", {"w_v", kv, {f.kv, h, kv0, 0}}}};
  const auto y =
      add_quantized_projection(p, x, shards, "w_qkv", "qkv_proj", spec, f.q + 2 * f.kv, qkv_op());
  p.outputs = {{"q", y[0]}, {"k", y[1]}, {"v", y[2]}};
  p.quant_outputs = {"q", "k", "v"};
  return p;
}

bool has_variant(const ShardShape& s, const std::string& variant) {
  if (variant == "fused_bias_kernel") return s.attention == LayerKind::attention && s.qkv_bias;
  return true;
}

// The op's one builder: quantized where the request carries a spec.
Plan build(const ShardShape& s, std::int64_t m, const PlanRequest& request,
           const std::string& variant) {
  if (request.quant) return build_quantized(s, m, request.dtype, *request.quant, variant);
  return build_dense(s, m, request.dtype, variant);
}

}  // namespace

OpInfo qkv_op() {
  return {"qkv",
          "q/k/v projections: 3 GEMMs (split) vs 1 GEMM on the merged weight (fused) vs 1 grouped "
          "GEMM on the separate weights (grouped); with a bias, fused_bias_kernel adds it in a "
          "separate kernel instead of the GEMM's epilogue; MLA: q_a + kv_a vs fused_qkv_a_proj",
          {"split", "fused", "grouped", "fused_bias_kernel"},
          build,
          reference,
          has_variant,
          quant_projection_variants};
}

}  // namespace fusebench::ops
