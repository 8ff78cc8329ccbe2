// vLLM's checkpoint-to-parameter mapping for a decoder layer's projections, as a table.
#include "fusebench/hf_layer.hpp"

#include <algorithm>

namespace fusebench {
namespace {

using E = LayerExtent;

std::string layer_name(const std::string& pattern, int layer) {
  std::string out = pattern;
  const std::string key = "{layer}";
  if (const auto at = out.find(key); at != std::string::npos)
    out.replace(at, key.size(), std::to_string(layer));
  return out;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// q/k/v and o projections, stored separately (vLLM's stacked_params_mapping routes them into
// qkv_proj shards "q", "k", "v"; o_proj is a RowParallelLinear).
std::vector<StoredTensor> separate_attention(bool qkv_bias_required, bool bias_optional) {
  const std::string a = "model.layers.{layer}.self_attn.";
  std::vector<StoredTensor> t = {
      {a + "q_proj.weight", {{"w_q", E::q}}, E::hidden},
      {a + "k_proj.weight", {{"w_k", E::kv}}, E::hidden},
      {a + "v_proj.weight", {{"w_v", E::kv}}, E::hidden},
      {a + "o_proj.weight", {{"w_o", E::hidden}}, E::q},
  };
  if (qkv_bias_required || bias_optional) {
    const bool req = qkv_bias_required;
    t.push_back({a + "q_proj.bias", {{"b_q", E::q}}, std::nullopt, req});
    t.push_back({a + "k_proj.bias", {{"b_k", E::kv}}, std::nullopt, req});
    t.push_back({a + "v_proj.bias", {{"b_v", E::kv}}, std::nullopt, req});
  }
  if (bias_optional) t.push_back({a + "o_proj.bias", {{"b_o", E::hidden}}, std::nullopt, false});
  return t;
}

// gate/up (routed into gate_up_proj shards 0, 1) and down (RowParallelLinear).
std::vector<StoredTensor> separate_mlp(bool bias_optional) {
  const std::string m = "model.layers.{layer}.mlp.";
  std::vector<StoredTensor> t = {
      {m + "gate_proj.weight", {{"w_gate", E::intermediate}}, E::hidden},
      {m + "up_proj.weight", {{"w_up", E::intermediate}}, E::hidden},
      {m + "down_proj.weight", {{"w_down", E::hidden}}, E::intermediate},
  };
  if (bias_optional) {  // llama's mlp_bias
    t.push_back({m + "gate_proj.bias", {{"b_gate", E::intermediate}}, std::nullopt, false});
    t.push_back({m + "up_proj.bias", {{"b_up", E::intermediate}}, std::nullopt, false});
    t.push_back({m + "down_proj.bias", {{"b_down", E::hidden}}, std::nullopt, false});
  }
  return t;
}

std::vector<StoredTensor> concat(std::vector<StoredTensor> a, const std::vector<StoredTensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
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
  }
  return 0;
}

const std::vector<LayerFamily>& layer_families() {
  // From vLLM's model files (llama.py, qwen2.py, qwen3.py, phi3.py). Phase 2 adds MoE experts
  // (model.layers.{layer}.mlp.experts.E.{gate,up,down}_proj, shared_experts) and MLA
  // (q_a_proj, kv_a_proj_with_mqa) as entries here, with the logical names of issue 11.
  static const std::vector<LayerFamily> families = {
      // LlamaAttention: bias = attention_bias (default false); LlamaMLP: bias = mlp_bias.
      {"llama",
       {"llama", "mistral", "qwen3", "gemma", "gemma2"},
       concat(separate_attention(false, true), separate_mlp(true))},
      // Qwen2Attention: QKVParallelLinear(bias=True) hard-coded, o_proj bias=False.
      {"qwen2", {"qwen2"}, concat(separate_attention(true, false), separate_mlp(false))},
      // Phi-3 stores q/k/v and gate/up fused; vLLM's loader splits them by output sizes
      // (loaded_shard_id=None): q, k, v = rows [0, q), [q, q+kv), [q+kv, q+2kv).
      {"phi3",
       {"phi3"},
       {{"model.layers.{layer}.self_attn.qkv_proj.weight",
         {{"w_q", E::q}, {"w_k", E::kv}, {"w_v", E::kv}},
         E::hidden},
        {"model.layers.{layer}.self_attn.o_proj.weight", {{"w_o", E::hidden}}, E::q},
        {"model.layers.{layer}.mlp.gate_up_proj.weight",
         {{"w_gate", E::intermediate}, {"w_up", E::intermediate}},
         E::hidden},
        {"model.layers.{layer}.mlp.down_proj.weight", {{"w_down", E::hidden}}, E::intermediate}}},
  };
  return families;
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
                               const LayerFamily& family, const ModelShape& model, int layer)
    : checkpoint_(std::move(checkpoint)), family_(family.name), layer_(layer) {
  if (layer < 0 || (model.layers > 0 && layer >= model.layers)) {
    throw CheckpointError(
        checkpoint_->lookup_description() + ": layer " + std::to_string(layer) +
        " is outside the model (num_hidden_layers=" + std::to_string(model.layers) +
        ": layers 0 to " + std::to_string(model.layers - 1) + ")");
  }
  for (const StoredTensor& stored : family.tensors) {
    const std::string name = layer_name(stored.name, layer);
    if (!checkpoint_->has(name)) {
      if (!stored.required) continue;
      throw CheckpointError(checkpoint_->lookup_description() + ": no tensor " + quote_name(name) +
                            " (layer " + std::to_string(layer) + " of a " + family.name +
                            "-family checkpoint has one)");
    }
    const auto t = checkpoint_->tensor(name);
    const auto fail = [&](const std::string& what) {
      throw CheckpointError(t.file.path() + ": tensor " + quote_name(name) + ": " + what);
    };
    if (const auto why = unrunnable_reason(t.info.dtype); !why.empty()) fail(why);
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
    if (t.info.shape != want) {
      fail("shape " + shape_text(t.info.shape) + " does not match the config: expected " +
           expected + " = " + shape_text(want));
    }
    std::int64_t row0 = 0;
    for (const auto& [logical, extent] : stored.parts) {
      const std::int64_t n = extent_of(model, extent);
      parts_[logical] = {name, row0, n, stored.cols ? want[1] : 1};
      row0 += n;
    }
  }
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
  const auto t = checkpoint_->tensor(p.tensor);
  if (transposed_bias) return read_window(t.file, t.info, p.row0 + r.col0, 0, r.cols, 1, r.dtype);
  return read_window(t.file, t.info, p.row0 + r.row0, r.col0, r.rows, r.cols, r.dtype);
}

std::string HfLayerWeights::describe() const {
  return "checkpoint " + checkpoint_->dir() + " layer " + std::to_string(layer_) + " (" + family_ +
         " mapping)";
}

std::map<std::string, std::string> HfLayerWeights::sources() const {
  std::map<std::string, std::string> out;
  for (const auto& [logical, p] : parts_) {
    const auto t = checkpoint_->tensor(p.tensor);
    const bool whole = p.row0 == 0 && p.rows == t.info.shape[0];
    out[logical] = p.tensor + (whole ? ""
                                     : " rows [" + std::to_string(p.row0) + ", " +
                                           std::to_string(p.row0 + p.rows) + ")");
  }
  return out;
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
    throw CheckpointError(describe() + ": the layer's tensors are stored in different dtypes (" +
                          list + "): pick the run's dtype with --dtypes");
  }
  return seen.begin()->first;
}

}  // namespace fusebench
