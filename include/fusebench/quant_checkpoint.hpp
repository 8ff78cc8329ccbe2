#pragma once
// Quantized checkpoints as published (issue 29, item 6): config.json's quantization_config read
// into the quant spec a run uses, and where each projection's scales are stored. Read as vLLM
// reads them (docs/checkpoints.md, "Quantized checkpoints"):
//   quant_method "fp8" (vLLM's Fp8Config): weights F8_E4M3; weight_block_size [128, 128] ->
//     block scales `weight_scale_inv` [ceil(N/128), ceil(K/128)] (dynamic 1x128 activations:
//     DeepSeek-V3, Qwen3-FP8); without it one scalar `weight_scale` per tensor, and with
//     activation_scheme "static" one scalar `input_scale`.
//   quant_method "compressed-tensors": one config group of 8-bit weights (type float: F8_E4M3,
//     type int: I8, symmetric) and 8-bit input_activations; weight strategy tensor ([1]), channel
//     ([N, 1]) or block (block_structure [128, 128]); scales `weight_scale`, static input scales
//     `input_scale`.
// Everything else (another quant_method, 4-bit weights, weight-only schemes, zero points, other
// block sizes) is refused naming the field and the value.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "fusebench/checkpoint.hpp"
#include "fusebench/quant.hpp"
#include "fusebench/safetensors.hpp"

namespace fusebench {

struct CheckpointQuant {
  std::string method;  // "fp8" or "compressed-tensors"
  QuantSpec spec;      // what the run uses: dtype, weight and activation granularity, scheme
  TensorDtype stored = TensorDtype::F8_E4M3;  // the weights' stored dtype (F8_E4M3 or I8)
  std::string scale_suffix;  // "weight_scale_inv" or "weight_scale", beside "<proj>.weight"
  // How the fields were read, for the report: "quant_method fp8, weight_block_size [128, 128],
  // activation_scheme dynamic".
  std::string read_as;
  // Names the scale tensor of a stored weight "<proj>.weight" (and its input scale).
  std::string scale_of(const std::string& weight) const;
  std::string input_scale_of(const std::string& weight) const;
};

// config.json's quantization_config (or compression_config, its older name), nullopt when it has
// neither. `path` names the file in errors. Throws CheckpointError naming the field, its value and
// what would be valid.
std::optional<CheckpointQuant> read_checkpoint_quant(const nlohmann::json& config,
                                                     const std::string& path);
std::optional<CheckpointQuant> read_checkpoint_quant_file(const std::string& config_path);

// The scale tensors of stored weight `weight` ([rows, cols] codes in `quant.stored`), validated:
// dtype F32, BF16 or F16; shape [] or [1] (per tensor), [rows, 1] or [rows] (per channel),
// [ceil(rows/128), ceil(cols/128)] (block); every value finite and > 0. `input_scale`: the static
// input scale's name, "" when the scheme is dynamic. Throws CheckpointError naming the tensor.
struct QuantScaleNames {
  std::string scale, input_scale;
};
QuantScaleNames check_quant_scales(const Checkpoint& checkpoint, const CheckpointQuant& quant,
                                   const std::string& weight);

// The range of a checkpoint's scale: a dequantized value (code x scale, |code| <= 448) and the
// product of two stay normal float32 numbers, summed over any K the suite runs.
inline constexpr float kMinQuantScale = 0x1p-56f;
inline constexpr float kMaxQuantScale = 0x1p47f;

// A whole (small) tensor's values as floats: a scale, each > 0 and within
// kMinQuantScale..kMaxQuantScale. Throws CheckpointError naming the tensor and the value.
std::vector<float> read_scale_values(const Checkpoint& checkpoint, const std::string& name);

// Rows [row0, row0 + rows) x columns [col0, col0 + cols) of stored weight `weight` as its codes
// and the scales covering them (block scales: the window must start on a 128 boundary). A NaN
// code (fp8 0x7F, 0xFF) is refused naming the element.
QuantMat read_quantized_window(const Checkpoint& checkpoint, const CheckpointQuant& quant,
                               const std::string& weight, const std::string& scale,
                               std::int64_t row0, std::int64_t col0, std::int64_t rows,
                               std::int64_t cols);

}  // namespace fusebench
