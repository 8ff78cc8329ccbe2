#pragma once
// A checkpoint layer's MoE router (the gate linear [experts, hidden] and DeepSeek-V3's
// e_score_correction_bias [experts]), read for the moe op's --routing=router (docs/checkpoints.md).
#include <string>
#include <string_view>

#include "fusebench/checkpoint.hpp"
#include "fusebench/routing.hpp"
#include "fusebench/shapes.hpp"

namespace fusebench {

// The router's tensor names of a model_type ("{layer}": the decoder layer): its weight, and its
// correction bias where the family stores one ("" none). Empty weight: the router is not mapped.
struct RouterTensorNames {
  std::string weight, bias;
};
RouterTensorNames router_tensor_names(std::string_view model_type);

// Layer `layer`'s router, as floats (exact: BF16, F16 and F32 are fp32 values), with the bias
// when `correction_bias` (the rule routes on scores + e_score_correction_bias). Throws
// CheckpointError naming the tensor: not mapped for the model_type, missing, a shape other than
// [experts, hidden] / [experts], a dtype the suite cannot read, a NaN or Inf.
RouterWeights read_router(const Checkpoint& checkpoint, const ModelShape& model, int layer,
                          bool correction_bias);

}  // namespace fusebench
