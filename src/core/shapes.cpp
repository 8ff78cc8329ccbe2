#include "fusebench/shapes.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "fusebench/file_kind.hpp"
#include "fusebench/input_files.hpp"
#include "fusebench/printable.hpp"

namespace fusebench {

std::string_view to_string(Activation a) {
  switch (a) {
    case Activation::silu:
      return "silu";
    case Activation::gelu_tanh:
      return "gelu_tanh";
    case Activation::gelu:
      return "gelu";
    case Activation::swigluoai:
      return "swigluoai";
  }
  return "?";
}

std::string_view to_string(LayerKind kind) {
  switch (kind) {
    case LayerKind::attention:
      return "attention";
    case LayerKind::mla:
      return "mla";
    case LayerKind::dense:
      return "dense";
    case LayerKind::expert:
      return "expert";
    case LayerKind::shared_expert:
      return "shared_expert";
  }
  return "?";
}

bool is_attention_layer(LayerKind kind) {
  return kind == LayerKind::attention || kind == LayerKind::mla;
}

std::vector<MlpLayer> ModelShape::mlp_layer_list() const {
  if (!mlp_layers.empty() || !gated || intermediate <= 0) return mlp_layers;
  return {MlpLayer{LayerKind::dense, intermediate, "intermediate_size", layers > 0 ? layers : -1}};
}

bool ModelShape::MoePlacement::is_moe(std::int64_t layer) const {
  return (layer + 1) % sparse_step == 0 &&
         std::find(dense_only.begin(), dense_only.end(), layer) == dense_only.end() &&
         layer >= first_moe && layer <= last_moe && layer % moe_freq == 0;
}

std::vector<LayerKind> ModelShape::mlp_kinds_at(std::int64_t layer) const {
  const auto list = mlp_layer_list();
  const bool moe_model = std::any_of(list.begin(), list.end(),
                                     [](const MlpLayer& l) { return l.kind == LayerKind::expert; });
  const bool moe = moe_placement.is_moe(layer);
  std::vector<LayerKind> out;
  for (const auto& l : list) {
    const bool sparse = l.kind == LayerKind::expert || l.kind == LayerKind::shared_expert;
    if (!moe_model || sparse == moe) out.push_back(l.kind);
  }
  return out;
}

std::string ModelShape::refusal(std::string_view op) const {
  for (const auto& [refused_op, why] : refused) {
    if (refused_op == op) return why;
  }
  return {};
}

namespace {

// No real model has a dimension near this (hidden is at most 2^14 today); the cap keeps the
// products the plans form (rows * cols * dtype bytes of a weight) inside int64, since a config
// is untrusted input (fuzz/fuzz_hf_config.cpp).
constexpr std::int64_t kMaxSize = std::int64_t{1} << 20;

std::string join_ints(const std::vector<int>& values) {
  std::string out;
  for (int v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

// Typed access to one config object as vLLM reads it through transformers' config class: a field
// is found under its own name or under the name the class's `attribute_map` aliases it to
// (Qwen3MoeConfig saves num_experts as num_local_experts), and every field read is remembered, so
// that expert and MLA fields a family's reading never looked at can be refused. Every error names
// the file and the field.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& cfg, const std::string& where,
               std::vector<std::pair<std::string, std::string>> aliases = {})
      : cfg_(cfg), where_(where), aliases_(std::move(aliases)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(where_ + ": " + what);
  }
  // The value of `key` (or of its alias), nullptr when absent or null.
  const nlohmann::json* find(const std::string& key) const {
    read_.insert(key);
    const nlohmann::json* found = nullptr;
    std::string found_name;
    for (const std::string& name : names_of(key)) {
      read_.insert(name);
      if (!cfg_.contains(name) || cfg_.at(name).is_null()) continue;
      if (found != nullptr && *found != cfg_.at(name)) {
        fail("fields '" + found_name + "' (" + found->dump() + ") and '" + name + "' (" +
             cfg_.at(name).dump() +
             ") are one attribute of the config class (attribute_map) but "
             "disagree");
      }
      found = &cfg_.at(name);
      found_name = name;
    }
    return found;
  }
  // The name the field is stored under (for messages): the alias when only it is present.
  std::string stored_name(const std::string& key) const {
    for (const std::string& name : names_of(key)) {
      if (cfg_.contains(name) && !cfg_.at(name).is_null()) return name;
    }
    return key;
  }
  bool has(const std::string& key) const { return find(key) != nullptr; }
  std::int64_t positive(const std::string& key) const {
    if (!has(key)) fail("missing field '" + key + "'");
    return integer(key, 1);
  }
  std::int64_t positive_or(const std::string& key, std::int64_t fallback) const {
    return has(key) ? integer(key, 1) : fallback;
  }
  std::int64_t non_negative_or(const std::string& key, std::int64_t fallback) const {
    return has(key) ? integer(key, 0) : fallback;
  }
  bool flag_or(const std::string& key, bool fallback) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean())
      fail("field '" + stored_name(key) + "' must be true or false, got " + v->dump());
    return v->get<bool>();
  }
  std::optional<std::string> text(const std::string& key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string())
      fail("field '" + stored_name(key) + "' must be a string, got " + v->dump());
    return v->get<std::string>();
  }
  double number_or(const std::string& key, double fallback) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number() || !(v->get<double>() > 0))
      fail("field '" + stored_name(key) + "' must be a positive number, got " + v->dump());
    return v->get<double>();
  }
  // An array of non-negative layer indices.
  std::set<std::int64_t> indices(const std::string& key) const {
    std::set<std::int64_t> out;
    const nlohmann::json* v = find(key);
    if (v == nullptr) return out;
    if (!v->is_array()) fail("field '" + stored_name(key) + "' must be an array of layer indices");
    for (const auto& e : *v) {
      if (!e.is_number_integer() || e.get<std::int64_t>() < 0)
        fail("field '" + stored_name(key) + "' must hold layer indices >= 0, got " + e.dump());
      out.insert(e.get<std::int64_t>());
    }
    return out;
  }
  // A nested config object (DBRX's attn_config, ffn_config); an empty one when absent.
  ConfigReader object(const std::string& key) const {
    const nlohmann::json* v = find(key);
    if (v != nullptr && !v->is_object()) fail("field '" + key + "' must be an object");
    return ConfigReader(v != nullptr ? *v : empty(), where_ + " (" + key + ")");
  }
  // Whether the field holds something (not absent, null, 0, false, "" or []).
  bool set(const std::string& name) const {
    if (!cfg_.contains(name)) return false;
    const auto& v = cfg_.at(name);
    return !(v.is_null() || (v.is_number() && v.get<double>() == 0) ||
             (v.is_boolean() && !v.get<bool>()) ||
             (v.is_string() && v.get<std::string>().empty()) || (v.is_array() && v.empty()));
  }
  bool was_read(const std::string& name) const { return read_.count(name) > 0; }
  const nlohmann::json& json() const { return cfg_; }

 private:
  static const nlohmann::json& empty() {
    static const nlohmann::json e = nlohmann::json::object();
    return e;
  }
  std::vector<std::string> names_of(const std::string& key) const {
    std::vector<std::string> names = {key};
    for (const auto& [a, b] : aliases_) {
      if (a == key) names.push_back(b);
      if (b == key) names.push_back(a);
    }
    return names;
  }
  std::int64_t integer(const std::string& key, std::int64_t min) const {
    const nlohmann::json& v = *find(key);
    const bool in_range = v.is_number_unsigned()
                              ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(kMaxSize)
                              : v.is_number_integer() && v.get<std::int64_t>() <= kMaxSize;
    const bool ok = in_range && v.get<std::int64_t>() >= min;
    if (!ok) {
      fail("field '" + stored_name(key) + "' must be an integer in [" + std::to_string(min) + ", " +
           std::to_string(kMaxSize) + "], got " + v.dump());
    }
    return v.get<std::int64_t>();
  }

  const nlohmann::json& cfg_;
  std::string where_;
  std::vector<std::pair<std::string, std::string>> aliases_;
  mutable std::set<std::string> read_;
};

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
    // gpt-oss: its own rules (biases everywhere, swigluoai on interleaved w13), read below.
    {.model_type = "gpt_oss", .vllm_class = "GptOssForCausalLM", .qkv_bias = "true",
     .o_bias = "true", .mlp_bias = "true", .moe = Moe::every, .experts = "num_local_experts",
     .expert_size = "intermediate_size", .aliases = kExperts},
};
// clang-format on

std::string known_model_types() {
  std::string out;
  for (const auto& f : kFamilies) out += (out.empty() ? "" : ", ") + std::string(f.model_type);
  return out;
}

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= text.size() && !text.empty()) {
    const std::size_t end = std::min(text.find(sep, at), text.size());
    out.emplace_back(text.substr(at, end - at));
    at = end + 1;
  }
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

// Reads the attention projections' sizes (hidden, heads, kv heads, head_dim).
void read_attention_sizes(const ConfigReader& c, const Family& f, ModelShape& m) {
  m.hidden = c.positive("hidden_size");
  m.heads = c.positive("num_attention_heads");
  m.layers = c.non_negative_or("num_hidden_layers", 0);
  switch (f.kv) {
    case Kv::key:
      m.kv_heads = c.positive_or("num_key_value_heads", m.heads);
      break;
    case Kv::mha:
      m.kv_heads = m.heads;
      if (c.has("num_key_value_heads") && c.positive("num_key_value_heads") != m.heads) {
        c.fail("num_key_value_heads=" + std::to_string(c.positive("num_key_value_heads")) +
               " differs from num_attention_heads=" + std::to_string(m.heads) + ", but vLLM's " +
               std::string(f.vllm_class) + " builds multi-head attention (every head its own k/v)");
      }
      break;
    case Kv::falcon:
      // FalconAttention: new_decoder_architecture reads num_kv_heads; else multi_query gives one.
      if (c.flag_or("new_decoder_architecture", false)) {
        m.kv_heads = c.positive_or("num_kv_heads", m.heads);
      } else {
        m.kv_heads = c.flag_or("multi_query", true) ? 1 : m.heads;
        c.has("num_kv_heads");  // read: vLLM ignores it without new_decoder_architecture
      }
      break;
    case Kv::bigcode:
      m.kv_heads = c.flag_or("multi_query", true) ? 1 : m.heads;
      c.has("num_key_value_heads");  // derived by transformers from multi_query
      break;
    case Kv::dbrx:
      m.kv_heads = c.object("attn_config").positive_or("kv_n_heads", 1);
      c.has("num_key_value_heads");  // transformers mirrors attn_config.kv_n_heads there
      break;
  }
  if (f.attn == Attn::mla) {
    const bool mla = c.non_negative_or("qk_nope_head_dim", 0) > 0 ||
                     c.non_negative_or("qk_rope_head_dim", 0) > 0;
    if (mla) {
      m.head_dim = 0;     // read_mla: qk_nope_head_dim + qk_rope_head_dim
      c.has("head_dim");  // transformers writes the rope dim there; vLLM does not read it
      return;
    }
  }
  const bool divisible = m.hidden % m.heads == 0;
  if (f.derived_head_dim) {
    if (!divisible) {
      c.fail("hidden_size=" + std::to_string(m.hidden) +
             " is not divisible by num_attention_heads=" + std::to_string(m.heads) + " (vLLM's " +
             std::string(f.vllm_class) + " takes head_dim = hidden_size / num_attention_heads)");
    }
    m.head_dim = m.hidden / m.heads;
    if (c.has("head_dim") && c.positive("head_dim") != m.head_dim) {
      c.fail("head_dim=" + std::to_string(c.positive("head_dim")) +
             " differs from hidden_size / "
             "num_attention_heads = " +
             std::to_string(m.head_dim) + ", which vLLM's " + std::string(f.vllm_class) +
             " uses whatever head_dim says");
    }
  } else if (c.has("head_dim")) {
    m.head_dim = c.positive("head_dim");
  } else {
    if (!divisible) {
      c.fail("no head_dim and hidden_size=" + std::to_string(m.hidden) +
             " is not divisible by num_attention_heads=" + std::to_string(m.heads));
    }
    m.head_dim = m.hidden / m.heads;
  }
}

// The gated activation of the non-Gemma families: vLLM's MLPs accept only silu.
void require_silu(const ConfigReader& c, ModelShape& m, const std::string& act) {
  if (act != "silu") {
    m.gated = false;
    m.refused.push_back({"gate_up", "hidden_act=" + quote_name(act) + ": vLLM's " + m.vllm_class +
                                        " MLP has a gated form only for silu (SiluAndMul)"});
  }
  (void)c;
}

void read_gemma_activation(const ConfigReader& c, Mlp rule, ModelShape& m) {
  const auto act = c.text("hidden_activation");
  if (rule == Mlp::gemma) {
    c.has("hidden_act");  // _get_gemma_act_fn ignores it
    // _get_gemma_act_fn: no hidden_activation means approximate GeLU whatever hidden_act says.
    if (!act || *act == "gelu_pytorch_tanh") {
      m.activation = Activation::gelu_tanh;
    } else if (*act == "gelu") {
      m.activation = Activation::gelu;
    } else {
      m.gated = false;
      m.refused.push_back(
          {"gate_up", "hidden_activation=" + quote_name(*act) +
                          ": vLLM's Gemma MLP knows only gelu_pytorch_tanh and gelu"});
    }
    return;
  }
  const std::string a = act.value_or(c.text("hidden_act").value_or("gelu_pytorch_tanh"));
  if (a == "gelu_pytorch_tanh") {
    m.activation = Activation::gelu_tanh;
  } else {
    m.gated = false;
    m.refused.push_back({"gate_up", "hidden_activation=" + quote_name(a) + ": vLLM's " +
                                        m.vllm_class +
                                        " MLP requires gelu_pytorch_tanh (GeluAndMul tanh)"});
  }
}

// Expert and MLA fields: a config that sets one the family's reading did not use describes a
// layout the suite would benchmark wrong, so it is refused naming the field.
constexpr const char* kSparseFields[] = {"num_local_experts",
                                         "num_experts",
                                         "n_routed_experts",
                                         "moe_num_experts",
                                         "num_experts_per_tok",
                                         "moe_k",
                                         "moe_topk",
                                         "experts_per_token",
                                         "moe_intermediate_size",
                                         "shared_expert_intermediate_size",
                                         "n_shared_experts",
                                         "moe_num_shared_experts",
                                         "num_shared_expert",
                                         "shared_intermediate_size",
                                         "intermediate_size_mlp",
                                         "kv_lora_rank",
                                         "q_lora_rank",
                                         "qk_nope_head_dim",
                                         "qk_rope_head_dim",
                                         "first_k_dense_replace",
                                         "moe_layer_freq",
                                         "decoder_sparse_step",
                                         "mlp_only_layers",
                                         "moe_layers",
                                         "interleave_moe_layer_step",
                                         "moe_layer_start_index",
                                         "moe_layer_end_index",
                                         "moe_layer_interval",
                                         "use_mixed_mlp_moe",
                                         "use_cla"};

void refuse_unread_sparse_fields(const ConfigReader& c, const ModelShape& m) {
  std::string fields;
  for (const char* key : kSparseFields) {
    if (c.set(key) && !c.was_read(key))
      fields +=
          (fields.empty() ? "'" : ", '") + std::string(key) + "' = " + c.json().at(key).dump();
  }
  if (fields.empty()) return;
  const bool dense = m.experts == 0 && m.attention != LayerKind::mla;
  c.fail("field(s) " + fields + " set, but vLLM's " + m.vllm_class +
         (dense ? " builds model_type '" + m.family + "' without experts or MLA"
                : " does not read them for model_type '" + m.family + "'") +
         ": an expert or MLA layout the suite would benchmark wrong cannot be mapped "
         "(docs/models.md)");
}

// The layers in [0, layers) the placement makes MoE.
std::int64_t moe_layer_count(const ModelShape::MoePlacement& p, std::int64_t layers) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < layers; ++i) n += p.is_moe(i) ? 1 : 0;
  return n;
}

// One integer of an MoE field, refusing per-layer lists (Hunyuan, ERNIE-VL) the suite does not
// map.
std::int64_t size_field(const ConfigReader& c, const std::string& key, const ModelShape& m) {
  const nlohmann::json* v = c.find(key);
  if (v != nullptr && v->is_array()) {
    c.fail("field '" + c.stored_name(key) + "' is a per-layer list " + v->dump() +
           ": per-layer MoE sizes are not mapped for " + m.vllm_class);
  }
  return c.positive(key);
}

// Shared expert size: "field" or "a*b"; 0 when the config has none.
std::int64_t shared_size(const ConfigReader& c, std::string_view rule, const ModelShape& m) {
  if (rule.empty()) return 0;
  const auto star = rule.find('*');
  if (star == std::string_view::npos) return c.non_negative_or(std::string(rule), 0);
  const std::string a(rule.substr(0, star)), b(rule.substr(star + 1));
  if (const nlohmann::json* v = c.find(b); v != nullptr && v->is_array()) {
    c.fail("field '" + c.stored_name(b) + "' is a per-layer list " + v->dump() +
           ": per-layer MoE sizes are not mapped for " + m.vllm_class);
  }
  const std::int64_t count = c.non_negative_or(b, 0);
  if (count == 0) return 0;
  const std::int64_t size = size_field(c, a, m);
  if (size * count > kMaxSize)
    c.fail(a + " * " + b + " = " + std::to_string(size * count) + " exceeds " +
           std::to_string(kMaxSize));
  return size * count;
}

// The experts each token is routed to (top_k), present in the config: vLLM's router picks top_k
// of the `experts` routed experts, so 1 <= top_k <= experts; refused naming both fields.
std::int64_t routed_per_token(const ConfigReader& c, const std::string& top_k,
                              const std::string& experts_field, std::int64_t experts) {
  const nlohmann::json& v = *c.find(top_k);
  const bool whole = v.is_number_integer() &&
                     (v.is_number_unsigned() ? v.get<std::uint64_t>() <= std::uint64_t(experts)
                                             : v.get<std::int64_t>() <= experts);
  if (!whole || v.get<std::int64_t>() < 1) {
    c.fail("field '" + c.stored_name(top_k) + "' = " + v.dump() +
           " must be a whole number in [1, " + std::to_string(experts) + "] (" + experts_field +
           " = " + std::to_string(experts) +
           ": each token is routed to that many of the routed experts)");
  }
  return v.get<std::int64_t>();
}

// The MoE layers of the model: placement, routed and shared experts, dense layers elsewhere.
void read_moe(const ConfigReader& c, const Family& f, ModelShape& m) {
  ModelShape::MoePlacement& p = m.moe_placement;
  std::int64_t dense_size = m.intermediate;
  std::string dense_from = "intermediate_size";
  std::string top_k = "num_experts_per_tok";
  const ConfigReader ffn = f.moe == Moe::dbrx ? c.object("ffn_config") : c;
  switch (f.moe) {
    case Moe::none:
      return;
    case Moe::every:
    case Moe::dbrx:
      break;
    case Moe::qwen: {
      p.sparse_step = c.positive_or("decoder_sparse_step", 1);
      const auto dense_only = c.indices("mlp_only_layers");
      p.dense_only.assign(dense_only.begin(), dense_only.end());
      std::string listed;
      std::size_t shown = 0;
      for (std::int64_t i : dense_only) {
        if (++shown > 16) {
          listed += ", ... (" + std::to_string(dense_only.size()) + " layers)";
          break;
        }
        listed += (listed.empty() ? "" : ", ") + std::to_string(i);
      }
      p.rule = "decoder_sparse_step=" + std::to_string(p.sparse_step) + ", mlp_only_layers=[" +
               listed + "]";
      dense_from = "intermediate_size (mlp_only_layers / decoder_sparse_step)";
      break;
    }
    case Moe::deepseek:
      p.first_moe = c.non_negative_or("first_k_dense_replace", 0);
      p.moe_freq = c.positive_or("moe_layer_freq", 1);
      p.rule = "first_k_dense_replace=" + std::to_string(p.first_moe) +
               ", moe_layer_freq=" + std::to_string(p.moe_freq);
      dense_from = "intermediate_size (first_k_dense_replace / moe_layer_freq)";
      break;
    case Moe::ernie:
      p.first_moe = c.non_negative_or("moe_layer_start_index", 0);
      p.last_moe = c.has("moe_layer_end_index") ? c.non_negative_or("moe_layer_end_index", 0)
                                                : std::max<std::int64_t>(m.layers - 1, 0);
      if (!c.has("moe_layer_end_index") && m.layers == 0) p.last_moe = std::int64_t{1} << 40;
      p.sparse_step = c.positive_or("moe_layer_interval", 1);
      p.rule = "moe_layer_start_index=" + std::to_string(p.first_moe) +
               ", moe_layer_end_index=" + std::to_string(p.last_moe) +
               ", moe_layer_interval=" + std::to_string(p.sparse_step);
      dense_from = "intermediate_size (outside moe_layer_start_index..end_index)";
      top_k = "moe_k";
      break;
    case Moe::llama4: {
      const std::int64_t step = c.non_negative_or("interleave_moe_layer_step", 1);
      if (step == 0) {
        p.sparse_step = std::int64_t{1} << 40;  // no MoE layer
      } else {
        p.sparse_step = step;
      }
      p.rule = "interleave_moe_layer_step=" + std::to_string(step);
      // transformers lists the MoE layers (moe_layers, derived from the step); vLLM uses the
      // step: a list that disagrees is a layout vLLM would not build.
      if (c.has("moe_layers") && m.layers > 0) {
        const auto listed = c.indices("moe_layers");
        std::set<std::int64_t> by_step;
        for (std::int64_t i = 0; i < m.layers; ++i)
          if (p.is_moe(i)) by_step.insert(i);
        if (listed != by_step) {
          c.fail("field 'moe_layers' lists other layers than interleave_moe_layer_step=" +
                 std::to_string(step) + " gives, the rule vLLM's Llama4ForCausalLM builds by");
        }
      }
      dense_size = c.positive("intermediate_size_mlp");
      dense_from = "intermediate_size_mlp (layers off interleave_moe_layer_step)";
      break;
    }
    case Moe::hunyuan:
      if (c.flag_or("use_cla", false))
        c.fail(
            "field 'use_cla' is true: cross-layer attention layers run q_proj alone, which the "
            "suite does not map");
      break;
  }
  // Routed experts.
  if (f.moe == Moe::dbrx) {
    m.experts = ffn.positive("moe_num_experts");
    m.experts_per_token =
        ffn.has("moe_top_k") ? routed_per_token(ffn, "moe_top_k", "moe_num_experts", m.experts) : 1;
  } else {
    const nlohmann::json* count = c.find(f.experts);
    if (count != nullptr && count->is_array())
      c.fail("field '" + c.stored_name(f.experts) + "' is a per-layer list: not mapped");
    m.experts = f.moe == Moe::every ? c.positive(f.experts) : c.non_negative_or(f.experts, 0);
    if (f.moe == Moe::hunyuan && m.experts == 1) {
      // _is_moe: vLLM builds a dense HunYuanMLP for one expert; transformers builds one routed
      // expert and a shared MLP: the checkpoint's layout is not the one vLLM would load.
      c.fail("field '" + c.stored_name(f.experts) +
             "' = 1: vLLM's HunYuanMoEV1ForCausalLM builds a dense MLP for a single expert "
             "(its MoE needs more than one), transformers one routed expert and a shared MLP: "
             "the layouts disagree");
    }
    if (f.moe == Moe::ernie && c.has("use_moe") && !c.flag_or("use_moe", true)) m.experts = 0;
  }
  if (m.experts == 0) {
    // vLLM builds every layer dense: the other expert fields are not used (and not refused).
    c.has(top_k);
    c.has(f.expert_size);
    for (const std::string& field : split(f.shared, '*')) c.has(field);
    m.moe_placement = {};
    if (f.moe == Moe::llama4) m.intermediate = dense_size;
    return;  // vLLM builds every layer dense
  }
  if (f.moe != Moe::dbrx) {
    const nlohmann::json* k = c.find(top_k);
    if (k != nullptr && k->is_array())
      c.fail("field '" + c.stored_name(top_k) + "' is a per-layer list: not mapped");
    if (k == nullptr) c.fail("missing field '" + top_k + "'");
    m.experts_per_token = routed_per_token(c, top_k, c.stored_name(f.experts), m.experts);
  }
  const std::int64_t expert =
      f.moe == Moe::dbrx ? ffn.positive("ffn_hidden_size") : size_field(c, f.expert_size, m);
  const std::string expert_from = f.moe == Moe::dbrx ? "ffn_config.ffn_hidden_size (per expert)"
                                  : std::string(f.expert_size) == "intermediate_size"
                                      ? "intermediate_size (per expert)"
                                      : std::string(f.expert_size);
  if (f.moe == Moe::dbrx) {
    const auto act = ffn.object("ffn_act_fn").text("name").value_or("silu");
    if (act != "silu") {
      m.gated = false;
      m.refused.push_back({"gate_up", "ffn_config.ffn_act_fn.name=" + quote_name(act) +
                                          ": vLLM's DbrxForCausalLM runs silu experts"});
    }
  }
  const bool known = m.layers > 0;
  const bool every = f.moe == Moe::every || f.moe == Moe::dbrx || f.moe == Moe::hunyuan;
  const std::int64_t moe =
      every ? (known ? m.layers : -1) : (known ? moe_layer_count(p, m.layers) : -1);
  const bool has_dense = !every && (known ? moe < m.layers : true);
  if (has_dense) {
    m.mlp_layers.push_back({LayerKind::dense, dense_size, dense_from, known ? m.layers - moe : -1});
  }
  if (moe != 0) m.mlp_layers.push_back({LayerKind::expert, expert, expert_from, moe});
  std::int64_t shared = 0;
  std::string shared_from = f.shared;
  if (f.moe == Moe::hunyuan) {
    if (c.non_negative_or("use_mixed_mlp_moe", -1) < 0)
      c.fail("missing field 'use_mixed_mlp_moe' (vLLM's HunYuanSparseMoeBlock reads it)");
    if (c.non_negative_or("use_mixed_mlp_moe", 0) > 0) shared = shared_size(c, f.shared, m);
  } else if (f.moe == Moe::qwen && m.family == "qwen2_moe") {
    shared = c.non_negative_or(f.shared, -1);
    if (shared < 0) c.fail("missing field 'shared_expert_intermediate_size'");
  } else if (f.moe == Moe::llama4) {
    shared = m.intermediate;  // Llama4MoE: shared_expert = LlamaMLP(intermediate_size)
    shared_from = "intermediate_size (the shared expert)";
  } else {
    shared = shared_size(c, f.shared, m);
  }
  if (shared > 0 && moe != 0)
    m.mlp_layers.push_back({LayerKind::shared_expert, shared, shared_from, moe});
  if (f.moe == Moe::llama4) m.intermediate = dense_size;
}

// DeepSeek MLA (and MiniCPM3's).
void read_mla(const ConfigReader& c, const Family& f, ModelShape& m) {
  const std::int64_t nope = c.non_negative_or("qk_nope_head_dim", 0);
  const std::int64_t rope = c.non_negative_or("qk_rope_head_dim", 0);
  if (nope == 0 && rope == 0) {  // vLLM: MHA only when both are 0
    if (f.attn == Attn::mla_unfused) c.fail("missing field 'qk_rope_head_dim' (MLA)");
    return;
  }
  m.attention = LayerKind::mla;
  m.kv_lora_rank = c.positive("kv_lora_rank");
  m.qk_rope_head_dim = c.positive("qk_rope_head_dim");
  m.head_dim = nope + rope;  // qk_head_dim, per head of q_b_proj
  c.has("v_head_dim");
  c.has("qk_head_dim");
  if (c.has("q_lora_rank")) m.q_lora_rank = c.positive("q_lora_rank");
  if (f.attn == Attn::mla_unfused) {
    m.refused.push_back(
        {"qkv", "vLLM's " + m.vllm_class +
                    " runs q_a_proj and kv_a_proj_with_mqa as separate replicated layers "
                    "(no fused_qkv_a_proj): there is no fused pair it runs to compare"});
  } else if (m.q_lora_rank == 0) {
    m.refused.push_back(
        {"qkv",
         "q_lora_rank is null: vLLM's DeepseekV2MLAAttention then runs q_proj "
         "(column-parallel) and kv_a_proj_with_mqa (replicated) as separate layers, "
         "with no fused_qkv_a_proj pair to compare"});
  }
  m.refused.push_back({"tp_attn",
                       "MLA: tp_attn pairs QKVParallelLinear with o_proj; MLA's pipeline "
                       "(fused_qkv_a_proj, q_b_proj, kv_b_proj, o_proj) is not modelled"});
}

// JSON keeps the last of two equal keys without a word, so a config saying hidden_size twice
// would run with whichever came last; refused instead, naming the key and where it is (any
// nesting level), as the checkpoint reader refuses a tensor named twice.
nlohmann::json parse_unique_keys(std::string_view text, const std::string& name) {
  struct Level {
    bool object = false;
    std::string path;  // where this object or array is, e.g. "text_config" or "a[2]"
    std::set<std::string> keys;
    std::string last_key;   // the key whose value is being parsed
    std::size_t index = 0;  // the array element being parsed
  };
  std::vector<Level> open;
  const auto path_of_child = [](const Level& parent) {
    if (!parent.object) return parent.path + "[" + std::to_string(parent.index) + "]";
    return parent.path.empty() ? parent.last_key : parent.path + "." + parent.last_key;
  };
  const auto next_element = [&] {
    if (!open.empty() && !open.back().object) ++open.back().index;
  };
  using Event = nlohmann::json::parse_event_t;
  const auto callback = [&](int, Event event, nlohmann::json& parsed) {
    switch (event) {
      case Event::object_start:
      case Event::array_start: {
        if (open.size() >= static_cast<std::size_t>(kMaxJsonDepth))  // input_files.hpp
          throw std::invalid_argument(name + ": JSON nested deeper than " +
                                      std::to_string(kMaxJsonDepth) +
                                      " levels (the limit for any input, docs/usage.md)");
        Level level;
        level.object = event == Event::object_start;
        if (!open.empty()) level.path = path_of_child(open.back());
        open.push_back(std::move(level));
        break;
      }
      case Event::key: {
        Level& level = open.back();
        std::string key = parsed.get<std::string>();
        if (!level.keys.insert(key).second) {
          throw std::invalid_argument(
              name + ": key " + quote_name(key) + " appears twice" +
              (level.path.empty() ? "" : " in " + quote_name(level.path)) +
              " (JSON would keep the last one silently; keep the one you mean)");
        }
        level.last_key = std::move(key);
        break;
      }
      case Event::object_end:
      case Event::array_end:
        open.pop_back();
        next_element();
        break;
      case Event::value:
        next_element();
        break;
    }
    return true;
  };
  return nlohmann::json::parse(text, callback);
}

}  // namespace

ModelShape parse_hf_config(std::string_view json_text, const std::string& name) {
  nlohmann::json root;
  try {
    root = parse_unique_keys(json_text, name);
  } catch (const nlohmann::json::exception& e) {
    // Not only parse_error: a number too large for a double throws out_of_range (found by
    // fuzz/fuzz_hf_config), which must still surface as the documented invalid_argument. The
    // parser quotes the bytes it stopped at, which may be a NUL or invalid UTF-8.
    throw std::invalid_argument(name + ": not valid JSON (" + printable(e.what()) + ")");
  }
  if (!root.is_object()) throw std::invalid_argument(name + ": top level must be a JSON object");
  // Multimodal configs (Gemma-3, LLaVA, Llama-4, ...) keep the language model under text_config.
  const bool nested = !root.contains("hidden_size") && root.contains("text_config") &&
                      root["text_config"].is_object();
  const nlohmann::json& cfg = nested ? root["text_config"] : root;
  const std::string where = nested ? name + " (text_config)" : name;
  const ConfigReader plain(cfg, where);

  ModelShape m;
  m.name = name;
  std::optional<std::string> type = plain.text("model_type");
  std::optional<std::string> outer;
  if (nested) outer = ConfigReader(root, name).text("model_type");
  if (!type && nested) type = outer;
  if (!type) {
    // A shape is never filled with a guess (docs/models.md): without model_type the family's
    // rules (biases, MoE placement, activation) are unknown, and `architectures` names classes,
    // not the config layout this table maps.
    std::string architectures;
    if (root.contains("architectures"))
      architectures = " (architectures: " + printable(root["architectures"].dump()) + ")";
    plain.fail("missing field 'model_type'" + architectures +
               ": the suite reads a config by its model_type, as vLLM does, and does not guess "
               "one; add the model's model_type, e.g. \"model_type\": \"llama\" (known: " +
               known_model_types() + "; docs/models.md)");
  }
  const Family* family = nullptr;
  for (const auto& f : kFamilies) {
    if (f.model_type == *type) family = &f;
  }
  if (family == nullptr) {
    plain.fail("model_type " + quote_name(*type) +
               " is not a family the suite maps (it would guess its layers); known: " +
               known_model_types() + " (docs/models.md)");
  }
  const Family& f = *family;
  const ConfigReader c(cfg, where, parse_aliases(f.aliases));
  c.has("model_type");
  m.family = *type;
  m.vllm_class = std::string(f.vllm_class);
  if (nested && outer && *outer != *type) {
    m.vllm_class = "the text model of model_type " + quote_name(*outer) + ": " + m.vllm_class;
  }

  read_attention_sizes(c, f, m);
  if (f.mlp != Mlp::ungated && f.moe != Moe::dbrx) m.intermediate = c.positive("intermediate_size");
  m.qkv_bias = eval_flag(c, f.qkv_bias);
  m.o_bias = eval_flag(c, f.o_bias);
  m.mlp_bias = eval_flag(c, f.mlp_bias);
  for (const std::string& flag : split(f.unread_true, ',')) {
    if (c.flag_or(flag, false)) {
      c.fail("field '" + flag + "' is true, but vLLM's " + m.vllm_class +
             " builds these projections without a bias: the checkpoint's bias would be dropped");
    }
  }
  for (const std::string& flag : split(f.required_true, ',')) {
    if (!c.flag_or(flag, false)) {
      c.fail("field '" + flag + "' is " + (c.has(flag) ? "false" : "absent") + ", but vLLM's " +
             m.vllm_class +
             " builds these projections with a bias whatever it says: a checkpoint without the "
             "bias tensors fails vLLM's load (weights not initialized from checkpoint)");
    }
  }
  if (f.attn != Attn::gqa) read_mla(c, f, m);

  if (f.model_type == "gpt_oss") {
    // MLPBlock: FusedMoE(has_bias=True, activation="swigluoai") on gate/up interleaved w13.
    m.activation = Activation::swigluoai;
    m.activation_limit = c.number_or("swiglu_limit", 7.0);
    c.has("swiglu_alpha");
    c.has("hidden_act");
    m.interleaved_gate_up = true;
    m.experts = c.positive(f.experts);
    // Both names are read (the config class aliases them); num_experts_per_tok wins.
    const bool per_tok = c.has("num_experts_per_tok"), per_token = c.has("experts_per_token");
    const std::string top_k = per_tok     ? "num_experts_per_tok"
                              : per_token ? "experts_per_token"
                                          : "";
    if (top_k.empty()) c.fail("missing field 'num_experts_per_tok'");
    m.experts_per_token = routed_per_token(c, top_k, c.stored_name(f.experts), m.experts);
    m.mlp_layers.push_back({LayerKind::expert, m.intermediate, "intermediate_size (per expert)",
                            m.layers > 0 ? m.layers : -1});
  } else {
    switch (f.mlp) {
      case Mlp::silu:
        require_silu(c, m, c.text(f.act_field).value_or("silu"));
        break;
      case Mlp::gemma:
      case Mlp::gemma2:
        read_gemma_activation(c, f.mlp, m);
        break;
      case Mlp::ungated: {
        // fc -> act -> fc: no gate/up pair (GPTNeoXMLP, GPT2MLP, PhiMLP, FalconMLP, ...).
        m.gated = false;
        const std::string act = c.text(f.act_field).value_or("gelu");
        c.has("intermediate_size");
        c.has("n_inner");
        c.has("ffn_hidden_size");
        m.refused.push_back({"gate_up", m.vllm_class + "'s MLP is ungated (fc -> " +
                                            printable(act) +
                                            " -> fc): there is no gate/up pair to fuse"});
        break;
      }
    }
    read_moe(c, f, m);
  }
  refuse_unread_sparse_fields(c, m);
  if (m.attention == LayerKind::attention && m.heads % m.kv_heads != 0) {
    c.fail("num_attention_heads=" + std::to_string(m.heads) +
           " is not a multiple of num_key_value_heads=" + std::to_string(m.kv_heads));
  }
  if (!m.gated) {
    m.mlp_layers.clear();
    m.refused.push_back({"tp_mlp", m.refusal("gate_up")});
  } else if (!m.mlp_layers.empty() &&
             std::none_of(m.mlp_layers.begin(), m.mlp_layers.end(),
                          [](const MlpLayer& l) { return l.kind == LayerKind::dense; })) {
    m.refused.push_back(
        {"tp_mlp",
         "every MLP layer of this model is MoE: vLLM sums the routed experts' (and shared "
         "experts') outputs before one all-reduce, so a per-expert column/row pair is "
         "not a pipeline it runs; gate_up benchmarks the expert shapes"});
  }
  return m;
}

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

std::string model_name_for_config(const std::string& path, std::string_view json_text) {
  // A name segment of a benchmark name: no '/' and nothing a shell or a filter trips on.
  const auto clean = [](std::string s) {
    for (char& ch : s) {
      const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_' || ch == '+';
      if (!ok) ch = '_';
    }
    return s;
  };
  const auto p = std::filesystem::path(path);
  if (const std::string stem = p.stem().string(); !stem.empty() && stem != "config")
    return clean(stem);
  nlohmann::json root;
  try {
    root = parse_input_json(json_text, path);
  } catch (const std::exception&) {
    root = nullptr;  // parse_hf_config reports it
  }
  if (root.is_object()) {
    if (root.contains("_name_or_path") && root["_name_or_path"].is_string()) {
      std::string v = root["_name_or_path"].get<std::string>();
      while (!v.empty() && v.back() == '/') v.pop_back();
      v = v.substr(v.find_last_of('/') == std::string::npos ? 0 : v.find_last_of('/') + 1);
      if (!v.empty() && v != ".") return clean(v);
    }
  }
  const std::string folder = std::filesystem::absolute(p).parent_path().filename().string();
  if (!folder.empty() && folder != "." && folder != "/") return clean(folder);
  if (root.is_object()) {
    if (root.contains("architectures") && root["architectures"].is_array() &&
        !root["architectures"].empty() && root["architectures"][0].is_string())
      return clean(root["architectures"][0].get<std::string>());
    if (root.contains("model_type") && root["model_type"].is_string())
      return clean(root["model_type"].get<std::string>());
  }
  return "model";
}

ModelShape load_hf_config(const std::string& path) {
  if (std::filesystem::is_directory(path)) {
    throw std::invalid_argument("model config '" + path +
                                "' is a directory; pass the config.json inside it");
  }
  // A fifo would block the read; a device is not a config.
  if (const auto what = not_a_regular_file(path); !what.empty() && what != "does not exist")
    throw std::invalid_argument("model config '" + path + "' " + what +
                                "; expected a regular file");
  const std::string text = read_input_file(path, "the model config");  // bounded, registered
  ModelShape m = parse_hf_config(text, path);
  m.name = model_name_for_config(path, text);
  return m;
}

namespace {

// "" when tp can shard the attention projections, else why not.
std::string attention_problem(const ModelShape& model, int tp) {
  if (tp < 1) return "tp must be >= 1";
  if (model.heads % tp != 0)
    return "num_attention_heads=" + std::to_string(model.heads) + " is not divisible by tp";
  if (model.attention == LayerKind::mla) return {};  // the latent projections are replicated
  if (tp >= model.kv_heads) {
    if (tp % model.kv_heads != 0)
      return "tp is larger than num_key_value_heads=" + std::to_string(model.kv_heads) +
             " but not a multiple of it";
  } else if (model.kv_heads % tp != 0) {
    return "num_key_value_heads=" + std::to_string(model.kv_heads) + " is not divisible by tp";
  }
  return {};
}

std::optional<MlpLayer> find_layer(const ModelShape& model, LayerKind kind) {
  for (const auto& l : model.mlp_layer_list()) {
    if (l.kind == kind) return l;
  }
  return std::nullopt;
}

// "" when tp can shard the MLP layer (FusedMoE splits each expert's intermediate the same way
// MergedColumnParallelLinear splits a dense one), else why not.
std::string mlp_problem(const MlpLayer& layer, int tp) {
  if (tp >= 1 && layer.intermediate % tp != 0) {
    return layer.source + "=" + std::to_string(layer.intermediate) + " (layer " +
           std::string(to_string(layer.kind)) + ") is not divisible by tp";
  }
  return {};
}

std::string layers_of(const ModelShape& model) {
  std::string out = std::string(to_string(model.attention));
  for (const auto& l : model.mlp_layer_list()) out += ", " + std::string(to_string(l.kind));
  return out;
}

}  // namespace

ShardShape shard(const ModelShape& model, int tp, LayerKind layer) {
  const auto fail = [&](const std::string& what) {
    throw std::invalid_argument(
        "tp=" + std::to_string(tp) + " is invalid for " + model.name + ": " + what +
        " (valid tp sizes: " + join_ints(valid_tp_sizes(model, layer)) + ")");
  };
  std::optional<MlpLayer> mlp;
  if (is_attention_layer(layer)) {
    if (layer != model.attention)
      throw std::invalid_argument(model.name + " has no layer:" + std::string(to_string(layer)) +
                                  " (its layers: " + layers_of(model) + ")");
  } else {
    mlp = find_layer(model, layer);
    if (!mlp)
      throw std::invalid_argument(model.name + " has no layer:" + std::string(to_string(layer)) +
                                  " (its layers: " + layers_of(model) + ")");
  }
  if (const auto why = attention_problem(model, tp); !why.empty()) fail(why);
  if (mlp) {
    if (const auto why = mlp_problem(*mlp, tp); !why.empty()) fail(why);
  }
  ShardShape s;
  s.tp = tp;
  s.hidden = model.hidden;
  s.head_dim = model.head_dim;
  s.q_heads = model.heads / tp;
  s.attention = model.attention;
  s.qkv_bias = model.qkv_bias;
  s.o_bias = model.o_bias;
  if (model.attention == LayerKind::mla) {
    s.kv_heads = 0;  // MLA has latent kv projections instead (replicated)
    s.kv_replicas = 1;
    s.q_lora_rank = model.q_lora_rank;
    s.kv_a_size = model.kv_lora_rank + model.qk_rope_head_dim;
  } else if (tp >= model.kv_heads) {
    // vLLM QKVParallelLinear: each rank holds one kv head, replicated tp/kv_heads times.
    s.kv_heads = 1;
    s.kv_replicas = tp / model.kv_heads;
  } else {
    s.kv_heads = model.kv_heads / tp;
    s.kv_replicas = 1;
  }
  if (mlp) {
    s.mlp = mlp->kind;
    s.intermediate = mlp->intermediate / tp;
    s.mlp_bias = model.mlp_bias;
    s.activation = model.activation;
    s.activation_limit = model.activation_limit;
    s.interleaved_gate_up = model.interleaved_gate_up;
  }
  return s;
}

ShardShape shard(const ModelShape& model, int tp) {
  const auto layers = model.mlp_layer_list();
  return shard(model, tp, layers.empty() ? model.attention : layers.front().kind);
}

std::vector<int> valid_tp_sizes(const ModelShape& model, LayerKind layer, int max_tp) {
  const auto mlp = is_attention_layer(layer) ? std::nullopt : find_layer(model, layer);
  std::vector<int> out;
  for (int tp = 1; tp <= max_tp; ++tp) {
    if (attention_problem(model, tp).empty() && (!mlp || mlp_problem(*mlp, tp).empty()))
      out.push_back(tp);
  }
  return out;
}

std::vector<int> valid_tp_sizes(const ModelShape& model, int max_tp) {
  std::vector<int> out;
  const auto layers = model.mlp_layer_list();
  for (int tp = 1; tp <= max_tp; ++tp) {
    bool ok = attention_problem(model, tp).empty();
    for (const auto& l : layers) ok = ok && mlp_problem(l, tp).empty();
    if (ok) out.push_back(tp);
  }
  return out;
}

}  // namespace fusebench
