// Reads a HF config.json as vLLM's model class for its model_type does (docs/models.md).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "fusebench/file_kind.hpp"
#include "fusebench/input_files.hpp"
#include "fusebench/printable.hpp"
#include "fusebench/shapes.hpp"
#include "hf_config_reader.hpp"
#include "hf_families.hpp"
#include "hf_moe_config.hpp"

namespace fusebench {
namespace {

using hf_config::Attn;
using hf_config::ConfigReader;
using hf_config::eval_flag;
using hf_config::Family;
using hf_config::known_model_types;
using hf_config::Kv;
using hf_config::Mlp;
using hf_config::Moe;
using hf_config::parse_aliases;
using hf_config::split;

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

// The gated activation by the family's MLP rule; an ungated MLP (fc -> act -> fc: GPTNeoXMLP,
// GPT2MLP, PhiMLP, FalconMLP, ...) has no gate/up pair, and gate_up is refused.
void read_mlp_activation(const ConfigReader& c, const Family& f, ModelShape& m) {
  switch (f.mlp) {
    case Mlp::silu:
      require_silu(c, m, c.text(f.act_field).value_or("silu"));
      break;
    case Mlp::gemma:
    case Mlp::gemma2:
      read_gemma_activation(c, f.mlp, m);
      break;
    case Mlp::ungated: {
      m.gated = false;
      const std::string act = c.text(f.act_field).value_or("gelu");
      c.has("intermediate_size");
      c.has("n_inner");
      c.has("ffn_hidden_size");
      m.refused.push_back({"gate_up", m.vllm_class + "'s MLP is ungated (fc -> " + printable(act) +
                                          " -> fc): there is no gate/up pair to fuse"});
      break;
    }
  }
}

// The biases by the family's flag expressions, refusing the flags vLLM's class contradicts.
void read_biases(const ConfigReader& c, const Family& f, ModelShape& m) {
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
  return parse_input_json(text, name, {kMaxJsonDepth, /*unique_keys=*/true, quote_name});
}

// tp_mlp is a dense column/row pair: refused where the model has no gate/up pair, or no dense
// MLP layer (the experts are reduced together).
void refuse_tp_mlp(ModelShape& m) {
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
  const Family* family = hf_config::find_family(*type);
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
  read_biases(c, f, m);
  if (f.attn != Attn::gqa) read_mla(c, f, m);

  if (f.model_type == "gpt_oss") {
    hf_config::read_gpt_oss_moe(c, f, m);
  } else {
    read_mlp_activation(c, f, m);
    hf_config::read_moe(c, f, m);
  }
  refuse_unread_sparse_fields(c, m);
  if (m.attention == LayerKind::attention && m.heads % m.kv_heads != 0) {
    c.fail("num_attention_heads=" + std::to_string(m.heads) +
           " is not a multiple of num_key_value_heads=" + std::to_string(m.kv_heads));
  }
  refuse_tp_mlp(m);
  return m;
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

}  // namespace fusebench
