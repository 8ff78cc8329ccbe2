#pragma once
// One decoder layer of a Hugging Face checkpoint as fusebench's logical tensors: the whole,
// unsharded weights w_q, w_k, w_v, w_o, w_gate, w_up, w_down and biases b_q, b_k, b_v, ...
// The mapping is vLLM's: per model family, which checkpoint tensor holds which logical tensor;
// a tensor stored fused (Phi-3's qkv_proj, gate_up_proj) is split by output sizes, as vLLM's
// weight_loader does with loaded_shard_id=None. Adding a family or a tensor (MoE experts, MLA)
// is a table entry in hf_layer.cpp (docs/checkpoints.md).
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fusebench/checkpoint.hpp"
#include "fusebench/shapes.hpp"
#include "fusebench/workspace.hpp"

namespace fusebench {

// A size of the layer, from the model's config (named as config.json and shapes.hpp name it).
enum class LayerExtent { hidden, q, kv, intermediate };
std::string_view to_string(LayerExtent extent);  // "hidden_size", "q_size", ...
std::int64_t extent_of(const ModelShape& model, LayerExtent extent);

// One tensor as the checkpoint stores it: the logical tensors it holds, stacked along rows in
// order (one unless stored fused), and its columns (none: a 1-D bias).
struct StoredTensor {
  std::string name;  // "{layer}" stands for the layer index
  std::vector<std::pair<std::string, LayerExtent>> parts;
  std::optional<LayerExtent> cols;
  bool required = true;  // false: only some checkpoints of the family have it (attention_bias)
};

struct LayerFamily {
  std::string name;
  std::vector<std::string> model_types;  // config.json "model_type" values
  std::vector<StoredTensor> tensors;
};

const std::vector<LayerFamily>& layer_families();
// Throws CheckpointError naming the model_type and listing the ones the table knows.
const LayerFamily& find_layer_family(std::string_view model_type);

// Layer `layer`'s projection tensors of a checkpoint, validated against the model's shape
// (every required tensor present, every shape [parts..., cols] as the config says, every dtype
// runnable), served as logical tensors to a Workspace and to logical_inputs().
class HfLayerWeights : public TensorSource {
 public:
  HfLayerWeights(std::shared_ptr<const Checkpoint> checkpoint, const LayerFamily& family,
                 const ModelShape& model, int layer);

  bool has(const std::string& logical) const override;
  // Exact for a checkpoint's own dtype and for fp32 runs; rounds (encode's nearest even) where a
  // narrower dtype is asked for, and refuses values beyond its range.
  std::vector<float> window(const WindowRequest& request) const override;
  std::string describe() const override;

  // Where each logical tensor comes from: "model.layers.3.self_attn.qkv_proj.weight rows
  // [0, 3072)" (for the report and messages).
  std::map<std::string, std::string> sources() const;
  // The dtype the layer's tensors are stored in (what a run uses by default); throws
  // CheckpointError when they differ.
  TensorDtype stored_dtype() const;
  int layer() const { return layer_; }
  const Checkpoint& checkpoint() const { return *checkpoint_; }

 private:
  struct Part {
    std::string tensor;  // checkpoint name
    std::int64_t row0 = 0, rows = 0, cols = 0;
  };
  std::shared_ptr<const Checkpoint> checkpoint_;
  std::string family_;
  int layer_ = 0;
  std::map<std::string, Part> parts_;  // logical name -> where it is stored
};

}  // namespace fusebench
