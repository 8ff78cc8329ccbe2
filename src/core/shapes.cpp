#include "fusebench/shapes.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

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

std::vector<LayerKind> ModelShape::mlp_kinds_at(std::int64_t layer) const {
  const auto list = mlp_layer_list();
  const bool moe_model = std::any_of(list.begin(), list.end(),
                                     [](const MlpLayer& l) { return l.kind == LayerKind::expert; });
  const MoePlacement& p = moe_placement;
  const bool moe =
      (layer + 1) % p.sparse_step == 0 &&
      std::find(p.dense_only.begin(), p.dense_only.end(), layer) == p.dense_only.end() &&
      layer >= p.first_moe && layer % p.moe_freq == 0;
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

// Typed access to one config object; every error names the file and the field.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& cfg, const std::string& where) : cfg_(cfg), where_(where) {}

  bool has(const char* key) const { return cfg_.contains(key) && !cfg_.at(key).is_null(); }
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(where_ + ": " + what);
  }
  std::int64_t positive(const char* key) const {
    if (!has(key)) fail("missing field '" + std::string(key) + "'");
    return integer(key, 1);
  }
  std::int64_t positive_or(const char* key, std::int64_t fallback) const {
    return has(key) ? integer(key, 1) : fallback;
  }
  std::int64_t non_negative_or(const char* key, std::int64_t fallback) const {
    return has(key) ? integer(key, 0) : fallback;
  }
  bool flag_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!cfg_.at(key).is_boolean())
      fail("field '" + std::string(key) + "' must be true or false, got " + cfg_.at(key).dump());
    return cfg_.at(key).get<bool>();
  }
  std::optional<std::string> text(const char* key) const {
    if (!has(key)) return std::nullopt;
    if (!cfg_.at(key).is_string())
      fail("field '" + std::string(key) + "' must be a string, got " + cfg_.at(key).dump());
    return cfg_.at(key).get<std::string>();
  }
  double number_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const auto& v = cfg_.at(key);
    if (!v.is_number() || !(v.get<double>() > 0))
      fail("field '" + std::string(key) + "' must be a positive number, got " + v.dump());
    return v.get<double>();
  }
  // An array of non-negative layer indices.
  std::set<std::int64_t> indices(const char* key) const {
    std::set<std::int64_t> out;
    if (!has(key)) return out;
    const auto& v = cfg_.at(key);
    if (!v.is_array()) fail("field '" + std::string(key) + "' must be an array of layer indices");
    for (const auto& e : v) {
      if (!e.is_number_integer() || e.get<std::int64_t>() < 0)
        fail("field '" + std::string(key) + "' must hold layer indices >= 0, got " + e.dump());
      out.insert(e.get<std::int64_t>());
    }
    return out;
  }

 private:
  std::int64_t integer(const char* key, std::int64_t min) const {
    const auto& v = cfg_.at(key);
    const bool in_range = v.is_number_unsigned()
                              ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(kMaxSize)
                              : v.is_number_integer() && v.get<std::int64_t>() <= kMaxSize;
    const bool ok = in_range && v.get<std::int64_t>() >= min;
    if (!ok) {
      fail("field '" + std::string(key) + "' must be an integer in [" + std::to_string(min) + ", " +
           std::to_string(kMaxSize) + "], got " + v.dump());
    }
    return v.get<std::int64_t>();
  }

  const nlohmann::json& cfg_;
  const std::string& where_;
};

// How vLLM builds each model_type (docs/models.md has the table).
enum class Rules {
  llama,     // LlamaForCausalLM and the classes that reuse its layers
  qwen2,     // q/k/v bias hard-coded on
  qwen3,     // q/k/v bias = attention_bias
  gemma,     // GeluAndMul per _get_gemma_act_fn
  gemma2,    // gelu_pytorch_tanh required; bias = attention_bias
  mixtral,   // every layer MoE, expert intermediate = intermediate_size
  qwen_moe,  // qwen2_moe / qwen3_moe: num_experts, moe_intermediate_size, dense layers by rule
  deepseek,  // MLA + first_k_dense_replace + shared experts
  gpt_oss,   // biases everywhere, MoE with swigluoai on interleaved w13
  ungated,   // gpt_neox, gpt2, phi: fused query_key_value, plain MLP
};

struct Family {
  std::string_view model_type, vllm_class;
  Rules rules;
};

constexpr Family kFamilies[] = {
    {"llama", "LlamaForCausalLM", Rules::llama},
    {"mistral", "MistralForCausalLM (Llama layers)", Rules::llama},
    {"phi3", "Phi3ForCausalLM (Llama layers; checkpoint stores qkv_proj/gate_up_proj fused)",
     Rules::llama},
    {"qwen2", "Qwen2ForCausalLM", Rules::qwen2},
    {"qwen3", "Qwen3ForCausalLM", Rules::qwen3},
    {"gemma", "GemmaForCausalLM", Rules::gemma},
    {"gemma2", "Gemma2ForCausalLM", Rules::gemma2},
    {"gemma3_text", "Gemma3ForCausalLM", Rules::gemma2},
    {"gemma3", "Gemma3ForConditionalGeneration (text model)", Rules::gemma2},
    {"mixtral", "MixtralForCausalLM", Rules::mixtral},
    {"qwen2_moe", "Qwen2MoeForCausalLM", Rules::qwen_moe},
    {"qwen3_moe", "Qwen3MoeForCausalLM", Rules::qwen_moe},
    {"deepseek_v2", "DeepseekV2ForCausalLM", Rules::deepseek},
    {"deepseek_v3", "DeepseekV3ForCausalLM", Rules::deepseek},
    {"gpt_oss", "GptOssForCausalLM", Rules::gpt_oss},
    {"gpt_neox", "GPTNeoXForCausalLM", Rules::ungated},
    {"gpt2", "GPT2LMHeadModel", Rules::ungated},
    {"phi", "PhiForCausalLM", Rules::ungated},
};

std::string known_model_types() {
  std::string out;
  for (const auto& f : kFamilies) out += (out.empty() ? "" : ", ") + std::string(f.model_type);
  return out;
}

// Reads the attention projections' sizes (hidden, heads, kv heads, head_dim).
void read_attention_sizes(const ConfigReader& c, Rules rules, const std::string& type,
                          ModelShape& m) {
  const bool gpt2 = type == "gpt2";
  m.hidden = c.positive(gpt2 ? "n_embd" : "hidden_size");
  m.heads = c.positive(gpt2 ? "n_head" : "num_attention_heads");
  m.kv_heads = c.positive_or("num_key_value_heads", m.heads);
  m.layers = c.non_negative_or(gpt2 ? "n_layer" : "num_hidden_layers", 0);
  // Qwen2(-MoE), DeepSeek's MHA and the ungated families take head_dim = hidden / heads, as
  // their vLLM classes do whatever the config says; the others read head_dim when present.
  const bool derived = rules == Rules::qwen2 || rules == Rules::ungated ||
                       (rules == Rules::qwen_moe && type == "qwen2_moe");
  const bool mla = rules == Rules::deepseek && (c.non_negative_or("qk_nope_head_dim", 0) > 0 ||
                                                c.non_negative_or("qk_rope_head_dim", 0) > 0);
  if (mla) {
    m.head_dim = 0;  // read_deepseek: qk_nope_head_dim + qk_rope_head_dim
  } else if (!derived && c.has("head_dim")) {
    m.head_dim = c.positive("head_dim");
  } else {
    if (m.hidden % m.heads != 0) {
      c.fail(std::string(derived ? "" : "no head_dim and ") + (gpt2 ? "n_embd=" : "hidden_size=") +
             std::to_string(m.hidden) + " is not divisible by " +
             (gpt2 ? "n_head=" : "num_attention_heads=") + std::to_string(m.heads));
    }
    m.head_dim = m.hidden / m.heads;
  }
}

// The gated activation of the non-Gemma families: vLLM's MLPs accept only silu.
void require_silu(const ConfigReader& c, ModelShape& m) {
  const std::string act = c.text("hidden_act").value_or("silu");
  if (act != "silu") {
    m.gated = false;
    m.refused.push_back({"gate_up", "hidden_act='" + act + "': vLLM's " + m.vllm_class +
                                        " MLP has a gated form only for silu (SiluAndMul)"});
  }
}

void read_gemma_activation(const ConfigReader& c, Rules rules, ModelShape& m) {
  const auto act = c.text("hidden_activation");
  if (rules == Rules::gemma) {
    // _get_gemma_act_fn: no hidden_activation means approximate GeLU whatever hidden_act says.
    if (!act || *act == "gelu_pytorch_tanh") {
      m.activation = Activation::gelu_tanh;
    } else if (*act == "gelu") {
      m.activation = Activation::gelu;
    } else {
      m.gated = false;
      m.refused.push_back(
          {"gate_up", "hidden_activation='" + *act +
                          "': vLLM's Gemma MLP knows only gelu_pytorch_tanh and gelu"});
    }
    return;
  }
  const std::string a = act.value_or(c.text("hidden_act").value_or("gelu_pytorch_tanh"));
  if (a == "gelu_pytorch_tanh") {
    m.activation = Activation::gelu_tanh;
  } else {
    m.gated = false;
    m.refused.push_back({"gate_up", "hidden_activation='" + a + "': vLLM's " + m.vllm_class +
                                        " MLP requires gelu_pytorch_tanh (GeluAndMul tanh)"});
  }
}

// Expert count fields in a family vLLM builds dense are a layout we cannot know: refuse.
void refuse_expert_fields(const ConfigReader& c, const std::string& type) {
  for (const char* key : {"num_local_experts", "num_experts", "n_routed_experts"}) {
    if (c.has(key) && c.non_negative_or(key, 0) > 0) {
      c.fail("field '" + std::string(key) + "' is set but vLLM builds model_type '" + type +
             "' without experts; an MoE layout under this model_type cannot be mapped");
    }
  }
  if (c.has("kv_lora_rank")) {
    c.fail("field 'kv_lora_rank' (MLA) is set but vLLM builds model_type '" + type +
           "' with ordinary attention; MLA is mapped for deepseek_v2/deepseek_v3 only");
  }
}

// Layers in [0, layers) with (i + 1) % step == 0, minus those in `dense_only`.
std::int64_t qwen_moe_layer_count(std::int64_t layers, std::int64_t step,
                                  const std::set<std::int64_t>& dense_only) {
  std::int64_t n = layers / step;
  for (std::int64_t i : dense_only) {
    if (i < layers && (i + 1) % step == 0) --n;
  }
  return n;
}

void read_qwen_moe(const ConfigReader& c, const std::string& type, ModelShape& m) {
  m.experts = c.non_negative_or("num_experts", 0);
  if (m.experts == 0) return;  // vLLM builds every layer dense
  m.experts_per_token = c.positive("num_experts_per_tok");
  const std::int64_t expert = c.positive("moe_intermediate_size");
  const std::int64_t step = c.positive_or("decoder_sparse_step", 1);
  const auto dense_only = c.indices("mlp_only_layers");
  m.moe_placement.sparse_step = step;
  m.moe_placement.dense_only.assign(dense_only.begin(), dense_only.end());
  std::string listed;
  std::size_t shown = 0;
  for (std::int64_t i : dense_only) {
    if (++shown > 16) {
      listed += ", ... (" + std::to_string(dense_only.size()) + " layers)";
      break;
    }
    listed += (listed.empty() ? "" : ", ") + std::to_string(i);
  }
  m.moe_placement.rule =
      "decoder_sparse_step=" + std::to_string(step) + ", mlp_only_layers=[" + listed + "]";
  const bool known = m.layers > 0;
  const std::int64_t moe = known ? qwen_moe_layer_count(m.layers, step, dense_only) : -1;
  const bool has_dense = known ? moe < m.layers : (step > 1 || !dense_only.empty());
  if (has_dense) {
    m.mlp_layers.push_back({LayerKind::dense, m.intermediate,
                            "intermediate_size (mlp_only_layers / decoder_sparse_step)",
                            known ? m.layers - moe : -1});
  }
  if (moe != 0) m.mlp_layers.push_back({LayerKind::expert, expert, "moe_intermediate_size", moe});
  if (type == "qwen2_moe") {
    const std::int64_t shared = c.non_negative_or("shared_expert_intermediate_size", -1);
    if (shared < 0) c.fail("missing field 'shared_expert_intermediate_size'");
    if (shared > 0 && moe != 0)
      m.mlp_layers.push_back(
          {LayerKind::shared_expert, shared, "shared_expert_intermediate_size", moe});
  }
}

void read_deepseek(const ConfigReader& c, ModelShape& m) {
  const std::int64_t nope = c.non_negative_or("qk_nope_head_dim", 0);
  const std::int64_t rope = c.non_negative_or("qk_rope_head_dim", 0);
  if (nope > 0 || rope > 0) {  // vLLM: MHA only when both are 0
    m.attention = LayerKind::mla;
    m.kv_lora_rank = c.positive("kv_lora_rank");
    m.qk_rope_head_dim = c.positive("qk_rope_head_dim");
    m.head_dim = nope + rope;  // qk_head_dim, per head of q_b_proj
    if (c.has("q_lora_rank")) {
      m.q_lora_rank = c.positive("q_lora_rank");
    } else {
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
  m.experts = c.non_negative_or("n_routed_experts", 0);
  if (m.experts == 0) return;  // n_routed_experts null: every layer dense
  m.experts_per_token = c.positive("num_experts_per_tok");
  const std::int64_t expert = c.positive("moe_intermediate_size");
  const std::int64_t first_dense = c.non_negative_or("first_k_dense_replace", 0);
  const std::int64_t freq = c.positive_or("moe_layer_freq", 1);
  m.moe_placement.first_moe = first_dense;
  m.moe_placement.moe_freq = freq;
  m.moe_placement.rule = "first_k_dense_replace=" + std::to_string(first_dense) +
                         ", moe_layer_freq=" + std::to_string(freq);
  const bool known = m.layers > 0;
  // MoE where layer >= first_k_dense_replace and layer % moe_layer_freq == 0.
  std::int64_t moe = -1;
  if (known) {
    const std::int64_t from = std::min(first_dense, m.layers);
    moe = (m.layers - 1) / freq - (from == 0 ? -1 : (from - 1) / freq);
  }
  const bool has_dense = known ? moe < m.layers : (first_dense > 0 || freq > 1);
  if (has_dense)
    m.mlp_layers.push_back({LayerKind::dense, m.intermediate,
                            "intermediate_size (first_k_dense_replace / moe_layer_freq)",
                            known ? m.layers - moe : -1});
  if (moe != 0) m.mlp_layers.push_back({LayerKind::expert, expert, "moe_intermediate_size", moe});
  const std::int64_t shared = c.non_negative_or("n_shared_experts", 0);
  if (expert * shared > kMaxSize)
    c.fail("moe_intermediate_size * n_shared_experts = " + std::to_string(expert * shared) +
           " exceeds " + std::to_string(kMaxSize));
  if (shared > 0 && moe != 0)
    m.mlp_layers.push_back({LayerKind::shared_expert, expert * shared,
                            "moe_intermediate_size * n_shared_experts", moe});
}

}  // namespace

ModelShape parse_hf_config(std::string_view json_text, const std::string& name) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    // Not only parse_error: a number too large for a double throws out_of_range (found by
    // fuzz/fuzz_hf_config), which must still surface as the documented invalid_argument.
    throw std::invalid_argument(name + ": not valid JSON (" + e.what() + ")");
  }
  if (!root.is_object()) throw std::invalid_argument(name + ": top level must be a JSON object");
  // Multimodal configs keep the language model under text_config.
  const bool nested = !root.contains("hidden_size") && root.contains("text_config") &&
                      root["text_config"].is_object();
  const nlohmann::json& cfg = nested ? root["text_config"] : root;
  const std::string where = nested ? name + " (text_config)" : name;
  const ConfigReader c(cfg, where);

  ModelShape m;
  m.name = name;
  std::optional<std::string> type = c.text("model_type");
  if (!type && nested) type = ConfigReader(root, name).text("model_type");
  const Family* family = nullptr;
  if (type) {
    for (const auto& f : kFamilies) {
      if (f.model_type == *type) family = &f;
    }
    if (family == nullptr) {
      c.fail("model_type '" + *type +
             "' is not a family the suite maps (it would guess its layers); known: " +
             known_model_types() + " (docs/models.md)");
    }
  }
  const Rules rules = family ? family->rules : Rules::llama;
  m.family = type.value_or("llama");
  m.vllm_class = family ? std::string(family->vllm_class)
                        : "LlamaForCausalLM (no model_type in the config: Llama's rules)";

  read_attention_sizes(c, rules, m.family, m);
  if (rules != Rules::ungated) m.intermediate = c.positive("intermediate_size");

  switch (rules) {
    case Rules::llama: {
      refuse_expert_fields(c, m.family);
      // LlamaDecoderLayer: attention_bias or bias on both; qkv_bias overrides q/k/v only.
      m.o_bias = c.flag_or("attention_bias", false) || c.flag_or("bias", false);
      m.qkv_bias = c.flag_or("qkv_bias", m.o_bias);
      m.mlp_bias = c.flag_or("mlp_bias", false);
      require_silu(c, m);
      break;
    }
    case Rules::qwen2:
      refuse_expert_fields(c, m.family);
      m.qkv_bias = true;  // Qwen2Attention: QKVParallelLinear(bias=True); o_proj bias=False
      require_silu(c, m);
      break;
    case Rules::qwen3:
      refuse_expert_fields(c, m.family);
      m.qkv_bias = c.flag_or("attention_bias", false);
      require_silu(c, m);
      break;
    case Rules::gemma:
      refuse_expert_fields(c, m.family);
      read_gemma_activation(c, rules, m);
      break;
    case Rules::gemma2:
      refuse_expert_fields(c, m.family);
      m.qkv_bias = m.o_bias = c.flag_or("attention_bias", false);
      read_gemma_activation(c, rules, m);
      break;
    case Rules::mixtral:
      m.experts = c.positive("num_local_experts");
      m.experts_per_token = c.positive("num_experts_per_tok");
      m.mlp_layers.push_back({LayerKind::expert, m.intermediate, "intermediate_size (per expert)",
                              m.layers > 0 ? m.layers : -1});
      require_silu(c, m);
      break;
    case Rules::qwen_moe:
      m.qkv_bias = m.family == "qwen2_moe" || c.flag_or("attention_bias", false);
      read_qwen_moe(c, m.family, m);
      require_silu(c, m);
      break;
    case Rules::deepseek:
      read_deepseek(c, m);
      require_silu(c, m);
      break;
    case Rules::gpt_oss:
      // OAIAttention: QKVParallelLinear and RowParallelLinear with their default bias=True;
      // MLPBlock: FusedMoE(has_bias=True, activation="swigluoai") on gate/up interleaved w13.
      m.qkv_bias = m.o_bias = m.mlp_bias = true;
      m.experts = c.positive("num_local_experts");
      m.experts_per_token =
          c.positive_or("num_experts_per_tok", c.positive_or("experts_per_token", 0));
      if (m.experts_per_token == 0) c.fail("missing field 'num_experts_per_tok'");
      m.mlp_layers.push_back({LayerKind::expert, m.intermediate, "intermediate_size (per expert)",
                              m.layers > 0 ? m.layers : -1});
      m.activation = Activation::swigluoai;
      m.activation_limit = c.number_or("swiglu_limit", 7.0);
      m.interleaved_gate_up = true;
      break;
    case Rules::ungated: {
      // GPTNeoXAttention/GPT2Attention/PhiAttention: one fused query_key_value with bias (gpt_neox
      // reads attention_bias, default true; gpt2 and phi always); the MLP is fc -> act -> fc.
      m.qkv_bias = m.o_bias = m.family != "gpt_neox" || c.flag_or("attention_bias", true);
      m.gated = false;
      const std::string act =
          c.text(m.family == "gpt2" ? "activation_function" : "hidden_act").value_or("gelu");
      m.refused.push_back({"gate_up", m.vllm_class + "'s MLP is ungated (fc -> " + act +
                                          " -> fc): there is no gate/up pair to fuse"});
      break;
    }
  }
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

const std::vector<ModelShape>& model_presets() {
  // Excerpts of the published config.json files (the fields the reader uses), read by the same
  // reader as --model-config so presets and configs cannot disagree.
  static const std::vector<ModelShape> presets = [] {
    const std::pair<const char*, const char*> configs[] = {
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
            "num_hidden_layers": 48, "hidden_act": "silu", "attention_bias": false})"},
    };
    std::vector<ModelShape> out;
    for (const auto& [name, json] : configs) {
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
    root = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception&) {
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
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot read model config '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  ModelShape m = parse_hf_config(buffer.str(), path);
  m.name = model_name_for_config(path, buffer.str());
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
