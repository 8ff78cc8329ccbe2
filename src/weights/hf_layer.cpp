// One decoder layer of a checkpoint served as logical tensors, checked against the model's config.
#include "fusebench/hf_layer.hpp"

#include <algorithm>

#include "name_pattern.hpp"

namespace fusebench {
namespace {

using E = LayerExtent;
using K = LayerKind;
using P = Presence;

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
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

// Why decoder layer `layer` serves no `group` projections ("" when it does): the layer holds no
// such MLP (`here`: the MLP kinds it holds), the table leaves the group unmapped, or has no
// tensor of it.
std::string unserved_reason(const LayerFamily& family, const ModelShape& model, int layer,
                            LayerKind group, const std::vector<LayerKind>& here) {
  const std::string kind(to_string(group));
  const auto unmapped = std::find_if(family.unmapped.begin(), family.unmapped.end(),
                                     [&](const auto& u) { return u.first == group; });
  if (!is_attention_layer(group) && std::find(here.begin(), here.end(), group) == here.end()) {
    const bool moe_here = std::find(here.begin(), here.end(), K::expert) != here.end();
    return "decoder layer " + std::to_string(layer) + " is " +
           (moe_here ? "an MoE layer" : "a dense layer") +
           (model.moe_placement.rule.empty() ? "" : " (" + model.moe_placement.rule + ")") +
           ": it holds no " + kind + " MLP; pick a layer that does with --layer";
  }
  if (unmapped != family.unmapped.end()) return unmapped->second;
  if (std::none_of(family.tensors.begin(), family.tensors.end(),
                   [&](const StoredTensor& t) { return t.group == group; })) {
    return "the " + family.name + " checkpoint mapping has no " + kind + " tensors";
  }
  return "";
}

[[noreturn]] void refuse_tensor(const Checkpoint::Tensor& t, const std::string& name,
                                const std::string& what) {
  throw CheckpointError(t.file.path() + ": tensor " + quote_name(name) + ": " + what);
}

// A stored tensor's dtype as the run reads it: a quantized checkpoint's weight holds codes of
// the quantization_config's dtype, anything else a dtype the run converts.
void check_stored_dtype(const Checkpoint::Tensor& t, const std::string& name,
                        const StoredTensor& stored, const std::optional<CheckpointQuant>& quant,
                        bool quantized) {
  if (!quantized) {
    if (const auto why = unrunnable_reason(t.info.dtype); !why.empty()) refuse_tensor(t, name, why);
    return;
  }
  if (t.info.dtype != quant->stored)
    refuse_tensor(t, name,
                  "stored as " + std::string(to_string(t.info.dtype)) +
                      ", but config.json's "
                      "quantization_config (" +
                      quant->read_as + ") stores weights as " +
                      std::string(to_string(quant->stored)) +
                      " (a layer its ignore list leaves unquantized is not run quantized)");
  if (stored.transposed || stored.experts != ExpertStack::none ||
      stored.layout != RowLayout::stacked)
    refuse_tensor(t, name,
                  "a quantized tensor stored transposed, de-interleaved or stacking experts is not "
                  "read (its scales would need the same mapping)");
}

// The shape the config gives a stored tensor, as stored (transposed, every expert stacked), with
// how it was formed (for the message), and the rows of one expert in its 2-D view.
struct ExpectedShape {
  std::vector<std::int64_t> dims;
  std::string formed;
  std::int64_t rows_per_expert = 0;
};

ExpectedShape expected_shape(const StoredTensor& stored, const ModelShape& model) {
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
  return {want, expected, per_expert};
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
    std::string why = unserved_reason(family, model, layer, g, here);
    if (why.empty()) {
      served_.insert(g);
    } else {
      not_served_[g] = std::move(why);
    }
  }
  if (served_.count(K::expert) && model.experts > 0 && (expert < 0 || expert >= model.experts)) {
    throw CheckpointError(where + ": expert " + std::to_string(expert) + " is outside the model (" +
                          std::to_string(model.experts) + " routed experts: 0 to " +
                          std::to_string(model.experts - 1) + ")");
  }
  for (const StoredTensor& stored : family.tensors) {
    if (served_.count(stored.group)) map_tensor(stored, family.name, model, where);
  }
}

void HfLayerWeights::map_tensor(const StoredTensor& stored, const std::string& family,
                                const ModelShape& model, const std::string& where) {
  std::string name = substitute(substitute(stored.name, "{layer}", std::to_string(layer_)),
                                "{expert}", std::to_string(expert_));
  const bool wanted = present_by_config(stored.presence, model);
  // Multimodal checkpoints keep the text model under language_model. (LLaVA, Gemma-3 as
  // transformers 4 saved them) or model.language_model. (transformers 5); vLLM maps both.
  name = with_text_prefix(*checkpoint_, name);
  if (!checkpoint_->has(name)) {
    if (!wanted) return;
    throw CheckpointError(
        where + ": no tensor " + quote_name(name) + " (layer " + std::to_string(layer_) + " of a " +
        family + "-family checkpoint has one" +
        (stored.presence == P::always ? ""
                                      : " when the config sets " + config_fields(stored.presence) +
                                            ", as this config.json does") +
        ")");
  }
  const auto t = checkpoint_->tensor(name);
  if (!wanted) {
    refuse_tensor(
        t, name,
        "the checkpoint has it, but config.json rules it out (" + config_fields(stored.presence) +
            "): vLLM would build the layer without it and the run would drop it; fix the config");
  }
  // A quantized checkpoint's weights (not its biases) are codes with scales beside them.
  const bool quantized = quant_.has_value() && stored.cols.has_value();
  check_stored_dtype(t, name, stored, quant_, quantized);
  if (quantized) {
    const QuantScaleNames scales = check_quant_scales(*checkpoint_, *quant_, name);
    for (const auto& part : stored.parts) quant_parts_[part.first] = scales;
  }
  const ExpectedShape want = expected_shape(stored, model);
  if (t.info.shape != want.dims) {
    refuse_tensor(t, name,
                  "shape " + shape_text(t.info.shape) + " does not match the config: expected " +
                      want.formed + " = " + shape_text(want.dims));
  }
  add_parts(stored, name, model, want.dims, want.rows_per_expert);
}

void HfLayerWeights::add_parts(const StoredTensor& stored, const std::string& name,
                               const ModelShape& model, const std::vector<std::int64_t>& dims,
                               std::int64_t rows_per_expert) {
  if (stored.layout == RowLayout::grouped_qkv) {
    // [kv_heads, q_per_kv + 2, head_dim]: q blocks of q_per_kv heads, then one k, one v head.
    const std::int64_t d = model.head_dim, kv_groups = model.kv_heads;
    const std::int64_t q_per_kv = model.heads / kv_groups, period = (q_per_kv + 2) * d;
    const std::int64_t cols = stored.cols ? dims[1] : 1;
    parts_[stored.parts.at(0).first] = {name,         0,     q_per_kv * d * kv_groups, cols,
                                        q_per_kv * d, period};
    parts_[stored.parts.at(1).first] = {name, q_per_kv * d, d * kv_groups, cols, d, period};
    parts_[stored.parts.at(2).first] = {name, (q_per_kv + 1) * d, d * kv_groups, cols, d, period};
    return;
  }
  const std::int64_t stored_cols = stored.cols ? extent_of(model, *stored.cols) : 1;
  const std::int64_t expert_row0 =
      stored.experts == ExpertStack::none ? 0 : expert_ * rows_per_expert;
  std::int64_t row0 = 0;
  for (const auto& [logical, extent] : stored.parts) {
    const std::int64_t n = extent_of(model, extent);
    Part part{name, row0, n, stored_cols};
    part.transposed = stored.transposed && stored.cols.has_value();
    if (stored.experts != ExpertStack::none) {
      part.expert = expert_;
      (part.transposed ? part.stored_row0 : part.row0) += expert_row0;
    }
    parts_[logical] = part;
    row0 += n;
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

}  // namespace fusebench
