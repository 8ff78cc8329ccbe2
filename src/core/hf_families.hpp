#pragma once
// The family table: how vLLM's model class for each config.json model_type builds its layers
// (docs/models.md, "Families"). Internal to src/core.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hf_config_reader.hpp"

namespace fusebench::hf_config {

// How a family's attention is built.
enum class Attn {
  gqa,          // QKVParallelLinear
  mla,          // DeepSeek MLA: fused_qkv_a_proj (when q_lora_rank is set) + MoE by deepseek rules
  mla_unfused,  // MLA whose vLLM class runs q_a_proj and kv_a_proj_with_mqa as separate layers
};
// Where the kv head count comes from.
enum class Kv {
  key,      // num_key_value_heads (absent or null: the query heads)
  mha,      // vLLM builds MHA whatever num_key_value_heads says (a differing one is refused)
  falcon,   // new_decoder_architecture: num_kv_heads; multi_query: 1; else the query heads
  bigcode,  // multi_query: 1, else the query heads
  dbrx,     // attn_config.kv_n_heads
};
// How the MLP is built.
enum class Mlp {
  silu,     // MergedColumnParallelLinear + SiluAndMul; other hidden_act values refused
  gemma,    // GeluAndMul per _get_gemma_act_fn
  gemma2,   // gelu_pytorch_tanh required
  ungated,  // fc -> act -> fc: no gate/up pair (act: `act_field`)
};
// Which layers are MoE and how the experts are sized.
enum class Moe {
  none,      // dense everywhere
  every,     // every layer: `experts` routed experts of `expert_size` (Mixtral-like)
  qwen,      // decoder_sparse_step, mlp_only_layers; moe_intermediate_size
  deepseek,  // first_k_dense_replace, moe_layer_freq; moe_intermediate_size; n_shared_experts
  ernie,     // moe_layer_start_index..end_index, moe_layer_interval; moe_num_shared_experts
  llama4,    // interleave_moe_layer_step; shared expert of intermediate_size; dense of
             // intermediate_size_mlp
  hunyuan,   // every layer when num_experts > 1; shared_mlp when use_mixed_mlp_moe
  dbrx,      // every layer: ffn_config.moe_num_experts of ffn_config.ffn_hidden_size
};

// One model_type as vLLM's model class builds it. Flag expressions (biases): "" false, "true",
// "a|b" true when any field is true, "a:true" field a with default true, "x>e": field x when
// present, else expression e.
struct Family {
  std::string_view model_type, vllm_class;
  Attn attn = Attn::gqa;
  Kv kv = Kv::key;
  bool derived_head_dim = false;  // vLLM takes hidden / heads (a differing head_dim is refused)
  const char* qkv_bias = "";
  const char* o_bias = "";
  const char* mlp_bias = "";
  Mlp mlp = Mlp::silu;
  Moe moe = Moe::none;
  const char* experts = "";      // the routed expert count vLLM reads (its getattr name)
  const char* expert_size = "";  // the per-expert intermediate size field
  const char* shared = "";       // shared expert: "field" or "a*b" (a product of two fields)
  const char* aliases = "";      // the config class's attribute_map: "a=b,c=d"
  // Bias flags transformers reads but vLLM's class does not (it builds no bias there): refused
  // when true, since the checkpoint's bias would be dropped.
  const char* unread_true = "";
  // Bias flags vLLM's class does not read because it always builds the bias: refused when not
  // true, since vLLM's loader would find no checkpoint tensor for it and refuse to load.
  const char* required_true = "";
  const char* act_field = "hidden_act";  // the activation field (ungated: for the message)
  const char* note = "";  // what else the row says (docs/models.md), shown in context.models
};

// The family of `model_type`; nullptr when the table has none.
const Family* find_family(std::string_view model_type);
// Every model_type of the table, comma-separated (for messages).
std::string known_model_types();
// A family's `aliases` ("a=b,c=d") as pairs.
std::vector<std::pair<std::string, std::string>> parse_aliases(std::string_view text);
// A bias flag expression of the family table (see Family) evaluated on the config.
bool eval_flag(const ConfigReader& c, std::string_view expr);

}  // namespace fusebench::hf_config
