#include "fusebench/model_context.hpp"

namespace fusebench {

nlohmann::json model_context(const ModelShape& m) {
  nlohmann::json attention = {
      {"layer", to_string(m.attention)}, {"qkv_bias", m.qkv_bias}, {"o_proj_bias", m.o_bias}};
  if (m.attention == LayerKind::mla) {
    attention["q_lora_rank"] = m.q_lora_rank > 0 ? nlohmann::json(m.q_lora_rank) : nullptr;
    attention["kv_lora_rank"] = m.kv_lora_rank;
    attention["qk_rope_head_dim"] = m.qk_rope_head_dim;
    attention["note"] =
        "fused_qkv_a_proj = [q_a_proj; kv_a_proj_with_mqa], N = q_lora_rank + kv_lora_rank + "
        "qk_rope_head_dim, replicated: the same shape at every tp";
  } else {
    attention["heads"] = m.heads;
    attention["kv_heads"] = m.kv_heads;
    attention["head_dim"] = m.head_dim;
  }
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : m.mlp_layer_list()) {
    layers.push_back({{"layer", to_string(l.kind)},
                      {"intermediate", l.intermediate},
                      {"from", l.source},
                      {"decoder_layers", l.layers >= 0 ? nlohmann::json(l.layers) : nullptr}});
  }
  nlohmann::json mlp = {{"gated", m.gated},
                        {"activation", m.gated ? nlohmann::json(to_string(m.activation)) : nullptr},
                        {"bias", m.mlp_bias},
                        {"layers", layers}};
  if (m.interleaved_gate_up)
    mlp["gate_up_layout"] = "interleaved rows (gate, up, gate, up, ...), as gpt-oss's w13";
  nlohmann::json out = {
      {"name", m.name},     {"model_type", m.family},     {"vllm_class", m.vllm_class},
      {"hidden", m.hidden}, {"decoder_layers", m.layers}, {"attention", attention},
      {"mlp", mlp}};
  if (m.experts > 0) {
    out["moe"] = {
        {"experts", m.experts},
        {"experts_per_token", m.experts_per_token},
        {"note",
         "vLLM runs the routed experts of a layer as one fused-MoE kernel (FusedMoE: w13 = [E, "
         "2*intermediate/tp, hidden], each expert's intermediate split by tp) over the tokens "
         "routed to each expert. A layer:expert fixture is one expert's gate/up GEMM pair on "
         "the rows routed to it (tokens * experts_per_token / the experts the tokens hit on "
         "average under uniform routing, at least 1: the entry's expert_rows), split "
         "vs fused as the fused-MoE kernel computes it, not the fused-MoE kernel itself."}};
  }
  nlohmann::json refused = nlohmann::json::object();
  for (const auto& [op, why] : m.refused) refused[op] = why;
  out["refused"] = refused;
  return out;
}

}  // namespace fusebench
