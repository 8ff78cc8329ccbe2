// The model presets: excerpts of published config.json files, read as --model-config is.
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fusebench/shapes.hpp"

namespace fusebench {
namespace {

// Excerpts of the published config.json files (the fields the reader uses), read by the same
// reader as --model-config so presets and configs cannot disagree.
const std::pair<const char*, const char*> kPresetConfigs[] = {
    {"qwen3-0.6b", R"({"model_type": "qwen3", "hidden_size": 1024, "num_attention_heads": 16,
            "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 3072,
            "num_hidden_layers": 28, "hidden_act": "silu", "attention_bias": false})"},
    {"llama3-8b", R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 14336,
            "num_hidden_layers": 32, "hidden_act": "silu", "attention_bias": false,
            "mlp_bias": false})"},
    {"qwen3-32b", R"({"model_type": "qwen3", "hidden_size": 5120, "num_attention_heads": 64,
            "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 25600,
            "num_hidden_layers": 64, "hidden_act": "silu", "attention_bias": false})"},
    {"llama3-70b", R"({"model_type": "llama", "hidden_size": 8192, "num_attention_heads": 64,
            "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 28672,
            "num_hidden_layers": 80, "hidden_act": "silu", "attention_bias": false,
            "mlp_bias": false})"},
    // Not in the default sweep: q/k/v bias (Qwen2 hard-codes it) and an all-MoE model.
    {"qwen2.5-7b", R"({"model_type": "qwen2", "hidden_size": 3584,
            "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944,
            "num_hidden_layers": 28, "hidden_act": "silu"})"},
    {"qwen3-30b-a3b", R"({"model_type": "qwen3_moe", "hidden_size": 2048,
            "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
            "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
            "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
            "num_hidden_layers": 48, "hidden_act": "silu", "attention_bias": false,
            "norm_topk_prob": true})"},
    // MoE presets of issue 30 (routing read by routing_rule_for_preset): DeepSeek-V3
    // (deepseek-ai/DeepSeek-V3), gpt-oss-120b (openai/gpt-oss-120b), Mixtral-8x7B
    // (mistralai/Mixtral-8x7B-v0.1).
    {"deepseek-v3", R"({"model_type": "deepseek_v3", "hidden_size": 7168,
            "num_attention_heads": 128, "num_key_value_heads": 128, "intermediate_size": 18432,
            "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
            "num_experts_per_tok": 8, "n_group": 8, "topk_group": 4, "norm_topk_prob": true,
            "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
            "first_k_dense_replace": 3, "moe_layer_freq": 1, "num_hidden_layers": 61,
            "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64, "v_head_dim": 128, "hidden_act": "silu",
            "attention_bias": false})"},
    {"gpt-oss-120b", R"({"model_type": "gpt_oss", "hidden_size": 2880,
            "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
            "intermediate_size": 2880, "num_local_experts": 128, "num_experts_per_tok": 4,
            "experts_per_token": 4, "num_hidden_layers": 36, "swiglu_limit": 7.0,
            "hidden_act": "silu", "attention_bias": true})"},
    {"mixtral-8x7b", R"({"model_type": "mixtral", "hidden_size": 4096,
            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
            "num_local_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 32,
            "hidden_act": "silu"})"},
};

}  // namespace

std::string preset_config(std::string_view name) {
  for (const auto& [preset, json] : kPresetConfigs) {
    if (preset == name) return json;
  }
  find_model(name);  // throws, listing the presets
  return {};
}

const std::vector<ModelShape>& model_presets() {
  static const std::vector<ModelShape> presets = [] {
    std::vector<ModelShape> out;
    for (const auto& [name, json] : kPresetConfigs) {
      ModelShape m = parse_hf_config(json, name);
      m.name = name;
      out.push_back(std::move(m));
    }
    return out;
  }();
  return presets;
}

ModelShape find_model(std::string_view name) {
  std::string valid;
  for (const auto& m : model_presets()) {
    if (m.name == name) return m;
    valid += (valid.empty() ? "" : ", ") + m.name;
  }
  throw std::invalid_argument("unknown model '" + std::string(name) + "' (presets: " + valid +
                              "; or pass --model-config=PATH to a HF config.json)");
}

}  // namespace fusebench
