#pragma once
// One decoder layer of a Hugging Face checkpoint as fusebench's logical tensors: the whole,
// unsharded weights w_q, w_k, w_v, w_o, w_gate, w_up, w_down, one routed expert's
// w_expert_{gate,up,down}, the shared expert's w_shared_expert_{gate,up,down}, MLA's w_q_a and
// w_kv_a, and biases b_q, b_k, b_v, ... (docs/models.md, "Logical tensors").
// The mapping is vLLM's: per model family, which checkpoint tensor holds which logical tensor;
// a tensor stored fused (Phi-3's qkv_proj, gate_up_proj) is split by output sizes, as vLLM's
// weight_loader does with loaded_shard_id=None. Adding a family or a tensor is a table entry in
// hf_layer_families.cpp (docs/checkpoints.md).
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fusebench/checkpoint.hpp"
#include "fusebench/quant_checkpoint.hpp"
#include "fusebench/shapes.hpp"
#include "fusebench/workspace.hpp"

namespace fusebench {

// A size of the layer, from the model's config (named as config.json and shapes.hpp name it).
enum class LayerExtent {
  hidden,
  q,                    // num_attention_heads * head_dim
  kv,                   // num_key_value_heads * head_dim
  intermediate,         // the dense MLP's intermediate_size
  expert_intermediate,  // one routed expert's (moe_intermediate_size; Mixtral: intermediate_size)
  shared_intermediate,  // the shared expert(s)'
  q_lora_rank,          // MLA
  kv_a,                 // MLA: kv_lora_rank + qk_rope_head_dim
  one,                  // a single row (qwen2_moe's shared_expert_gate, a Linear(hidden, 1))
};
std::string_view to_string(LayerExtent extent);  // "hidden_size", "q_size", ...
std::int64_t extent_of(const ModelShape& model, LayerExtent extent);

// When a stored tensor is in the checkpoint: always (within its group), or exactly when the
// model's config says so (a bias flag; MLA's q_a_proj when q_lora_rank is set). A tensor the
// config says is absent but the checkpoint has is refused: the run would silently drop it.
enum class Presence { always, qkv_bias, o_bias, mlp_bias, q_lora_rank };

// One tensor as the checkpoint stores it: the logical tensors it holds, stacked along rows in
// order (one unless stored fused), and its columns (none: a 1-D bias).
// How a fused q/k/v tensor's rows are laid out: stacked [q; k; v] (Phi-3's qkv_proj, GPTBigCode's
// c_attn), or grouped per kv head [kv_heads, heads / kv_heads + 2, head_dim] (each group's query
// heads, then its k head, then its v head), as vLLM's Falcon and GPT-NeoX loaders de-interleave:
// GPT-NeoX and Persimmon's [heads, 3, head_dim] (kv_heads = heads), Falcon's query_key_value with
// its kv head count (new_decoder_architecture: num_kv_heads; multi_query: one, which is stacked).
enum class RowLayout { stacked, grouped_qkv };

// How a tensor holding every routed expert of a layer stacks them: along a leading dimension
// ([experts, rows, cols]: GraniteMoE's input_linear, Llama-4's experts.gate_up_proj, as
// transformers 5 writes them), or flattened into the rows ([experts * rows, cols]: DBRX's
// ffn.experts.mlp.w1/v1/w2). `none`: one expert per tensor ("{expert}" in its name), or none.
enum class ExpertStack { none, leading, flattened };

struct StoredTensor {
  std::string name;  // "{layer}": the decoder layer; "{expert}": the routed expert
  std::vector<std::pair<std::string, LayerExtent>> parts;
  std::optional<LayerExtent> cols;
  // The projections it belongs to: looked for only in a decoder layer that has them (an MoE
  // model's dense layers hold no experts).
  LayerKind group = LayerKind::attention;
  Presence presence = Presence::always;
  RowLayout layout = RowLayout::stacked;
  // Stored [in, out] (GPT-2's Conv1D; each expert of Llama-4's and DBRX's w2) instead of
  // F.linear's [out, in]; vLLM's loader transposes.
  bool transposed = false;
  ExpertStack experts = ExpertStack::none;
};

struct LayerFamily {
  std::string name;
  std::vector<std::string> model_types;  // config.json "model_type" values
  std::vector<StoredTensor> tensors;
  // Groups of projections the table does not map, and why (e.g. gpt-oss's 3-D expert tensors).
  std::vector<std::pair<LayerKind, std::string>> unmapped;
};

const std::vector<LayerFamily>& layer_families();
// Throws CheckpointError naming the model_type and listing the ones the table knows.
const LayerFamily& find_layer_family(std::string_view model_type);

// `name` as the checkpoint stores it: model.layers.* as is, or under a multimodal model's
// language-model prefix (language_model.model.layers., model.language_model.layers.) when only
// that is there.
std::string with_text_prefix(const Checkpoint& checkpoint, const std::string& name);

// The family with its per-expert routed-expert tensors (".experts.{expert}.gate_proj" etc.)
// replaced by the 3-D stacks transformers 5's expert modules hold (Qwen3MoeExperts and its
// kin): <prefix>experts.gate_up_proj [experts, 2 * intermediate, hidden] (gate rows, then up) and
// <prefix>experts.down_proj [experts, hidden, intermediate], where layer `layer` of the
// checkpoint stores them so and not per expert. Otherwise the family unchanged.
LayerFamily with_stacked_experts(const LayerFamily& family, const Checkpoint& checkpoint,
                                 int layer);

// Layer `layer`'s projection tensors of a checkpoint, validated against the model's shape
// (every tensor the config implies present, none it rules out, every shape [parts..., cols] as
// the config says, every dtype runnable), served as logical tensors to a Workspace and to
// logical_inputs(). Routed experts: expert `expert`'s tensors.
class HfLayerWeights : public TensorSource {
 public:
  HfLayerWeights(std::shared_ptr<const Checkpoint> checkpoint, const LayerFamily& family,
                 const ModelShape& model, int layer, std::int64_t expert = 0,
                 std::optional<CheckpointQuant> quant = std::nullopt);

  bool has(const std::string& logical) const override;
  // Exact for a checkpoint's own dtype and for fp32 runs; rounds (encode's nearest even) where a
  // narrower dtype is asked for, and refuses values beyond its range.
  std::vector<float> window(const WindowRequest& request) const override;
  std::string describe() const override;
  // A quantized checkpoint (quant()): a weight window's stored codes and scales, and a weight's
  // static input scale (window() gives the dequantized values: code * scale).
  std::optional<QuantMat> stored_quantized(const WindowRequest& request) const override;
  std::optional<float> stored_input_scale(const std::string& logical) const override;
  // config.json's quantization_config as read (nullopt: an unquantized checkpoint).
  const std::optional<CheckpointQuant>& quant() const { return quant_; }
  // Each quantized logical weight's scale tensors: "w_q" -> "...q_proj.weight_scale_inv" (and
  // "; input_scale ...q_proj.input_scale" when static), for the report.
  std::map<std::string, std::string> scale_sources() const;

  // Whether the layer's tensors serve the projections of `group` (its attention kind and the MLP
  // layers this decoder layer has, where the table maps them); why not, "" when they do.
  bool serves(LayerKind group) const { return served_.count(group) > 0; }
  std::string not_served_reason(LayerKind group) const;

  // Where each logical tensor comes from: "model.layers.3.self_attn.qkv_proj.weight rows
  // [0, 3072)" (for the report and messages).
  std::map<std::string, std::string> sources() const;
  // The dtype the layer's tensors are stored in (what a run uses by default); throws
  // CheckpointError when they differ.
  TensorDtype stored_dtype() const;
  // Every dtype the layer's tensors are stored in; the one a logical tensor is stored in (throws
  // CheckpointError when the layer does not provide it).
  std::set<TensorDtype> stored_dtypes() const;
  TensorDtype stored_dtype_of(const std::string& logical) const;
  int layer() const { return layer_; }
  std::int64_t expert() const { return expert_; }

  // Serves `other`'s routed-expert tensors (w_expert_gate, w_expert_up, w_expert_down and their
  // biases) as expert other.expert()'s: w_expert{e}_gate, ... (the moe op's w13/w2 parts).
  // `other` is the same layer of the same checkpoint. Throws CheckpointError when it serves no
  // routed expert.
  void add_expert(const HfLayerWeights& other);
  // The routed experts add_expert() added, in order.
  const std::vector<std::int64_t>& all_experts() const { return all_experts_; }
  const std::string& family() const { return family_; }
  const Checkpoint& checkpoint() const { return *checkpoint_; }

 private:
  struct Part {
    std::string tensor;  // checkpoint name
    std::int64_t row0 = 0, rows = 0, cols = 0;
    // Grouped rows (RowLayout::grouped_qkv): the part's rows come in blocks of `block` rows,
    // block b stored at row0 + b * period; 0: contiguous from row0.
    std::int64_t block = 0, period = 0;
    bool transposed = false;  // stored [cols, rows] (Conv1D)
    // The first stored row (in the tensor's 2-D view) of a transposed part: its expert's.
    std::int64_t stored_row0 = 0;
    std::int64_t expert = -1;  // the expert of a tensor stacking every expert; -1: none
  };
  // The constructor's steps for one stored tensor of a served group: found (or absent as the
  // config says), of a readable dtype and of the config's shape; then where each of its logical
  // tensors lies in it.
  void map_tensor(const StoredTensor& stored, const std::string& family, const ModelShape& model,
                  const std::string& where);
  void add_parts(const StoredTensor& stored, const std::string& name, const ModelShape& model,
                 const std::vector<std::int64_t>& dims, std::int64_t rows_per_expert);

  std::shared_ptr<const Checkpoint> checkpoint_;
  std::string family_;
  int layer_ = 0;
  std::int64_t expert_ = 0;
  std::map<std::string, Part> parts_;  // logical name -> where it is stored
  std::set<LayerKind> served_;
  std::map<LayerKind, std::string> not_served_;  // the model's groups this layer does not serve
  std::vector<std::int64_t> all_experts_;
  // Quantized checkpoints: the config, and each quantized logical weight's scale tensors.
  std::optional<CheckpointQuant> quant_;
  std::map<std::string, QuantScaleNames> quant_parts_;
};

}  // namespace fusebench
