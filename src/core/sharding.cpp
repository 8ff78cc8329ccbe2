// Tensor-parallel shards of a model's layers, by vLLM's rules.
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusebench/shapes.hpp"

namespace fusebench {
namespace {

std::string join_ints(const std::vector<int>& values) {
  std::string out;
  for (int v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

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
