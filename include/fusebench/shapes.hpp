#pragma once
// Model shapes (presets and HF config.json, read as vLLM's model classes read them) and their
// tensor-parallel shards (vLLM's rules). docs/models.md has the family table.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fusebench/activation.hpp"

namespace fusebench {

// Which projections a fixture benchmarks (the `layer:` segment of its name).
enum class LayerKind {
  attention,      // q/k/v of GQA/MHA attention (QKVParallelLinear)
  mla,            // DeepSeek MLA: q_a_proj + kv_a_proj_with_mqa (fused_qkv_a_proj), replicated
  dense,          // a dense MLP's gate/up (MergedColumnParallelLinear)
  expert,         // one routed expert's gate/up (one expert of FusedMoE's w13)
  shared_expert,  // the shared expert(s) of an MoE layer, run as one dense MLP
};
std::string_view to_string(LayerKind kind);
bool is_attention_layer(LayerKind kind);

// One kind of MLP the model's decoder layers have.
struct MlpLayer {
  LayerKind kind = LayerKind::dense;
  std::int64_t intermediate = 0;  // unsharded (of one expert for `expert`)
  std::string source;             // the config field(s) it comes from, e.g. moe_intermediate_size
  std::int64_t layers = -1;       // decoder layers that have it (-1: unknown)
};

struct ModelShape {
  std::string name;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;     // query heads
  std::int64_t kv_heads = 0;  // key/value heads (GQA)
  std::int64_t head_dim = 0;
  std::int64_t intermediate = 0;  // the dense MLP's intermediate_size (0: none)
  std::int64_t layers = 0;        // informational

  std::string family = "llama";  // HF model_type as read; presets name theirs
  std::string vllm_class;        // the vLLM model class whose rules were applied
  // Attention projections.
  LayerKind attention = LayerKind::attention;  // attention | mla
  bool qkv_bias = false;                       // q/k/v (or MLA's q_a/kv_a) bias
  bool o_bias = false;                         // o_proj bias (row-parallel: added on rank 0)
  std::int64_t q_lora_rank = 0;                // MLA; 0 when the config says null
  std::int64_t kv_lora_rank = 0, qk_rope_head_dim = 0;  // MLA
  // MLP projections. Empty mlp_layers: one dense layer of `intermediate` (code that builds a
  // ModelShape by hand gets the Llama MLP).
  std::vector<MlpLayer> mlp_layers;
  bool gated = true;  // false: no gate/up pair anywhere (gpt_neox, gpt2, phi)
  Activation activation = Activation::silu;
  double activation_limit = 0;                      // swigluoai clamp (swiglu_limit)
  bool mlp_bias = false;                            // gate/up and down biases
  bool interleaved_gate_up = false;                 // gpt-oss: w13 rows are gate, up, gate, up, ...
  std::int64_t experts = 0, experts_per_token = 0;  // routed experts (informational)
  // Which decoder layers are MoE (vLLM's rule; the defaults: every layer): layer i is when
  // (i + 1) % sparse_step == 0 and i is not in dense_only (qwen2_moe/qwen3_moe:
  // decoder_sparse_step, mlp_only_layers; llama4: interleave_moe_layer_step; ernie4_5_moe:
  // moe_layer_interval), and first_moe <= i <= last_moe and i % moe_freq == 0 (deepseek, glm4_moe,
  // dots1: first_k_dense_replace, moe_layer_freq; ernie4_5_moe: moe_layer_start/end_index).
  struct MoePlacement {
    std::int64_t sparse_step = 1;
    std::vector<std::int64_t> dense_only;
    std::int64_t first_moe = 0, moe_freq = 1;
    std::int64_t last_moe = std::int64_t{1} << 40;
    std::string rule;  // the config fields it comes from ("" for every layer), for messages
    bool is_moe(std::int64_t layer) const;
  };
  MoePlacement moe_placement;
  // Why an op cannot be benchmarked on this model, by op name ("" or absent: it can).
  std::vector<std::pair<std::string, std::string>> refused;

  std::int64_t q_size() const { return heads * head_dim; }
  std::int64_t kv_size() const { return kv_heads * head_dim; }
  // mlp_layers, or the one dense layer of `intermediate` when empty and gated.
  std::vector<MlpLayer> mlp_layer_list() const;
  // "" when `op` runs on this model, else why not.
  std::string refusal(std::string_view op) const;
  // The MLP layers decoder layer `layer` has (a checkpoint's layer holds their tensors): every
  // one of mlp_layer_list() for a model without experts; else expert and shared_expert where
  // moe_placement puts an MoE layer, dense elsewhere.
  std::vector<LayerKind> mlp_kinds_at(std::int64_t layer) const;
};

const std::vector<ModelShape>& model_presets();
// Throws std::invalid_argument naming the model and listing the presets.
ModelShape find_model(std::string_view name);
// The config.json excerpt a preset is read from (the MoE routing rule reads it too); throws as
// find_model for an unknown name.
std::string preset_config(std::string_view name);
// Reads a HF config.json as vLLM's model class for its model_type does (docs/models.md): sizes,
// biases, the MoE layers, MLA, the gated activation; refuses (std::invalid_argument naming the
// file and the field) what it cannot map: an unknown model_type, a missing field that cannot be
// derived, a malformed value.
ModelShape parse_hf_config(std::string_view json_text, const std::string& name);
// parse_hf_config of the file, named by model_name_for_config (below).
ModelShape load_hf_config(const std::string& path);
// The model name of a --model-config file: the file's stem unless it is "config"; else the last
// component of `_name_or_path`; else the parent folder; else architectures[0]; else model_type.
std::string model_name_for_config(const std::string& path, std::string_view json_text);

struct MoeBlock;  // routing.hpp

// One rank's slice of one layer's projections under tensor parallelism: the attention
// projections always, and one MLP layer (`mlp`).
struct ShardShape {
  int tp = 1;
  std::int64_t hidden = 0;
  std::int64_t head_dim = 0;
  std::int64_t q_heads = 0;       // per rank
  std::int64_t kv_heads = 0;      // per rank (1 when replicated)
  std::int64_t kv_replicas = 1;   // vLLM num_kv_head_replicas
  std::int64_t intermediate = 0;  // per rank, of the MLP layer `mlp`
  int rank = 0;  // which rank's slices of the unsharded weights (the TP pipelines use it)

  LayerKind attention = LayerKind::attention;  // attention | mla
  LayerKind mlp = LayerKind::dense;            // dense | expert | shared_expert
  bool qkv_bias = false, o_bias = false, mlp_bias = false;
  Activation activation = Activation::silu;
  double activation_limit = 0;
  bool interleaved_gate_up = false;
  std::int64_t q_lora_rank = 0, kv_a_size = 0;  // MLA, replicated: the same at every tp
  // The moe op's routed-expert block (the routing rule and source, the shared expert); null for
  // every other op.
  std::shared_ptr<const MoeBlock> moe;

  std::int64_t q_size() const { return q_heads * head_dim; }
  std::int64_t kv_size() const { return kv_heads * head_dim; }
  std::int64_t qkv_size() const { return q_size() + 2 * kv_size(); }
};

// The shard of the attention projections and of the MLP layer `layer` (an attention kind: the
// attention projections alone, intermediate 0). Throws std::invalid_argument when tp does not
// divide the heads (or kv heads, or that layer's intermediate), naming the value and the tp
// sizes that would be valid, or when the model has no such layer.
ShardShape shard(const ModelShape& model, int tp, LayerKind layer);
// The first MLP layer's shard (the attention projections alone for a model without one).
ShardShape shard(const ModelShape& model, int tp);
// tp sizes valid for the attention projections and every MLP layer (or only `layer`).
std::vector<int> valid_tp_sizes(const ModelShape& model, int max_tp = 64);
std::vector<int> valid_tp_sizes(const ModelShape& model, LayerKind layer, int max_tp = 64);

}  // namespace fusebench
