#pragma once
// The registry of ops (qkv, gate_up, ...) and their variants (split, fused, ...).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusebench/plan.hpp"

namespace fusebench {

// Host values of the logical tensors a plan reads, rounded to the plan's dtype.
using LogicalTensors = std::map<std::string, std::vector<float>>;
// Reference outputs in float64, keyed like Plan::outputs.
using ReferenceOutputs = std::map<std::string, std::vector<double>>;

struct OpInfo {
  std::string name;
  std::string description;
  std::vector<std::string> variants;  // the first one is the baseline ("split")
  std::function<Plan(const ShardShape&, std::int64_t tokens, DType, const std::string& variant)>
      build;
  // Unsharded semantics of the op computed in float64 from the logical tensors.
  std::function<ReferenceOutputs(const Plan& plan, const LogicalTensors& inputs)> reference;
  // Whether `variant` exists for this shard (fused_bias_kernel only where there is a bias);
  // null: every variant does.
  std::function<bool(const ShardShape&, const std::string& variant)> has_variant = nullptr;
  // Quantized variants (fp8, int8: docs/quant.md) for a spec, the baseline first; both null where
  // the op has none yet. The plan's dtype is that of the activations and outputs.
  std::function<std::vector<std::string>(const QuantSpec&)> quant_variants = nullptr;
  std::function<Plan(const ShardShape&, std::int64_t tokens, DType, const QuantSpec&,
                     const std::string& variant)>
      build_quant = nullptr;
  // The quantized variant whose shards keep their own weight scales: the reference of the other
  // variants' quant_error_vs_split (moe: per_expert_split).
  std::string quant_split = "split";
};

const std::vector<OpInfo>& op_registry();
// The variants of `op` that exist for `shard`, baseline first.
std::vector<std::string> variants_for(const OpInfo& op, const ShardShape& shard);

// qkv-like ops run on the attention projections (layer attention | mla), MLP-like ops on one MLP
// layer (dense | expert | shared_expert); the collectives on neither.
bool is_attention_op(std::string_view op);
bool is_mlp_op(std::string_view op);
// The layers `op` benchmarks on `model`, in order; empty when the model refuses the op
// (model.refusal(op) says why) or for the collectives.
std::vector<LayerKind> op_layers(std::string_view op, const ModelShape& model);
// The `layer:` value of a fixture of `op` on `shard` ("" for the collectives).
std::string layer_name(std::string_view op, const ShardShape& shard);
// Whether the fixture's GEMMs carry a bias, and its gated activation ("none" for attention ops
// and the collectives): the entry fields `bias` and `activation`.
bool op_has_bias(std::string_view op, const ShardShape& shard);
std::string activation_name(std::string_view op, const ShardShape& shard);
// Throws std::invalid_argument naming the op and listing the valid ones.
const OpInfo& find_op(std::string_view name);
Plan build_plan(std::string_view op, const std::string& variant, const ShardShape& shard,
                std::int64_t tokens, DType dtype);
// The same at a quantized spec when `quant` holds one; throws std::invalid_argument naming the op
// where it has no quantized variants.
Plan build_plan(std::string_view op, const std::string& variant, const ShardShape& shard,
                std::int64_t tokens, DType dtype, const std::optional<QuantSpec>& quant);
// "" when `op` runs quantized, else why not (the op named).
std::string quant_refusal(const OpInfo& op);

}  // namespace fusebench
