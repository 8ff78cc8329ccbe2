// The MoE layers of a HF config.json, by the family's rule (Family::moe; docs/models.md).
#include "hf_moe_config.hpp"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "fusebench/printable.hpp"

namespace fusebench::hf_config {
namespace {

// Families whose every decoder layer is MoE (no placement rule).
bool every_layer_moe(const Family& f) {
  return f.moe == Moe::every || f.moe == Moe::dbrx || f.moe == Moe::hunyuan;
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

// What the placement rule says beside the placement: the dense layers' size and where it comes
// from, and the field holding top_k.
struct MoeRule {
  std::int64_t dense_size = 0;
  std::string dense_from = "intermediate_size";
  std::string top_k = "num_experts_per_tok";
};

// "1, 2, 3" (at most 16, then the count), for the rule's message.
std::string layer_list(const std::set<std::int64_t>& layers) {
  std::string listed;
  std::size_t shown = 0;
  for (std::int64_t i : layers) {
    if (++shown > 16) {
      listed += ", ... (" + std::to_string(layers.size()) + " layers)";
      break;
    }
    listed += (listed.empty() ? "" : ", ") + std::to_string(i);
  }
  return listed;
}

// Qwen2-MoE, Qwen3-MoE: decoder_sparse_step, mlp_only_layers.
void place_qwen(const ConfigReader& c, ModelShape::MoePlacement& p, MoeRule& rule) {
  p.sparse_step = c.positive_or("decoder_sparse_step", 1);
  const auto dense_only = c.indices("mlp_only_layers");
  p.dense_only.assign(dense_only.begin(), dense_only.end());
  p.rule = "decoder_sparse_step=" + std::to_string(p.sparse_step) + ", mlp_only_layers=[" +
           layer_list(dense_only) + "]";
  rule.dense_from = "intermediate_size (mlp_only_layers / decoder_sparse_step)";
}

// DeepSeek, GLM-4-MoE, dots1: first_k_dense_replace, moe_layer_freq.
void place_deepseek(const ConfigReader& c, ModelShape::MoePlacement& p, MoeRule& rule) {
  p.first_moe = c.non_negative_or("first_k_dense_replace", 0);
  p.moe_freq = c.positive_or("moe_layer_freq", 1);
  p.rule = "first_k_dense_replace=" + std::to_string(p.first_moe) +
           ", moe_layer_freq=" + std::to_string(p.moe_freq);
  rule.dense_from = "intermediate_size (first_k_dense_replace / moe_layer_freq)";
}

// ERNIE 4.5 MoE: moe_layer_start_index..moe_layer_end_index every moe_layer_interval; top_k moe_k.
void place_ernie(const ConfigReader& c, const ModelShape& m, ModelShape::MoePlacement& p,
                 MoeRule& rule) {
  p.first_moe = c.non_negative_or("moe_layer_start_index", 0);
  p.last_moe = c.has("moe_layer_end_index") ? c.non_negative_or("moe_layer_end_index", 0)
                                            : std::max<std::int64_t>(m.layers - 1, 0);
  if (!c.has("moe_layer_end_index") && m.layers == 0) p.last_moe = std::int64_t{1} << 40;
  p.sparse_step = c.positive_or("moe_layer_interval", 1);
  p.rule = "moe_layer_start_index=" + std::to_string(p.first_moe) +
           ", moe_layer_end_index=" + std::to_string(p.last_moe) +
           ", moe_layer_interval=" + std::to_string(p.sparse_step);
  rule.dense_from = "intermediate_size (outside moe_layer_start_index..end_index)";
  rule.top_k = "moe_k";
}

// Llama 4: interleave_moe_layer_step; its dense layers are intermediate_size_mlp wide.
void place_llama4(const ConfigReader& c, const ModelShape& m, ModelShape::MoePlacement& p,
                  MoeRule& rule) {
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
  rule.dense_size = c.positive("intermediate_size_mlp");
  rule.dense_from = "intermediate_size_mlp (layers off interleave_moe_layer_step)";
}

// Which decoder layers are MoE, by the family's rule.
void read_placement(const ConfigReader& c, const Family& f, ModelShape& m, MoeRule& rule) {
  switch (f.moe) {
    case Moe::none:
    case Moe::every:
    case Moe::dbrx:
      break;
    case Moe::qwen:
      place_qwen(c, m.moe_placement, rule);
      break;
    case Moe::deepseek:
      place_deepseek(c, m.moe_placement, rule);
      break;
    case Moe::ernie:
      place_ernie(c, m, m.moe_placement, rule);
      break;
    case Moe::llama4:
      place_llama4(c, m, m.moe_placement, rule);
      break;
    case Moe::hunyuan:
      if (c.flag_or("use_cla", false))
        c.fail(
            "field 'use_cla' is true: cross-layer attention layers run q_proj alone, which the "
            "suite does not map");
      break;
  }
}

// The field `key` unless it is a per-layer list (refused); nullptr when absent.
const nlohmann::json* not_per_layer(const ConfigReader& c, const std::string& key) {
  const nlohmann::json* v = c.find(key);
  if (v != nullptr && v->is_array())
    c.fail("field '" + c.stored_name(key) + "' is a per-layer list: not mapped");
  return v;
}

// The routed expert count (and DBRX's top_k, which lives beside it in ffn_config).
void read_routed_experts(const ConfigReader& c, const ConfigReader& ffn, const Family& f,
                         ModelShape& m) {
  if (f.moe == Moe::dbrx) {
    m.experts = ffn.positive("moe_num_experts");
    m.experts_per_token =
        ffn.has("moe_top_k") ? routed_per_token(ffn, "moe_top_k", "moe_num_experts", m.experts) : 1;
    return;
  }
  not_per_layer(c, f.experts);
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

// No routed experts: vLLM builds every layer dense, and the other expert fields are not used
// (read, so not refused).
void read_all_dense(const ConfigReader& c, const Family& f, const MoeRule& rule, ModelShape& m) {
  c.has(rule.top_k);
  c.has(f.expert_size);
  for (const std::string& field : split(f.shared, '*')) c.has(field);
  m.moe_placement = {};
  if (f.moe == Moe::llama4) m.intermediate = rule.dense_size;
}

// One routed expert's MLP size and the field it comes from (DBRX: ffn_config, whose activation
// must be silu for a gate/up pair).
std::pair<std::int64_t, std::string> read_expert_size(const ConfigReader& c,
                                                      const ConfigReader& ffn, const Family& f,
                                                      ModelShape& m) {
  if (f.moe == Moe::dbrx) {
    const std::int64_t size = ffn.positive("ffn_hidden_size");
    const auto act = ffn.object("ffn_act_fn").text("name").value_or("silu");
    if (act != "silu") {
      m.gated = false;
      m.refused.push_back({"gate_up", "ffn_config.ffn_act_fn.name=" + quote_name(act) +
                                          ": vLLM's DbrxForCausalLM runs silu experts"});
    }
    return {size, "ffn_config.ffn_hidden_size (per expert)"};
  }
  const std::int64_t size = size_field(c, f.expert_size, m);
  return {size, std::string(f.expert_size) == "intermediate_size" ? "intermediate_size (per expert)"
                                                                  : std::string(f.expert_size)};
}

// The shared expert(s)' size (0: none) and the fields it comes from.
std::pair<std::int64_t, std::string> read_shared_expert(const ConfigReader& c, const Family& f,
                                                        const ModelShape& m) {
  if (f.moe == Moe::hunyuan) {
    if (c.non_negative_or("use_mixed_mlp_moe", -1) < 0)
      c.fail("missing field 'use_mixed_mlp_moe' (vLLM's HunYuanSparseMoeBlock reads it)");
    if (c.non_negative_or("use_mixed_mlp_moe", 0) > 0)
      return {shared_size(c, f.shared, m), f.shared};
    return {0, f.shared};
  }
  if (f.moe == Moe::qwen && m.family == "qwen2_moe") {
    const std::int64_t shared = c.non_negative_or(f.shared, -1);
    if (shared < 0) c.fail("missing field 'shared_expert_intermediate_size'");
    return {shared, f.shared};
  }
  if (f.moe == Moe::llama4) {
    // Llama4MoE: shared_expert = LlamaMLP(intermediate_size)
    return {m.intermediate, "intermediate_size (the shared expert)"};
  }
  return {shared_size(c, f.shared, m), f.shared};
}

// How many decoder layers are MoE (-1: unknown, the config gives no layer count).
std::int64_t moe_layers(const Family& f, const ModelShape& m) {
  if (m.layers <= 0) return -1;
  return every_layer_moe(f) ? m.layers : moe_layer_count(m.moe_placement, m.layers);
}

}  // namespace

void read_moe(const ConfigReader& c, const Family& f, ModelShape& m) {
  if (f.moe == Moe::none) return;
  MoeRule rule;
  rule.dense_size = m.intermediate;
  const ConfigReader ffn = f.moe == Moe::dbrx ? c.object("ffn_config") : c;
  read_placement(c, f, m, rule);
  read_routed_experts(c, ffn, f, m);
  if (m.experts == 0) {
    read_all_dense(c, f, rule, m);
    return;
  }
  if (f.moe != Moe::dbrx) {
    if (not_per_layer(c, rule.top_k) == nullptr) c.fail("missing field '" + rule.top_k + "'");
    m.experts_per_token = routed_per_token(c, rule.top_k, c.stored_name(f.experts), m.experts);
  }
  const auto [expert, expert_from] = read_expert_size(c, ffn, f, m);
  const std::int64_t moe = moe_layers(f, m);
  const bool known = m.layers > 0;
  if (!every_layer_moe(f) && (known ? moe < m.layers : true)) {
    m.mlp_layers.push_back(
        {LayerKind::dense, rule.dense_size, rule.dense_from, known ? m.layers - moe : -1});
  }
  if (moe != 0) m.mlp_layers.push_back({LayerKind::expert, expert, expert_from, moe});
  const auto [shared, shared_from] = read_shared_expert(c, f, m);
  if (shared > 0 && moe != 0)
    m.mlp_layers.push_back({LayerKind::shared_expert, shared, shared_from, moe});
  if (f.moe == Moe::llama4) m.intermediate = rule.dense_size;
}

void read_gpt_oss_moe(const ConfigReader& c, const Family& f, ModelShape& m) {
  m.activation = Activation::swigluoai;
  m.activation_limit = c.number_or("swiglu_limit", 7.0);
  c.has("swiglu_alpha");
  c.has("hidden_act");
  m.interleaved_gate_up = true;
  m.experts = c.positive(f.experts);
  // Both names are read (the config class aliases them); num_experts_per_tok wins.
  const bool per_tok = c.has("num_experts_per_tok"), per_token = c.has("experts_per_token");
  const std::string top_k = per_tok ? "num_experts_per_tok" : per_token ? "experts_per_token" : "";
  if (top_k.empty()) c.fail("missing field 'num_experts_per_tok'");
  m.experts_per_token = routed_per_token(c, top_k, c.stored_name(f.experts), m.experts);
  m.mlp_layers.push_back({LayerKind::expert, m.intermediate, "intermediate_size (per expert)",
                          m.layers > 0 ? m.layers : -1});
}

}  // namespace fusebench::hf_config
