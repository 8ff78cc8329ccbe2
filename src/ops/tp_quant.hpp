#pragma once
// The quantized TP pipelines (tp_attn, tp_mlp at fp8/int8; docs/quant.md, docs/tp.md): the
// pipeline's plan with every GEMM replaced by a dynamic quantize of its input and a scaled GEMM
// on the quantized weight, as vLLM's quantized linear layers run inside the same TP pipeline.
#include "quant_projection.hpp"

namespace fusebench::ops {

// The variants are the pipeline's own (naive, paired, sp, overlap); naive is the baseline.
std::vector<std::string> tp_quant_variants(const QuantSpec& spec);

// `p` (a tp_attn or tp_mlp plan) quantized by `spec`:
// - each weight is quantized once, at load; the column layer's merged weight (q/k/v or
//   gate/up shards) in vLLM's form for the spec: per-tensor fp8 requantized to the largest
//   shard scale, per-tensor int8 as one scale per output row (convert_to_channelwise), row and
//   block scales stacked;
// - each GEMM quantizes its own input in the region (overlap: each chunk its chunk's rows);
// - block scales: refused as vLLM's validate_fp8_block_shape refuses the layer at this tp.
// Throws std::invalid_argument naming what is refused: a bias (the scaled GEMM adds none),
// static input scales (the row layer's input is an intermediate with no calibrated scale).
Plan quantize_pipeline(Plan p, const QuantSpec& spec);

// A quantized pipeline's accuracy is the whole pipeline's: its reference is the unsharded layer
// pair (the paired plan unquantized, on the whole logical tensors), and every variant merges
// its column layer's shards as vLLM does for the spec.
AccuracyReference tp_quant_reference(const Plan& measured, std::int64_t rows);
std::string tp_quant_shard_fusion(const QuantSpec& spec, const std::string& variant);

}  // namespace fusebench::ops
