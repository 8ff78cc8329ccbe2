// vLLM's checkpoint-to-parameter mapping for a decoder layer's projections, as a table.
#include "fusebench/hf_layer.hpp"

#include <algorithm>
#include <array>
#include <tuple>

namespace fusebench {
namespace {

using E = LayerExtent;
using K = LayerKind;
using P = Presence;

std::string substitute(std::string text, const std::string& key, const std::string& value) {
  for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
  return text;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

const std::string kLayer = "model.layers.{layer}.";

// q/k/v and o projections, stored separately (vLLM's stacked_params_mapping routes them into
// qkv_proj shards "q", "k", "v"; o_proj is a RowParallelLinear). `o_bias` absent: the family's
// o_proj has no bias (a stored one is ignored, as vLLM's loader skips it).
std::vector<StoredTensor> separate_attention(Presence qkv_bias, std::optional<Presence> o_bias) {
  const std::string a = kLayer + "self_attn.";
  std::vector<StoredTensor> t = {
      {a + "q_proj.weight", {{"w_q", E::q}}, E::hidden},
      {a + "k_proj.weight", {{"w_k", E::kv}}, E::hidden},
      {a + "v_proj.weight", {{"w_v", E::kv}}, E::hidden},
      {a + "o_proj.weight", {{"w_o", E::hidden}}, E::q},
      {a + "q_proj.bias", {{"b_q", E::q}}, std::nullopt, K::attention, qkv_bias},
      {a + "k_proj.bias", {{"b_k", E::kv}}, std::nullopt, K::attention, qkv_bias},
      {a + "v_proj.bias", {{"b_v", E::kv}}, std::nullopt, K::attention, qkv_bias},
  };
  if (o_bias)
    t.push_back({a + "o_proj.bias", {{"b_o", E::hidden}}, std::nullopt, K::attention, *o_bias});
  return t;
}

// q/k/v stored as one tensor `qkv` (".weight"/".bias" appended) and the output projection `o`,
// both with biases where the config turns them on; `layout` says how the q/k/v rows are laid out.
std::vector<StoredTensor> fused_attention(const std::string& qkv, const std::string& o,
                                          RowLayout layout) {
  return {
      {qkv + ".weight",
       {{"w_q", E::q}, {"w_k", E::kv}, {"w_v", E::kv}},
       E::hidden,
       K::attention,
       P::always,
       layout},
      {qkv + ".bias",
       {{"b_q", E::q}, {"b_k", E::kv}, {"b_v", E::kv}},
       std::nullopt,
       K::attention,
       P::qkv_bias,
       layout},
      {o + ".weight", {{"w_o", E::hidden}}, E::q},
      {o + ".bias", {{"b_o", E::hidden}}, std::nullopt, K::attention, P::o_bias},
  };
}

// q/k/v and o stored separately under `prefix` (names q_proj, k_proj, v_proj and `o`).
std::vector<StoredTensor> named_attention(const std::string& prefix, const std::string& o) {
  std::vector<StoredTensor> t;
  for (const auto& [name, logical, extent] :
       std::vector<std::tuple<std::string, std::string, LayerExtent>>{
           {"q_proj", "q", E::q}, {"k_proj", "k", E::kv}, {"v_proj", "v", E::kv}}) {
    t.push_back({prefix + name + ".weight", {{"w_" + logical, extent}}, E::hidden});
    t.push_back({prefix + name + ".bias",
                 {{"b_" + logical, extent}},
                 std::nullopt,
                 K::attention,
                 P::qkv_bias});
  }
  t.push_back({prefix + o + ".weight", {{"w_o", E::hidden}}, E::q});
  t.push_back({prefix + o + ".bias", {{"b_o", E::hidden}}, std::nullopt, K::attention, P::o_bias});
  return t;
}

// The logical name of an MLP group's tensor: w_gate, w_expert_gate, w_shared_expert_gate (as the
// plans name them, src/ops/tp_common.hpp).
std::string mlp_logical(LayerKind group, const char* kind, const char* what) {
  const char* infix = group == K::expert          ? "_expert_"
                      : group == K::shared_expert ? "_shared_expert_"
                                                  : "_";
  return std::string(kind) + infix + what;
}

// gate/up (routed into gate_up_proj shards 0, 1; one expert's slice of FusedMoE's w13) and down
// (RowParallelLinear; w2), stored separately under `prefix` with the names `names` (gate, up,
// down: gate_proj/up_proj/down_proj, Mixtral's w1/w3/w2). `bias`: when their biases are there.
std::vector<StoredTensor> separate_mlp(const std::string& prefix,
                                       const std::array<const char*, 3>& names, LayerKind group,
                                       LayerExtent inter, std::optional<Presence> bias) {
  std::vector<StoredTensor> t = {
      {prefix + names[0] + ".weight", {{mlp_logical(group, "w", "gate"), inter}}, E::hidden, group},
      {prefix + names[1] + ".weight", {{mlp_logical(group, "w", "up"), inter}}, E::hidden, group},
      {prefix + names[2] + ".weight", {{mlp_logical(group, "w", "down"), E::hidden}}, inter, group},
  };
  if (bias) {
    t.push_back({prefix + names[0] + ".bias",
                 {{mlp_logical(group, "b", "gate"), inter}},
                 std::nullopt,
                 group,
                 *bias});
    t.push_back({prefix + names[1] + ".bias",
                 {{mlp_logical(group, "b", "up"), inter}},
                 std::nullopt,
                 group,
                 *bias});
    t.push_back({prefix + names[2] + ".bias",
                 {{mlp_logical(group, "b", "down"), E::hidden}},
                 std::nullopt,
                 group,
                 *bias});
  }
  return t;
}

constexpr std::array<const char*, 3> kProj = {"gate_proj", "up_proj", "down_proj"};

std::vector<StoredTensor> dense_mlp(std::optional<Presence> bias = std::nullopt) {
  return separate_mlp(kLayer + "mlp.", kProj, K::dense, E::intermediate, bias);
}

std::vector<StoredTensor> routed_experts(const std::string& prefix,
                                         const std::array<const char*, 3>& names = kProj) {
  return separate_mlp(kLayer + prefix + "experts.{expert}.", names, K::expert,
                      E::expert_intermediate, std::nullopt);
}

std::vector<StoredTensor> concat(std::initializer_list<std::vector<StoredTensor>> lists) {
  std::vector<StoredTensor> out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  return out;
}

// Whether the model's config puts the tensor in the checkpoint (its group aside), and the
// config fields that say so (for messages).
bool present_by_config(Presence p, const ModelShape& m) {
  switch (p) {
    case P::always:
      return true;
    case P::qkv_bias:
      return m.qkv_bias;
    case P::o_bias:
      return m.o_bias;
    case P::mlp_bias:
      return m.mlp_bias;
    case P::q_lora_rank:
      return m.q_lora_rank > 0;
  }
  return true;
}

std::string config_fields(Presence p) {
  switch (p) {
    case P::always:
      return "";
    case P::qkv_bias:
      return "its q/k/v bias flag (attention_bias, qkv_bias or bias, by family)";
    case P::o_bias:
      return "its o_proj bias flag (attention_bias or bias)";
    case P::mlp_bias:
      return "mlp_bias";
    case P::q_lora_rank:
      return "q_lora_rank";
  }
  return "";
}

std::int64_t mlp_intermediate(const ModelShape& model, LayerKind kind) {
  for (const auto& l : model.mlp_layer_list()) {
    if (l.kind == kind) return l.intermediate;
  }
  return 0;
}

}  // namespace

std::string_view to_string(LayerExtent extent) {
  switch (extent) {
    case E::hidden:
      return "hidden_size";
    case E::q:
      return "q_size (num_attention_heads * head_dim)";
    case E::kv:
      return "kv_size (num_key_value_heads * head_dim)";
    case E::intermediate:
      return "intermediate_size";
    case E::expert_intermediate:
      return "the expert intermediate size (moe_intermediate_size; Mixtral: intermediate_size)";
    case E::shared_intermediate:
      return "the shared expert intermediate size";
    case E::q_lora_rank:
      return "q_lora_rank";
    case E::kv_a:
      return "kv_lora_rank + qk_rope_head_dim";
    case E::one:
      return "1";
  }
  return "?";
}

std::int64_t extent_of(const ModelShape& model, LayerExtent extent) {
  switch (extent) {
    case E::hidden:
      return model.hidden;
    case E::q:
      return model.q_size();
    case E::kv:
      return model.kv_size();
    case E::intermediate:
      return model.intermediate;
    case E::expert_intermediate:
      return mlp_intermediate(model, K::expert);
    case E::shared_intermediate:
      return mlp_intermediate(model, K::shared_expert);
    case E::q_lora_rank:
      return model.q_lora_rank;
    case E::kv_a:
      return model.kv_lora_rank + model.qk_rope_head_dim;
    case E::one:
      return 1;
  }
  return 0;
}

const std::vector<LayerFamily>& layer_families() {
  // From vLLM's model files (llama.py, qwen2.py, qwen3.py, phi3.py, mixtral.py, qwen2_moe.py,
  // qwen3_moe.py, deepseek_v2.py, gpt_oss.py). The logical names are the plans' (docs/models.md,
  // "Logical tensors"); biases are [n, 1]. Norms, embeddings and routers (mlp.gate: the moe op
  // reads them apart, checkpoint_router.cpp) are not projections the suite runs and are not read
  // here; qwen2_moe's shared_expert_gate is (the moe op's gated shared expert).
  static const std::vector<LayerFamily> families = {
      // LlamaAttention: bias = attention_bias (q/k/v: qkv_bias); LlamaMLP: bias = mlp_bias.
      {"llama",
       {"llama",    "mistral",   "gemma",    "gemma2",  "gemma3_text",
        "gemma3",   "internlm3", "granite",  "exaone4", "hunyuan_v1_dense",
        "seed_oss", "ernie4_5",  "stablelm", "olmo",    "olmo2",
        "olmo3",    "cohere",    "cohere2",  "smollm3", "helium",
        "ministral"},
       concat({separate_attention(P::qkv_bias, P::o_bias), dense_mlp(P::mlp_bias)}),
       {}},
      // Qwen3Attention: o_proj without bias; transformers builds one when attention_bias is
      // true, which vLLM's loader skips (an extra bias): so does the suite.
      {"qwen3",
       {"qwen3"},
       concat({separate_attention(P::qkv_bias, std::nullopt), dense_mlp(P::mlp_bias)}),
       {}},
      // Ungated MLPs (fc -> act -> fc): the attention projections alone.
      {"llama attention",
       {"starcoder2", "nemotron", "arcee"},
       separate_attention(P::qkv_bias, P::o_bias),
       {}},
      {"phi", {"phi"}, named_attention(kLayer + "self_attn.", "dense"), {}},
      {"gptj", {"gptj"}, named_attention("transformer.h.{layer}.attn.", "out_proj"), {}},
      // GPT-NeoX and Persimmon: query_key_value rows [heads, 3, head_dim]; Falcon: [kv heads,
      // heads / kv heads + 2, head_dim] (vLLM's loaders de-interleave both the same way).
      {"gpt_neox",
       {"gpt_neox"},
       fused_attention("gpt_neox.layers.{layer}.attention.query_key_value",
                       "gpt_neox.layers.{layer}.attention.dense", RowLayout::grouped_qkv),
       {}},
      {"persimmon",
       {"persimmon"},
       fused_attention(kLayer + "self_attn.query_key_value", kLayer + "self_attn.dense",
                       RowLayout::grouped_qkv),
       {}},
      {"falcon",
       {"falcon"},
       fused_attention("transformer.h.{layer}.self_attention.query_key_value",
                       "transformer.h.{layer}.self_attention.dense", RowLayout::grouped_qkv),
       {}},
      // GPT-2: c_attn and c_proj are Conv1D, stored [in, out]: [hidden, q; k; v] (vLLM's
      // loader transposes them).
      {"gpt2",
       {"gpt2"},
       [] {
         auto t = fused_attention("transformer.h.{layer}.attn.c_attn",
                                  "transformer.h.{layer}.attn.c_proj", RowLayout::stacked);
         for (auto& s : t) s.transposed = true;
         return t;
       }(),
       {}},
      // GPTBigCode: c_attn is an nn.Linear of rows [q; k; v].
      {"gpt_bigcode",
       {"gpt_bigcode"},
       fused_attention("transformer.h.{layer}.attn.c_attn", "transformer.h.{layer}.attn.c_proj",
                       RowLayout::stacked),
       {}},
      // GLM, GLM-4: separate q/k/v, gate_up_proj stored fused [gate; up].
      {"glm",
       {"glm", "glm4"},
       concat({separate_attention(P::qkv_bias, P::o_bias),
               {{kLayer + "mlp.gate_up_proj.weight",
                 {{"w_gate", E::intermediate}, {"w_up", E::intermediate}},
                 E::hidden,
                 K::dense},
                {kLayer + "mlp.down_proj.weight",
                 {{"w_down", E::hidden}},
                 E::intermediate,
                 K::dense}}}),
       {}},
      // Qwen2Attention: QKVParallelLinear(bias=True) hard-coded, o_proj bias=False.
      {"qwen2", {"qwen2"}, concat({separate_attention(P::always, std::nullopt), dense_mlp()}), {}},
      // Phi-3 stores q/k/v and gate/up fused; vLLM's loader splits them by output sizes
      // (loaded_shard_id=None): q, k, v = rows [0, q), [q, q+kv), [q+kv, q+2kv).
      {"phi3",
       {"phi3"},
       {{kLayer + "self_attn.qkv_proj.weight",
         {{"w_q", E::q}, {"w_k", E::kv}, {"w_v", E::kv}},
         E::hidden},
        {kLayer + "self_attn.o_proj.weight", {{"w_o", E::hidden}}, E::q},
        {kLayer + "mlp.gate_up_proj.weight",
         {{"w_gate", E::intermediate}, {"w_up", E::intermediate}},
         E::hidden,
         K::dense},
        {kLayer + "mlp.down_proj.weight", {{"w_down", E::hidden}}, E::intermediate, K::dense}},
       {}},
      // MixtralMoE: FusedMoE's expert_params_mapping takes w1 (gate) and w3 (up) into w13,
      // w2 into w2, from block_sparse_moe.experts.E.
      {"mixtral",
       {"mixtral"},
       concat({separate_attention(P::qkv_bias, std::nullopt),
               routed_experts("block_sparse_moe.", {"w1", "w3", "w2"})}),
       {}},
      // Qwen2MoeSparseMoeBlock: experts.E.{gate,up,down}_proj, one shared_expert (a
      // Qwen2MoeMLP) and its shared_expert_gate (a Linear(hidden, 1, bias=False) whose sigmoid
      // scales the shared expert's output), dense Qwen2MoeMLP layers where the config places them.
      {"qwen2_moe",
       {"qwen2_moe"},
       concat({separate_attention(P::always, std::nullopt), dense_mlp(), routed_experts("mlp."),
               separate_mlp(kLayer + "mlp.shared_expert.", kProj, K::shared_expert,
                            E::shared_intermediate, std::nullopt),
               {{kLayer + "mlp.shared_expert_gate.weight",
                 {{"w_shared_expert_sigmoid_gate", E::one}},
                 E::hidden,
                 K::shared_expert}}}),
       {}},
      // DeepSeek's MoE without MLA: dense layers, mlp.experts.E.*, mlp.shared_experts.*.
      {"glm4_moe",
       {"glm4_moe", "dots1", "ernie4_5_moe"},
       concat({separate_attention(P::qkv_bias, P::o_bias), dense_mlp(P::mlp_bias),
               routed_experts("mlp."),
               separate_mlp(kLayer + "mlp.shared_experts.", kProj, K::shared_expert,
                            E::shared_intermediate, std::nullopt)}),
       {}},
      // PhiMoE: Mixtral's block_sparse_moe.experts.E.w1/w3/w2, attention biases by the config.
      {"phimoe",
       {"phimoe"},
       concat({separate_attention(P::qkv_bias, P::o_bias),
               routed_experts("block_sparse_moe.", {"w1", "w3", "w2"})}),
       {}},
      // GraniteMoE (granitemoe.py's hf_to_vllm_mapper: block_sparse_moe.input_linear ->
      // experts.gate_up_proj, FusedMoE's w13 [experts, 2 * intermediate, hidden], gate rows
      // first; output_linear -> w2 [experts, hidden, intermediate]); granitemoeshared's
      // shared_mlp.input_linear is fused [gate; up] the same way.
      {"granitemoe",
       {"granitemoe", "granitemoeshared"},
       concat({separate_attention(P::qkv_bias, P::o_bias),
               {{kLayer + "block_sparse_moe.input_linear.weight",
                 {{"w_expert_gate", E::expert_intermediate}, {"w_expert_up", E::expert_intermediate}},
                 E::hidden,
                 K::expert,
                 P::always,
                 RowLayout::stacked,
                 false,
                 ExpertStack::leading},
                {kLayer + "block_sparse_moe.output_linear.weight",
                 {{"w_expert_down", E::hidden}},
                 E::expert_intermediate,
                 K::expert,
                 P::always,
                 RowLayout::stacked,
                 false,
                 ExpertStack::leading},
                {kLayer + "shared_mlp.input_linear.weight",
                 {{"w_shared_expert_gate", E::shared_intermediate},
                  {"w_shared_expert_up", E::shared_intermediate}},
                 E::hidden,
                 K::shared_expert},
                {kLayer + "shared_mlp.output_linear.weight",
                 {{"w_shared_expert_down", E::hidden}},
                 E::shared_intermediate,
                 K::shared_expert}}}),
       {}},
      // Llama4MoE (llama4.py, load_moe_expert_weights): feed_forward.experts.gate_up_proj is
      // [experts, hidden, 2 * intermediate], transposed to [experts, 2 I, hidden] and chunked
      // into gate and up; experts.down_proj [experts, intermediate, hidden], transposed.
      {"llama4",
       {"llama4_text", "llama4"},
       concat(
           {separate_attention(P::qkv_bias, P::o_bias),
            separate_mlp(kLayer + "feed_forward.", kProj, K::dense, E::intermediate, std::nullopt),
            separate_mlp(kLayer + "feed_forward.shared_expert.", kProj, K::shared_expert,
                         E::shared_intermediate, std::nullopt),
            {{kLayer + "feed_forward.experts.gate_up_proj",
              {{"w_expert_gate", E::expert_intermediate}, {"w_expert_up", E::expert_intermediate}},
              E::hidden,
              K::expert,
              P::always,
              RowLayout::stacked,
              true,
              ExpertStack::leading},
             {kLayer + "feed_forward.experts.down_proj",
              {{"w_expert_down", E::hidden}},
              E::expert_intermediate,
              K::expert,
              P::always,
              RowLayout::stacked,
              true,
              ExpertStack::leading}}}),
       {}},
      // DbrxForCausalLM (dbrx.py): Wqkv is QKVParallelLinear's [q; k; v] rows, out_proj; the
      // experts' w1 (gate), v1 (up) and w2 are each [experts * intermediate, hidden]
      // (DbrxExperts.weight_loader reshapes them to [experts, I, hidden]; w2 is transposed).
      {"dbrx",
       {"dbrx"},
       [] {
         const std::string a = "transformer.blocks.{layer}.norm_attn_norm.attn.";
         const std::string x = "transformer.blocks.{layer}.ffn.experts.mlp.";
         std::vector<StoredTensor> t = {
             {a + "Wqkv.weight", {{"w_q", E::q}, {"w_k", E::kv}, {"w_v", E::kv}}, E::hidden},
             {a + "out_proj.weight", {{"w_o", E::hidden}}, E::q}};
         for (const auto& [name, logical] : std::vector<std::pair<std::string, std::string>>{
                  {"w1", "w_expert_gate"}, {"v1", "w_expert_up"}})
           t.push_back({x + name,
                        {{logical, E::expert_intermediate}},
                        E::hidden,
                        K::expert,
                        P::always,
                        RowLayout::stacked,
                        false,
                        ExpertStack::flattened});
         t.push_back({x + "w2",
                      {{"w_expert_down", E::hidden}},
                      E::expert_intermediate,
                      K::expert,
                      P::always,
                      RowLayout::stacked,
                      true,
                      ExpertStack::flattened});
         return t;
       }(),
       {}},
      // HunYuanSparseMoeBlock (vLLM 0.23's hunyuan_v1.py): mlp.experts.E.{gate,up,down}_proj
      // (transformers 5 saves them so, by qwen2_moe's conversion), the shared mlp.shared_mlp.
      {"hunyuan_v1_moe",
       {"hunyuan_v1_moe"},
       concat({separate_attention(P::qkv_bias, P::o_bias), routed_experts("mlp."),
               separate_mlp(kLayer + "mlp.shared_mlp.", kProj, K::shared_expert,
                            E::shared_intermediate, std::nullopt)}),
       {}},
      // MiniCPM3Attention: q_a_proj and kv_a_proj_with_mqa as separate replicated layers (no
      // fused pair: the qkv op is refused, their shapes are still checked); dense MLP.
      {"minicpm3",
       {"minicpm3"},
       concat({{{kLayer + "self_attn.q_a_proj.weight", {{"w_q_a", E::q_lora_rank}}, E::hidden,
                 K::mla, P::q_lora_rank},
                {kLayer + "self_attn.kv_a_proj_with_mqa.weight", {{"w_kv_a", E::kv_a}}, E::hidden,
                 K::mla}},
               dense_mlp()}),
       {}},
      {"qwen3_moe",
       {"qwen3_moe", "olmoe"},
       concat({separate_attention(P::qkv_bias, std::nullopt), dense_mlp(), routed_experts("mlp.")}),
       {}},
      // DeepseekV2MLAAttention: q_a_proj and kv_a_proj_with_mqa (fused_qkv_a_proj's two shards);
      // DeepseekV2MoE: experts.E.*, shared_experts (one MLP of n_shared_experts * the expert
      // size); dense layers below first_k_dense_replace.
      {"deepseek",
       {"deepseek_v2", "deepseek_v3"},
       concat({{{kLayer + "self_attn.q_a_proj.weight",
                 {{"w_q_a", E::q_lora_rank}},
                 E::hidden,
                 K::mla,
                 P::q_lora_rank},
                {kLayer + "self_attn.kv_a_proj_with_mqa.weight",
                 {{"w_kv_a", E::kv_a}},
                 E::hidden,
                 K::mla}},
               dense_mlp(),
               routed_experts("mlp."),
               separate_mlp(kLayer + "mlp.shared_experts.", kProj, K::shared_expert,
                            E::shared_intermediate, std::nullopt)}),
       {{K::attention,
         "DeepSeek attention without MLA (qk_nope_head_dim = qk_rope_head_dim = 0) is not "
         "mapped"}}},
      // OAIAttention: q/k/v and o_proj with bias. The experts are stored as 3-D tensors
      // (mlp.experts.gate_up_proj [experts, hidden, 2 * intermediate], gate and up columns
      // interleaved and transposed against F.linear; MXFP4 blocks and scales in the released
      // checkpoints), which the suite does not read.
      {"gpt_oss",
       {"gpt_oss"},
       separate_attention(P::qkv_bias, P::o_bias),
       {{K::expert,
         "gpt-oss stores its experts as 3-D tensors (mlp.experts.gate_up_proj [experts, hidden, "
         "2 * intermediate], interleaved and transposed; MXFP4 _blocks/_scales in the released "
         "checkpoints), which the checkpoint reader does not map"}}},
  };
  return families;
}

std::string with_text_prefix(const Checkpoint& checkpoint, const std::string& name) {
  const std::string plain = "model.layers.";
  if (checkpoint.has(name) || name.rfind(plain, 0) != 0) return name;
  for (const char* prefix : {"language_model.model.layers.", "model.language_model.layers."}) {
    const std::string alt = prefix + name.substr(plain.size());
    if (checkpoint.has(alt)) return alt;
  }
  return name;
}

const LayerFamily& find_layer_family(std::string_view model_type) {
  std::string known;
  for (const auto& f : layer_families()) {
    for (const auto& t : f.model_types) {
      if (t == model_type) return f;
      known += (known.empty() ? "" : ", ") + t;
    }
  }
  throw CheckpointError("model_type " + quote_name(model_type) +
                        ": no checkpoint mapping for it (known: " + known + ")");
}

HfLayerWeights::HfLayerWeights(std::shared_ptr<const Checkpoint> checkpoint,
                               const LayerFamily& family, const ModelShape& model, int layer,
                               std::int64_t expert, std::optional<CheckpointQuant> quant)
    : checkpoint_(std::move(checkpoint)),
      family_(family.name),
      layer_(layer),
      expert_(expert),
      quant_(std::move(quant)) {
  const std::string where = checkpoint_->lookup_description();
  if (layer < 0 || (model.layers > 0 && layer >= model.layers)) {
    throw CheckpointError(
        where + ": layer " + std::to_string(layer) + " is outside the model (num_hidden_layers=" +
        std::to_string(model.layers) + ": layers 0 to " + std::to_string(model.layers - 1) + ")");
  }
  // The groups of projections the model has, and which of them this decoder layer holds.
  std::vector<LayerKind> groups = {model.attention};
  for (const auto& l : model.mlp_layer_list()) groups.push_back(l.kind);
  const auto here = model.mlp_kinds_at(layer);
  for (LayerKind g : groups) {
    const std::string kind(to_string(g));
    const auto unmapped = std::find_if(family.unmapped.begin(), family.unmapped.end(),
                                       [&](const auto& u) { return u.first == g; });
    if (!is_attention_layer(g) && std::find(here.begin(), here.end(), g) == here.end()) {
      const bool moe_here = std::find(here.begin(), here.end(), K::expert) != here.end();
      not_served_[g] =
          "decoder layer " + std::to_string(layer) + " is " +
          (moe_here ? "an MoE layer" : "a dense layer") +
          (model.moe_placement.rule.empty() ? "" : " (" + model.moe_placement.rule + ")") +
          ": it holds no " + kind + " MLP; pick a layer that does with --layer";
    } else if (unmapped != family.unmapped.end()) {
      not_served_[g] = unmapped->second;
    } else if (std::none_of(family.tensors.begin(), family.tensors.end(),
                            [&](const StoredTensor& t) { return t.group == g; })) {
      not_served_[g] = "the " + family.name + " checkpoint mapping has no " + kind + " tensors";
    } else {
      served_.insert(g);
    }
  }
  if (served_.count(K::expert) && model.experts > 0 && (expert < 0 || expert >= model.experts)) {
    throw CheckpointError(where + ": expert " + std::to_string(expert) + " is outside the model (" +
                          std::to_string(model.experts) + " routed experts: 0 to " +
                          std::to_string(model.experts - 1) + ")");
  }
  for (const StoredTensor& stored : family.tensors) {
    if (!served_.count(stored.group)) continue;
    std::string name = substitute(substitute(stored.name, "{layer}", std::to_string(layer)),
                                  "{expert}", std::to_string(expert));
    const bool wanted = present_by_config(stored.presence, model);
    // Multimodal checkpoints keep the text model under language_model. (LLaVA, Gemma-3 as
    // transformers 4 saved them) or model.language_model. (transformers 5); vLLM maps both.
    name = with_text_prefix(*checkpoint_, name);
    if (!checkpoint_->has(name)) {
      if (!wanted) continue;
      throw CheckpointError(where + ": no tensor " + quote_name(name) + " (layer " +
                            std::to_string(layer) + " of a " + family.name +
                            "-family checkpoint has one" +
                            (stored.presence == P::always
                                 ? ""
                                 : " when the config sets " + config_fields(stored.presence) +
                                       ", as this config.json does") +
                            ")");
    }
    const auto t = checkpoint_->tensor(name);
    const auto fail = [&](const std::string& what) {
      throw CheckpointError(t.file.path() + ": tensor " + quote_name(name) + ": " + what);
    };
    if (!wanted) {
      fail("the checkpoint has it, but config.json rules it out (" +
           config_fields(stored.presence) +
           "): vLLM would build the layer without it and the run would drop it; fix the config");
    }
    // A quantized checkpoint's weights (not its biases) are codes with scales beside them.
    const bool quantized = quant_.has_value() && stored.cols.has_value();
    if (quantized) {
      if (t.info.dtype != quant_->stored)
        fail("stored as " + std::string(to_string(t.info.dtype)) +
             ", but config.json's "
             "quantization_config (" +
             quant_->read_as + ") stores weights as " + std::string(to_string(quant_->stored)) +
             " (a layer its ignore list leaves unquantized is not run quantized)");
      if (stored.transposed || stored.experts != ExpertStack::none ||
          stored.layout != RowLayout::stacked)
        fail(
            "a quantized tensor stored transposed, de-interleaved or stacking experts is not "
            "read (its scales would need the same mapping)");
    } else if (const auto why = unrunnable_reason(t.info.dtype); !why.empty()) {
      fail(why);
    }
    const QuantScaleNames scales =
        quantized ? check_quant_scales(*checkpoint_, *quant_, name) : QuantScaleNames{};
    if (quantized)
      for (const auto& part : stored.parts) quant_parts_[part.first] = scales;
    std::int64_t rows = 0;
    std::string expected;
    for (const auto& [logical, extent] : stored.parts) {
      rows += extent_of(model, extent);
      expected += (expected.empty() ? "" : " + ") + std::string(to_string(extent));
    }
    std::vector<std::int64_t> want = {rows};
    if (stored.cols) {
      want.push_back(extent_of(model, *stored.cols));
      expected = "[" + expected + ", " + std::string(to_string(*stored.cols)) + "]";
    } else {
      expected = "[" + expected + "]";
    }
    if (stored.transposed && want.size() == 2) {
      std::swap(want[0], want[1]);
      expected += " transposed ([in, out])";
    }
    // Every expert's rows (in the tensor's 2-D view: stored rows per expert) and where this
    // expert's begin.
    const std::int64_t per_expert = want[0];
    if (stored.experts == ExpertStack::leading) {
      want.insert(want.begin(), model.experts);
      expected = "[num_experts, " + expected.substr(1);
    } else if (stored.experts == ExpertStack::flattened) {
      want[0] *= model.experts;
      expected = "[num_experts * " + expected.substr(1);
    }
    const std::int64_t expert_row0 = stored.experts == ExpertStack::none ? 0 : expert * per_expert;
    if (t.info.shape != want) {
      fail("shape " + shape_text(t.info.shape) + " does not match the config: expected " +
           expected + " = " + shape_text(want));
    }
    const std::int64_t stored_cols = stored.cols ? extent_of(model, *stored.cols) : 1;
    std::int64_t row0 = 0;
    if (stored.layout == RowLayout::grouped_qkv) {
      // [kv_heads, q_per_kv + 2, head_dim]: q blocks of q_per_kv heads, then one k, one v head.
      const std::int64_t d = model.head_dim, kv_groups = model.kv_heads;
      const std::int64_t q_per_kv = model.heads / kv_groups, period = (q_per_kv + 2) * d;
      const std::int64_t cols = stored.cols ? want[1] : 1;
      parts_[stored.parts.at(0).first] = {name,         0,     q_per_kv * d * kv_groups, cols,
                                          q_per_kv * d, period};
      parts_[stored.parts.at(1).first] = {name, q_per_kv * d, d * kv_groups, cols, d, period};
      parts_[stored.parts.at(2).first] = {name, (q_per_kv + 1) * d, d * kv_groups, cols, d, period};
      continue;
    }
    for (const auto& [logical, extent] : stored.parts) {
      const std::int64_t n = extent_of(model, extent);
      Part part{name, row0, n, stored_cols};
      part.transposed = stored.transposed && stored.cols.has_value();
      if (stored.experts != ExpertStack::none) {
        part.expert = expert;
        (part.transposed ? part.stored_row0 : part.row0) += expert_row0;
      }
      parts_[logical] = part;
      row0 += n;
    }
  }
}

std::string HfLayerWeights::not_served_reason(LayerKind group) const {
  if (serves(group)) return "";
  const auto it = not_served_.find(group);
  if (it != not_served_.end()) return it->second;
  return "the model has no " + std::string(to_string(group)) + " layer";
}

bool HfLayerWeights::has(const std::string& logical) const { return parts_.count(logical) > 0; }

std::vector<float> HfLayerWeights::window(const WindowRequest& r) const {
  const auto it = parts_.find(r.name);
  if (it == parts_.end()) {
    throw CheckpointError(describe() + ": provides no " + quote_name(r.name) +
                          " (the plan needs it; the checkpoint has no tensor for it)");
  }
  const Part& p = it->second;
  // A bias is one column here; a plan may hold it as a row [1, n] as well.
  const bool transposed_bias = p.cols == 1 && r.logical_rows == 1 && r.logical_cols == p.rows;
  if (!transposed_bias && (r.logical_rows != p.rows || r.logical_cols != p.cols)) {
    throw CheckpointError(describe() + ": the plan asks for " + r.name + " as " +
                          std::to_string(r.logical_rows) + "x" + std::to_string(r.logical_cols) +
                          ", but " + quote_name(p.tensor) + " holds it as " +
                          std::to_string(p.rows) + "x" + std::to_string(p.cols));
  }
  if (const auto q = quant_parts_.find(r.name); q != quant_parts_.end()) {
    // The dequantized values, code * scale, of any window (check_checkpoint_values reads row
    // blocks that need not start on a 128-row scale block): the codes read from the enclosing
    // 128x128-aligned window, so that its scale grid is the stored one.
    const bool block = quant_->spec.weights == WeightScales::block;
    const std::int64_t row0 = p.row0 + r.row0;
    const std::int64_t drow = block ? row0 % kQuantBlock : 0,
                       dcol = block ? r.col0 % kQuantBlock : 0;
    const QuantMat m =
        read_quantized_window(*checkpoint_, *quant_, p.tensor, q->second.scale, row0 - drow,
                              r.col0 - dcol, r.rows + drow, r.cols + dcol);
    std::vector<float> out(static_cast<std::size_t>(r.rows * r.cols));
    for (std::int64_t i = 0; i < r.rows; ++i)
      for (std::int64_t j = 0; j < r.cols; ++j)
        out[static_cast<std::size_t>(i * r.cols + j)] =
            static_cast<float>(m.value(i + drow, j + dcol));
    return out;
  }
  const auto t = checkpoint_->tensor(p.tensor);
  // Logical rows [first, first + count) of the part, read run by run where the rows are grouped.
  const auto rows = [&](std::int64_t first, std::int64_t count, std::int64_t col0,
                        std::int64_t cols) {
    if (p.block == 0)
      return read_window(t.file, t.info, p.row0 + first, col0, count, cols, r.dtype);
    std::vector<float> out;
    out.reserve(static_cast<std::size_t>(count * cols));
    for (std::int64_t row = first; row < first + count;) {
      const std::int64_t within = row % p.block;
      const std::int64_t run = std::min(p.block - within, first + count - row);
      const auto part = read_window(t.file, t.info, p.row0 + (row / p.block) * p.period + within,
                                    col0, run, cols, r.dtype);
      out.insert(out.end(), part.begin(), part.end());
      row += run;
    }
    return out;
  };
  if (transposed_bias) return rows(r.col0, r.cols, 0, 1);
  if (p.transposed) {
    // Stored [in, out]: read the window's columns as stored rows, then transpose.
    const auto stored = read_window(t.file, t.info, p.stored_row0 + r.col0, p.row0 + r.row0, r.cols,
                                    r.rows, r.dtype);
    std::vector<float> out(stored.size());
    for (std::int64_t i = 0; i < r.rows; ++i)
      for (std::int64_t j = 0; j < r.cols; ++j) out[i * r.cols + j] = stored[j * r.rows + i];
    return out;
  }
  return rows(r.row0, r.rows, r.col0, r.cols);
}

std::optional<QuantMat> HfLayerWeights::stored_quantized(const WindowRequest& r) const {
  const auto q = quant_parts_.find(r.name);
  if (q == quant_parts_.end()) return std::nullopt;
  const Part& p = parts_.at(r.name);
  if (r.logical_rows != p.rows || r.logical_cols != p.cols)
    throw CheckpointError(describe() + ": the plan asks for " + r.name + " as " +
                          std::to_string(r.logical_rows) + "x" + std::to_string(r.logical_cols) +
                          ", but " + quote_name(p.tensor) + " holds it as " +
                          std::to_string(p.rows) + "x" + std::to_string(p.cols));
  return read_quantized_window(*checkpoint_, *quant_, p.tensor, q->second.scale, p.row0 + r.row0,
                               r.col0, r.rows, r.cols);
}

std::optional<float> HfLayerWeights::stored_input_scale(const std::string& logical) const {
  const auto q = quant_parts_.find(logical);
  if (q == quant_parts_.end() || q->second.input_scale.empty()) return std::nullopt;
  return read_scale_values(*checkpoint_, q->second.input_scale).at(0);
}

std::map<std::string, std::string> HfLayerWeights::scale_sources() const {
  std::map<std::string, std::string> out;
  for (const auto& [logical, names] : quant_parts_) {
    const Part& p = parts_.at(logical);
    const auto w = checkpoint_->tensor(p.tensor);
    const bool whole = p.row0 == 0 && p.rows == w.info.shape.at(0);
    std::string text = names.scale;
    if (!whole && quant_->spec.weights != WeightScales::tensor)
      text += " (the scales of rows [" + std::to_string(p.row0) + ", " +
              std::to_string(p.row0 + p.rows) + "))";
    if (!names.input_scale.empty()) text += "; input_scale " + names.input_scale;
    out[logical] = text;
  }
  return out;
}

std::string HfLayerWeights::describe() const {
  const std::string experts = all_experts_.empty()
                                  ? " expert " + std::to_string(expert_)
                                  : " experts " + std::to_string(all_experts_.front()) + " to " +
                                        std::to_string(all_experts_.back());
  return "checkpoint " + checkpoint_->dir() + " layer " + std::to_string(layer_) +
         (served_.count(K::expert) ? experts : "") + " (" + family_ + " mapping)";
}

std::map<std::string, std::string> HfLayerWeights::sources() const {
  std::map<std::string, std::string> out;
  for (const auto& [logical, p] : parts_) {
    const auto t = checkpoint_->tensor(p.tensor);
    if (p.expert >= 0) {
      // One expert's slice of a tensor stacking them all: its rows in the 2-D view.
      const std::string span =
          p.transposed
              ? "rows [" + std::to_string(p.stored_row0) + ", " +
                    std::to_string(p.stored_row0 + p.cols) + ") columns [" +
                    std::to_string(p.row0) + ", " + std::to_string(p.row0 + p.rows) + ")"
              : "rows [" + std::to_string(p.row0) + ", " + std::to_string(p.row0 + p.rows) + ")";
      out[logical] = p.tensor + " expert " + std::to_string(p.expert) + ": " + span +
                     (t.info.shape.size() == 3 ? " of its [experts * rows, cols] view" : "") +
                     (p.transposed ? ", transposed ([in, out])" : "");
      continue;
    }
    const bool whole = p.row0 == 0 && p.rows == t.info.shape[p.transposed ? 1 : 0];
    if (p.transposed) {
      out[logical] = p.tensor + " columns [" + std::to_string(p.row0) + ", " +
                     std::to_string(p.row0 + p.rows) + "), transposed (Conv1D [in, out])";
      continue;
    }
    if (p.block > 0) {
      out[logical] = p.tensor + " rows [" + std::to_string(p.row0) + ", " +
                     std::to_string(p.row0 + p.block) + ") of every " + std::to_string(p.period) +
                     " (" + std::to_string(p.rows / p.block) + " blocks, de-interleaved)";
      continue;
    }
    out[logical] = p.tensor + (whole ? ""
                                     : " rows [" + std::to_string(p.row0) + ", " +
                                           std::to_string(p.row0 + p.rows) + ")");
  }
  return out;
}

std::set<TensorDtype> HfLayerWeights::stored_dtypes() const {
  std::set<TensorDtype> out;
  for (const auto& [logical, p] : parts_) out.insert(checkpoint_->tensor(p.tensor).info.dtype);
  return out;
}

TensorDtype HfLayerWeights::stored_dtype_of(const std::string& logical) const {
  const auto it = parts_.find(logical);
  if (it == parts_.end())
    throw CheckpointError(describe() + ": provides no " + quote_name(logical));
  return checkpoint_->tensor(it->second.tensor).info.dtype;
}

TensorDtype HfLayerWeights::stored_dtype() const {
  std::map<TensorDtype, std::string> seen;
  for (const auto& [logical, p] : parts_)
    seen.emplace(checkpoint_->tensor(p.tensor).info.dtype, p.tensor);
  if (seen.size() != 1) {
    std::string list;
    for (const auto& [dtype, tensor] : seen)
      list +=
          (list.empty() ? "" : ", ") + quote_name(tensor) + " is " + std::string(to_string(dtype));
    throw CheckpointError(describe() + ": the layer's tensors are stored in " +
                          (seen.empty() ? std::string("no dtype (it serves no tensor)")
                                        : "different dtypes (" + list + ")") +
                          ": pick the run's dtype with --dtypes");
  }
  return seen.begin()->first;
}

void HfLayerWeights::add_expert(const HfLayerWeights& other) {
  if (!other.serves(K::expert)) {
    throw CheckpointError(other.describe() + ": serves no routed expert (" +
                          other.not_served_reason(K::expert) + ")");
  }
  const std::string e = std::to_string(other.expert());
  for (const auto& [logical, part] : other.parts_) {
    for (const char* kind : {"w", "b"}) {
      const std::string prefix = std::string(kind) + "_expert_";  // w_expert_gate -> w_expert3_gate
      if (logical.rfind(prefix, 0) == 0)
        parts_[std::string(kind) + "_expert" + e + "_" + logical.substr(prefix.size())] = part;
    }
  }
  all_experts_.push_back(other.expert());
}

LayerFamily with_stacked_experts(const LayerFamily& family, const Checkpoint& checkpoint,
                                 int layer) {
  LayerFamily out = family;
  const std::string per_expert = "experts.{expert}.";
  // The prefix (".../mlp.") of the per-expert tensors, from the family's gate tensor.
  const auto gate =
      std::find_if(family.tensors.begin(), family.tensors.end(), [&](const StoredTensor& t) {
        return t.group == K::expert && t.experts == ExpertStack::none &&
               t.name.find(per_expert) != std::string::npos && t.parts.size() == 1 &&
               t.parts[0].first == "w_expert_gate";
      });
  if (gate == family.tensors.end()) return out;
  const std::string prefix = gate->name.substr(0, gate->name.find(per_expert));
  const auto named = [&](const std::string& name) {
    return with_text_prefix(checkpoint, substitute(name, "{layer}", std::to_string(layer)));
  };
  const std::string stacked_gate_up = prefix + "experts.gate_up_proj";
  if (checkpoint.has(named(substitute(gate->name, "{expert}", "0"))) ||
      !checkpoint.has(named(stacked_gate_up)))
    return out;
  // transformers 5's <Family>Experts: gate_up_proj [E, 2I, H] (chunked gate, then up, along its
  // output rows), down_proj [E, H, I]; no biases (a family with expert biases keeps its own).
  std::erase_if(out.tensors, [&](const StoredTensor& t) {
    return t.group == K::expert && t.name.find(per_expert) != std::string::npos &&
           t.name.rfind(".weight") == t.name.size() - 7;
  });
  out.tensors.push_back(
      {stacked_gate_up,
       {{"w_expert_gate", E::expert_intermediate}, {"w_expert_up", E::expert_intermediate}},
       E::hidden,
       K::expert,
       P::always,
       RowLayout::stacked,
       false,
       ExpertStack::leading});
  out.tensors.push_back({prefix + "experts.down_proj",
                         {{"w_expert_down", E::hidden}},
                         E::expert_intermediate,
                         K::expert,
                         P::always,
                         RowLayout::stacked,
                         false,
                         ExpertStack::leading});
  return out;
}

}  // namespace fusebench
