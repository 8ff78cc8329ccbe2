#pragma once
// The quantized form of a projection group (q/k/v, gate/up) on one input x (docs/quant.md):
//   split              each shard its own weight scales; each GEMM quantizes its input as a
//                      separate layer would (per shard: one quantize + one scaled GEMM);
//   fused              the merged weight as vLLM builds it: per-tensor shards requantized to the
//                      largest shard scale at load (lossy), row and block scales stacked (exact);
//                      one quantize + one scaled GEMM;
//   fused_channelwise  per-tensor only: the shard scales as one scale per output row (exact).
// Weights are quantized once, at load (the workspace fills their codes and scales); the
// activations in the region: dynamic scales computed there, or the one static scale read.
#include "tp_common.hpp"

namespace fusebench::ops {

struct ProjectionShard {
  std::string output;  // "q", "gate"
  std::string label;   // the split GEMM's step label: "q_proj"
  tp::WindowPart weight;
};

// The variants of a quantized projection group for `spec`, split first.
std::vector<std::string> quant_projection_variants(const QuantSpec& spec);

// Adds x's quantization and the GEMMs of `variant` to `p` (whose input x is buffer `x`, [m, k])
// and returns each shard's output view. `fused_name`/`fused_label`: the merged weight's buffer
// and step. Throws std::invalid_argument for an unknown variant and, for block scales, vLLM's
// block-shape refusal (fp8_block_shape_refusal) with the layer's full sizes `full_output`.
std::vector<View> add_quantized_projection(Plan& p, int x,
                                           const std::vector<ProjectionShard>& shards,
                                           const std::string& fused_name,
                                           const std::string& fused_label, const QuantSpec& spec,
                                           std::int64_t full_output, const OpInfo& op);

// A scales buffer for the grid of `kind` over [rows, cols].
int add_scales(Plan& p, const std::string& name, ScaleKind kind, std::int64_t rows,
               std::int64_t cols, BufferRole role);
// A weight's codes (quantized at load from `parts`, merged by `fusion`) and its scales buffer.
QuantView add_quant_weight(Plan& p, const std::string& name,
                           const std::vector<tp::WindowPart>& parts, std::int64_t k,
                           QuantDType dtype, ScaleKind kind, ShardFusion fusion);
// An existing weight buffer's values quantized at load (its parts merged by `fusion`): its
// codes, and a new scales buffer.
QuantView quantize_weight_buffer(Plan& p, int buffer, QuantDType dtype, ScaleKind kind,
                                 ShardFusion fusion);
// A dynamic quantize step of `x` (any view) into new codes and scales buffers `name`_q and
// `name`_scale, not yet in the plan's steps.
QuantizeStep make_quantize(Plan& p, const std::string& name, const View& x, QuantDType dtype,
                           ScaleKind kind, const std::string& label);
// The same, appended to the plan's steps; returns its codes and scales.
QuantView add_quantize(Plan& p, const std::string& name, const View& x, QuantDType dtype,
                       ScaleKind kind, const std::string& label);

// Refuses a shard the quantized projections do not build yet (a bias, MLA, interleaved
// gate/up), naming what.
void check_quant_shard(const std::string& op, bool bias, const std::string& what_else);

}  // namespace fusebench::ops
