// The family table: one entry per config.json model_type the suite maps (docs/models.md).
#include "hf_families.hpp"

namespace fusebench::hf_config {
namespace {

constexpr const char* kLlamaQkv = "qkv_bias>attention_bias|bias";
constexpr const char* kLlamaO = "attention_bias|bias";
constexpr const char* kExperts = "num_experts=num_local_experts";

// The family table (docs/models.md "Families" has one row per entry). Adding a family that fits
// these rules is one entry here and one row there.
// One family per entry reads as the table it is.
// clang-format off
const Family kFamilies[] = {
    // --- Llama-shaped: QKVParallelLinear + MergedColumnParallelLinear, silu.
    {.model_type = "llama", .vllm_class = "LlamaForCausalLM", .qkv_bias = kLlamaQkv,
     .o_bias = kLlamaO, .mlp_bias = "mlp_bias"},
    {.model_type = "mistral", .vllm_class = "MistralForCausalLM (LlamaForCausalLM)",
     .qkv_bias = kLlamaQkv, .o_bias = kLlamaO, .mlp_bias = "mlp_bias"},
    {.model_type = "internlm3", .vllm_class = "InternLM3ForCausalLM (LlamaForCausalLM)",
     .qkv_bias = kLlamaQkv, .o_bias = kLlamaO, .mlp_bias = "mlp_bias",
     .aliases = "qkv_bias=attention_bias,bias=mlp_bias"},
    {.model_type = "phi3",
     .vllm_class = "Phi3ForCausalLM (Llama layers; checkpoint stores qkv_proj/gate_up_proj fused)",
     .qkv_bias = kLlamaQkv, .o_bias = kLlamaO, .mlp_bias = "mlp_bias"},
    // GraniteDecoderLayer: bias = attention_bias or bias (q/k/v and o_proj), mlp_bias.
    {.model_type = "granite", .vllm_class = "GraniteForCausalLM", .qkv_bias = kLlamaO,
     .o_bias = kLlamaO, .mlp_bias = "mlp_bias"},
    {.model_type = "exaone4", .vllm_class = "Exaone4ForCausalLM", .qkv_bias = kLlamaO,
     .o_bias = kLlamaO, .mlp_bias = "mlp_bias"},
    // vLLM 0.23's hunyuan_v1.py reads mlp_bias; transformers' HunYuan MLP (what vLLM 0.34 runs,
    // through its Transformers backend) has none: a true mlp_bias is a layout they disagree on.
    {.model_type = "hunyuan_v1_dense", .vllm_class = "HunYuanDenseV1ForCausalLM",
     .qkv_bias = kLlamaO, .o_bias = kLlamaO, .unread_true = "mlp_bias"},
    // vLLM 0.34 runs Seed-OSS through its Transformers backend: transformers' SeedOssAttention
    // (q/k/v bias = attention_bias, o_proj = attention_out_bias), SeedOssMLP (mlp_bias).
    {.model_type = "seed_oss", .vllm_class = "SeedOssForCausalLM (TransformersForCausalLM)",
     .qkv_bias = "attention_bias", .o_bias = "attention_out_bias", .mlp_bias = "mlp_bias"},
    {.model_type = "glm",
     .vllm_class = "GlmForCausalLM (LlamaForCausalLM, o_proj bias removed; checkpoint stores "
                   "gate_up_proj fused)",
     .qkv_bias = "attention_bias", .unread_true = "mlp_bias"},
    {.model_type = "glm4",
     .vllm_class = "Glm4ForCausalLM (checkpoint stores gate_up_proj fused)",
     .qkv_bias = "attention_bias"},
    // Ernie4_5ForCausalLM: Llama's layers with o_proj.bias set to None.
    {.model_type = "ernie4_5", .vllm_class = "Ernie4_5ForCausalLM (LlamaForCausalLM)",
     .qkv_bias = kLlamaQkv, .mlp_bias = "mlp_bias", .unread_true = "use_bias"},
    {.model_type = "stablelm", .vllm_class = "StablelmForCausalLM", .derived_head_dim = true,
     .qkv_bias = "use_qkv_bias"},
    {.model_type = "olmo", .vllm_class = "OlmoForCausalLM", .kv = Kv::mha,
     .derived_head_dim = true, .qkv_bias = "attention_bias", .o_bias = "attention_bias"},
    {.model_type = "olmo2", .vllm_class = "Olmo2ForCausalLM", .derived_head_dim = true,
     .unread_true = "attention_bias"},
    {.model_type = "olmo3", .vllm_class = "Olmo3ForCausalLM (Olmo2ForCausalLM)",
     .derived_head_dim = true, .unread_true = "attention_bias"},
    // CohereAttention: head_dim read when the config has one; qkv_proj and o_proj bias=False.
    {.model_type = "cohere", .vllm_class = "CohereForCausalLM", .unread_true = "attention_bias"},
    {.model_type = "cohere2", .vllm_class = "Cohere2ForCausalLM (CohereForCausalLM)",
     .unread_true = "attention_bias"},
    // No vLLM model file of their own: vLLM runs them through its Transformers backend
    // (TransformersForCausalLM), whose layers are transformers' own (q/k/v and gate/up separate
    // column-parallel layers): the split variant is what it runs, fused what fusing would give.
    {.model_type = "smollm3",
     .vllm_class = "TransformersForCausalLM (vLLM's Transformers backend, SmolLM3 layers)",
     .qkv_bias = "attention_bias", .o_bias = "attention_bias", .mlp_bias = "mlp_bias"},
    {.model_type = "helium",
     .vllm_class = "TransformersForCausalLM (vLLM's Transformers backend, Helium layers)",
     .qkv_bias = "attention_bias", .o_bias = "attention_bias", .mlp_bias = "mlp_bias"},
    {.model_type = "ministral",
     .vllm_class = "TransformersForCausalLM (vLLM's Transformers backend, Ministral layers)"},
    {.model_type = "qwen2", .vllm_class = "Qwen2ForCausalLM", .derived_head_dim = true,
     .qkv_bias = "true"},
    {.model_type = "qwen3", .vllm_class = "Qwen3ForCausalLM", .qkv_bias = "attention_bias"},
    // --- Gemma: GeluAndMul.
    {.model_type = "gemma", .vllm_class = "GemmaForCausalLM", .mlp = Mlp::gemma,
     .unread_true = "attention_bias"},
    {.model_type = "gemma2", .vllm_class = "Gemma2ForCausalLM", .qkv_bias = "attention_bias",
     .o_bias = "attention_bias", .mlp = Mlp::gemma2},
    {.model_type = "gemma3_text", .vllm_class = "Gemma3ForCausalLM", .qkv_bias = "attention_bias",
     .o_bias = "attention_bias", .mlp = Mlp::gemma2},
    {.model_type = "gemma3", .vllm_class = "Gemma3ForConditionalGeneration (text model)",
     .qkv_bias = "attention_bias", .o_bias = "attention_bias", .mlp = Mlp::gemma2},
    // --- Ungated MLPs: qkv only.
    {.model_type = "gpt_neox", .vllm_class = "GPTNeoXForCausalLM", .kv = Kv::mha,
     .derived_head_dim = true, .qkv_bias = "attention_bias:true", .o_bias = "attention_bias:true",
     .mlp = Mlp::ungated},
    {.model_type = "gpt2", .vllm_class = "GPT2LMHeadModel", .kv = Kv::mha,
     .derived_head_dim = true, .qkv_bias = "true", .o_bias = "true", .mlp = Mlp::ungated,
     .aliases = "hidden_size=n_embd,num_attention_heads=n_head,num_hidden_layers=n_layer",
     .act_field = "activation_function"},
    {.model_type = "gpt_bigcode", .vllm_class = "GPTBigCodeForCausalLM", .kv = Kv::bigcode,
     .derived_head_dim = true, .qkv_bias = "true", .o_bias = "true", .mlp = Mlp::ungated,
     .aliases = "hidden_size=n_embd,num_attention_heads=n_head,num_hidden_layers=n_layer",
     .act_field = "activation_function"},
    {.model_type = "gptj", .vllm_class = "GPTJForCausalLM", .kv = Kv::mha,
     .derived_head_dim = true, .mlp = Mlp::ungated,
     .aliases = "hidden_size=n_embd,num_attention_heads=n_head,num_hidden_layers=n_layer",
     .act_field = "activation_function"},
    {.model_type = "phi", .vllm_class = "PhiForCausalLM", .kv = Kv::mha, .derived_head_dim = true,
     .qkv_bias = "true", .o_bias = "true", .mlp = Mlp::ungated},
    {.model_type = "falcon", .vllm_class = "FalconForCausalLM", .kv = Kv::falcon,
     .derived_head_dim = true, .qkv_bias = "bias", .o_bias = "bias", .mlp = Mlp::ungated,
     .act_field = "activation"},
    {.model_type = "persimmon",
     .vllm_class = "PersimmonForCausalLM (query_key_value as one ColumnParallelLinear)",
     .kv = Kv::mha, .derived_head_dim = true, .qkv_bias = "true", .o_bias = "true",
     .mlp = Mlp::ungated},
    {.model_type = "starcoder2", .vllm_class = "Starcoder2ForCausalLM", .derived_head_dim = true,
     .qkv_bias = "use_bias:true", .o_bias = "use_bias:true", .mlp = Mlp::ungated},
    // NemotronDecoderLayer: bias = attention_bias or bias (q/k/v and o_proj).
    {.model_type = "nemotron", .vllm_class = "NemotronForCausalLM", .qkv_bias = kLlamaO,
     .o_bias = kLlamaO, .mlp = Mlp::ungated},
    {.model_type = "arcee", .vllm_class = "ArceeForCausalLM", .qkv_bias = kLlamaQkv,
     .o_bias = kLlamaO, .mlp = Mlp::ungated},
    // --- MoE.
    {.model_type = "mixtral", .vllm_class = "MixtralForCausalLM", .moe = Moe::every,
     .experts = "num_local_experts", .expert_size = "intermediate_size", .aliases = kExperts},
    // PhiMoEAttention: qkv_proj and o_proj bias=True whatever attention_bias says.
    {.model_type = "phimoe", .vllm_class = "PhiMoEForCausalLM", .qkv_bias = "true",
     .o_bias = "true", .moe = Moe::every, .experts = "num_local_experts",
     .expert_size = "intermediate_size", .aliases = kExperts, .required_true = "attention_bias"},
    {.model_type = "olmoe", .vllm_class = "OlmoeForCausalLM", .derived_head_dim = true,
     .moe = Moe::every, .experts = "num_experts", .expert_size = "intermediate_size",
     .aliases = "num_local_experts=num_experts", .unread_true = "attention_bias"},
    // GraniteMoeAttention: head_dim = hidden_size / num_attention_heads, no bias.
    {.model_type = "granitemoe", .vllm_class = "GraniteMoeForCausalLM", .derived_head_dim = true,
     .moe = Moe::every,
     .experts = "num_local_experts", .expert_size = "intermediate_size",
     .unread_true = "attention_bias"},
    {.model_type = "granitemoeshared", .vllm_class = "GraniteMoeSharedForCausalLM",
     .derived_head_dim = true, .moe = Moe::every, .experts = "num_local_experts", .expert_size = "intermediate_size",
     .shared = "shared_intermediate_size", .unread_true = "attention_bias"},
    {.model_type = "qwen2_moe", .vllm_class = "Qwen2MoeForCausalLM", .derived_head_dim = true,
     .qkv_bias = "true", .moe = Moe::qwen, .experts = "num_experts",
     .expert_size = "moe_intermediate_size", .shared = "shared_expert_intermediate_size"},
    {.model_type = "qwen3_moe", .vllm_class = "Qwen3MoeForCausalLM", .qkv_bias = "attention_bias",
     .moe = Moe::qwen, .experts = "num_experts", .expert_size = "moe_intermediate_size",
     .aliases = kExperts},
    {.model_type = "glm4_moe", .vllm_class = "Glm4MoeForCausalLM", .qkv_bias = "attention_bias",
     .moe = Moe::deepseek, .experts = "n_routed_experts", .expert_size = "moe_intermediate_size",
     .shared = "moe_intermediate_size*n_shared_experts",
     .aliases = "num_local_experts=n_routed_experts"},
    {.model_type = "dots1", .vllm_class = "Dots1ForCausalLM", .qkv_bias = "attention_bias",
     .moe = Moe::deepseek, .experts = "n_routed_experts", .expert_size = "moe_intermediate_size",
     .shared = "moe_intermediate_size*n_shared_experts",
     .aliases = "num_local_experts=n_routed_experts"},
    {.model_type = "ernie4_5_moe", .vllm_class = "Ernie4_5_MoeForCausalLM",
     .qkv_bias = "use_bias", .mlp_bias = "use_bias", .moe = Moe::ernie,
     .experts = "moe_num_experts", .expert_size = "moe_intermediate_size",
     .shared = "moe_intermediate_size*moe_num_shared_experts",
     .aliases = "num_experts=moe_num_experts,num_experts_per_tok=moe_k"},
    {.model_type = "hunyuan_v1_moe", .vllm_class = "HunYuanMoEV1ForCausalLM",
     .qkv_bias = kLlamaO, .o_bias = kLlamaO, .moe = Moe::hunyuan, .experts = "num_experts",
     .expert_size = "moe_intermediate_size", .shared = "intermediate_size*num_shared_expert",
     .aliases = "num_experts_per_tok=moe_topk,num_local_experts=num_experts"},
    // Llama4DecoderLayer: Llama4Attention(bias=False, bias_o_proj=False), hard-coded.
    {.model_type = "llama4_text", .vllm_class = "Llama4ForCausalLM", .moe = Moe::llama4,
     .experts = "num_local_experts", .expert_size = "intermediate_size",
     .shared = "intermediate_size", .unread_true = "attention_bias"},
    {.model_type = "llama4", .vllm_class = "Llama4ForConditionalGeneration (text model)",
     .moe = Moe::llama4, .experts = "num_local_experts", .expert_size = "intermediate_size",
     .shared = "intermediate_size", .unread_true = "attention_bias"},
    {.model_type = "dbrx", .vllm_class = "DbrxForCausalLM", .kv = Kv::dbrx,
     .derived_head_dim = true, .moe = Moe::dbrx,
     .aliases = "num_attention_heads=n_heads,hidden_size=d_model,num_hidden_layers=n_layers"},
    {.model_type = "deepseek_v2", .vllm_class = "DeepseekV2ForCausalLM", .attn = Attn::mla,
     .moe = Moe::deepseek, .experts = "n_routed_experts", .expert_size = "moe_intermediate_size",
     .shared = "moe_intermediate_size*n_shared_experts",
     .aliases = "num_experts=n_routed_experts"},
    {.model_type = "deepseek_v3", .vllm_class = "DeepseekV3ForCausalLM", .attn = Attn::mla,
     .moe = Moe::deepseek, .experts = "n_routed_experts", .expert_size = "moe_intermediate_size",
     .shared = "moe_intermediate_size*n_shared_experts",
     .aliases = "num_local_experts=n_routed_experts"},
    // MiniCPM3Attention and MiniCPMMLP: every projection bias=False.
    {.model_type = "minicpm3", .vllm_class = "MiniCPM3ForCausalLM", .attn = Attn::mla_unfused,
     .unread_true = "attention_bias,mlp_bias"},
    // gpt-oss: its own rules (biases everywhere, swigluoai on interleaved w13), read by
    // read_gpt_oss_moe (hf_moe_config.cpp).
    {.model_type = "gpt_oss", .vllm_class = "GptOssForCausalLM", .qkv_bias = "true",
     .o_bias = "true", .mlp_bias = "true", .moe = Moe::every, .experts = "num_local_experts",
     .expert_size = "intermediate_size", .aliases = kExperts},
};
// clang-format on

}  // namespace

const Family* find_family(std::string_view model_type) {
  const Family* family = nullptr;
  for (const auto& f : kFamilies) {
    if (f.model_type == model_type) family = &f;
  }
  return family;
}

std::string known_model_types() {
  std::string out;
  for (const auto& f : kFamilies) out += (out.empty() ? "" : ", ") + std::string(f.model_type);
  return out;
}

std::vector<std::pair<std::string, std::string>> parse_aliases(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& pair : split(text, ',')) {
    const auto eq = pair.find('=');
    out.emplace_back(pair.substr(0, eq), pair.substr(eq + 1));
  }
  return out;
}

// A bias flag expression of the family table (see Family).
bool eval_flag(const ConfigReader& c, std::string_view expr) {
  if (expr.empty()) return false;
  if (expr == "true") return true;
  if (const auto gt = expr.find('>'); gt != std::string_view::npos) {
    const std::string first(expr.substr(0, gt));
    return c.has(first) ? c.flag_or(first, false) : eval_flag(c, expr.substr(gt + 1));
  }
  bool any = false;
  for (const std::string& term : split(expr, '|')) {
    const auto colon = term.find(':');
    const bool fallback = colon != std::string::npos && term.substr(colon + 1) == "true";
    any = c.flag_or(term.substr(0, colon), fallback) || any;
  }
  return any;
}

}  // namespace fusebench::hf_config
