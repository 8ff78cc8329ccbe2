// vLLM's checkpoint-to-parameter mapping for a decoder layer's projections, as a table: per
// family, which checkpoint tensor holds which logical tensor (docs/checkpoints.md).
#include <algorithm>
#include <array>
#include <tuple>

#include "fusebench/hf_layer.hpp"
#include "name_pattern.hpp"

namespace fusebench {
namespace {

using E = LayerExtent;
using K = LayerKind;
using P = Presence;

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

}  // namespace

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
