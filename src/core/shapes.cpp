#include "fusebench/shapes.hpp"

#include <algorithm>

namespace fusebench {

std::string_view to_string(Activation a) {
  switch (a) {
    case Activation::silu:
      return "silu";
    case Activation::gelu_tanh:
      return "gelu_tanh";
    case Activation::gelu:
      return "gelu";
    case Activation::swigluoai:
      return "swigluoai";
  }
  return "?";
}

std::string_view to_string(LayerKind kind) {
  switch (kind) {
    case LayerKind::attention:
      return "attention";
    case LayerKind::mla:
      return "mla";
    case LayerKind::dense:
      return "dense";
    case LayerKind::expert:
      return "expert";
    case LayerKind::shared_expert:
      return "shared_expert";
  }
  return "?";
}

bool is_attention_layer(LayerKind kind) {
  return kind == LayerKind::attention || kind == LayerKind::mla;
}

std::vector<MlpLayer> ModelShape::mlp_layer_list() const {
  if (!mlp_layers.empty() || !gated || intermediate <= 0) return mlp_layers;
  return {MlpLayer{LayerKind::dense, intermediate, "intermediate_size", layers > 0 ? layers : -1}};
}

bool ModelShape::MoePlacement::is_moe(std::int64_t layer) const {
  return (layer + 1) % sparse_step == 0 &&
         std::find(dense_only.begin(), dense_only.end(), layer) == dense_only.end() &&
         layer >= first_moe && layer <= last_moe && layer % moe_freq == 0;
}

std::vector<LayerKind> ModelShape::mlp_kinds_at(std::int64_t layer) const {
  const auto list = mlp_layer_list();
  const bool moe_model = std::any_of(list.begin(), list.end(),
                                     [](const MlpLayer& l) { return l.kind == LayerKind::expert; });
  const bool moe = moe_placement.is_moe(layer);
  std::vector<LayerKind> out;
  for (const auto& l : list) {
    const bool sparse = l.kind == LayerKind::expert || l.kind == LayerKind::shared_expert;
    if (!moe_model || sparse == moe) out.push_back(l.kind);
  }
  return out;
}

std::string ModelShape::refusal(std::string_view op) const {
  for (const auto& [refused_op, why] : refused) {
    if (refused_op == op) return why;
  }
  return {};
}

}  // namespace fusebench
