#pragma once
// Quantization as data (issue 29, part 1): the spec of a quantized dtype, exact fp8 e4m3fn and
// int8 rounding, scales at every granularity, vLLM's two ways of fusing per-tensor shards, its
// block-shape rule, and the float64 references and error metrics the quantized variants report.
// Pure host code: the backends consume what it produces, the verifier checks against it
// (docs/quant.md).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fusebench {

// ---- The spec: what an entry name and --dtypes= say --------------------------------------------

enum class QuantDType { fp8_e4m3fn, int8 };
enum class WeightScales { tensor, channel, block };  // block: 128x128 tiles of W[N, K]
enum class ActScales { tensor, token, group };       // group: 1x128 tiles of X[M, K]
enum class ActScheme { dynamic, static_scale };      // static: one given input scale

struct QuantSpec {
  QuantDType dtype = QuantDType::fp8_e4m3fn;
  WeightScales weights = WeightScales::tensor;
  ActScales activations = ActScales::tensor;
  ActScheme scheme = ActScheme::dynamic;

  // Canonical spec string (parse_quant_spec(s.name()) == s): DTYPE:WEIGHTS, then the activation
  // granularity only where it is not the one paired with WEIGHTS, then ":static" if static.
  std::string name() const;
  bool operator==(const QuantSpec&) const = default;
};

// Grammar: DTYPE[:WEIGHTS[:ACTIVATIONS]][:SCHEME]
//   DTYPE fp8 | int8; WEIGHTS tensor (default) | channel | block;
//   ACTIVATIONS tensor | token | group, default paired with WEIGHTS (tensor->tensor,
//   channel->token, block->group); SCHEME dynamic (default) | static.
// Combinations no kernel runs are refused: block weights take dynamic 1x128 groups only (as
// vLLM), 1x128 groups need block weights, static needs per-tensor activations (one input scale).
// Throws std::invalid_argument naming the bad value and listing the valid ones.
QuantSpec parse_quant_spec(std::string_view text);
// Whether `text` starts like a quantized dtype (fp8/int8), so --dtypes= can route it here.
bool is_quant_spec(std::string_view text);

std::string_view to_string(QuantDType dtype);       // "fp8_e4m3fn", "int8"
std::string_view to_string(WeightScales weights);   // "per-tensor", "per-channel", "block-128x128"
std::string_view to_string(ActScales activations);  // "per-tensor", "per-token", "group-1x128"
std::string_view to_string(ActScheme scheme);       // "dynamic", "static"

// ---- Element rounding ---------------------------------------------------------------------------

inline constexpr double kFp8E4m3Max = 448.0;
inline constexpr double kInt8Max = 127.0;
double quant_max(QuantDType dtype);

// fp8 e4m3fn (1 sign, 4 exponent bits with bias 7, 3 mantissa bits, no infinities; 0x7F and 0xFF
// are NaN; max 448, min normal 2^-6, min subnormal 2^-9). Round to nearest, ties to even, in one
// step from the double (a float converts exactly); saturating: anything beyond 448, infinities
// included, becomes +-448 (as vLLM clamps before torch's .to(float8_e4m3fn), and as the device's
// cvt .satfinite does); NaN becomes 0x7F with its sign.
std::uint8_t fp8_e4m3fn_from_double(double value);
std::uint8_t fp8_e4m3fn_from_float(float value);
double fp8_e4m3fn_to_double(std::uint8_t code);

// Symmetric int8: round to nearest, ties to even, clamped to [-127, 127]; NaN becomes 0.
// (vLLM's CUDA kernels use cvt.rni.sat.s8, which saturates to -128 below; a dynamic symmetric
// scale never reaches it, a static scale only for inputs beyond -127.5 scales.)
std::int8_t int8_from_double(double value);

// The value of one code of `dtype` (an fp8 bit pattern, or an int8 as its two's-complement byte).
double decode_code(QuantDType dtype, std::uint8_t code);
// x / scale, correctly rounded in fp32 as the quantize kernels compute it, then rounded to a code.
std::uint8_t quantize_value(QuantDType dtype, float x, float scale);

// ---- Scales and quantized matrices --------------------------------------------------------------

inline constexpr std::int64_t kQuantBlock = 128;

// Which elements of a row-major [rows, cols] matrix share one scale.
enum class ScaleKind {
  tensor,  // one scale
  row,     // one per row: per output channel of W[N, K], per token of X[M, K]
  block,   // one per 128x128 tile: [ceil(rows/128), ceil(cols/128)] (weight_scale_inv)
  group,   // one per 1x128 tile of a row: [rows, ceil(cols/128)]
};
ScaleKind scale_kind(WeightScales weights);
ScaleKind scale_kind(ActScales activations);
// "per-tensor", "per-row", "128x128 block", "1x128 group": the words errors name a kind by.
std::string_view to_string(ScaleKind kind);

// A quantized row-major matrix: codes and their fp32 scales, row-major over the scale grid.
// value(r, c) = decode(code) * scale of the tile holding (r, c), exact in double.
struct QuantMat {
  QuantDType dtype = QuantDType::fp8_e4m3fn;
  ScaleKind kind = ScaleKind::tensor;
  std::int64_t rows = 0, cols = 0;
  std::vector<std::uint8_t> codes;  // rows * cols
  std::vector<float> scales;        // scale_rows() * scale_cols()

  std::int64_t tile_rows() const;
  std::int64_t tile_cols() const;
  std::int64_t scale_rows() const;  // ceil(rows / tile_rows)
  std::int64_t scale_cols() const;  // ceil(cols / tile_cols)
  float scale_at(std::int64_t r, std::int64_t c) const;
  double value(std::int64_t r, std::int64_t c) const;
};

// The dynamic scale of a tile whose largest magnitude is `amax`: amax / 448 (fp8) or amax / 127
// (int8), in fp32 as vLLM computes it; an all-zero tile gets scale 1 (its codes are 0 anyway).
float dynamic_scale(QuantDType dtype, float amax);

// Quantizes `data` (row-major [rows, cols]) with one dynamic scale per tile of `kind`.
QuantMat quantize(const float* data, std::int64_t rows, std::int64_t cols, QuantDType dtype,
                  ScaleKind kind);
// The same with given scales (a static input scale, a checkpoint's scales); their count must be
// the grid's.
QuantMat quantize_with_scales(const float* data, std::int64_t rows, std::int64_t cols,
                              QuantDType dtype, ScaleKind kind, std::vector<float> scales);
// Every value(r, c), row-major.
std::vector<double> dequantize(const QuantMat& m);

// ---- Fusing shards (q/k/v, gate/up) as vLLM does ------------------------------------------------

enum class RequantArithmetic {
  vllm,   // as vLLM's requantize_with_max_scale: the code as fp16 times the shard scale cast
          // to fp16 (an fp16 result), then times the fp32 reciprocal of the max scale, clamped
          // and rounded
  exact,  // code * shard scale / max scale in double, rounded once (the max-scale loss alone)
};
// Per-tensor shards (rows stacked) requantized to the largest shard scale: lossy for every shard
// whose scale is smaller; the max shard's codes come back unchanged.
QuantMat requantize_with_max_scale(const std::vector<QuantMat>& shards,
                                   RequantArithmetic arithmetic = RequantArithmetic::vllm);
// Per-tensor shards stacked with each shard's scale repeated for each of its rows (vLLM's
// convert_to_channelwise): exact, codes unchanged.
QuantMat convert_to_channelwise(const std::vector<QuantMat>& shards);
// Row-scaled or block-scaled shards stacked as they are (exact). Block shards must each but the
// last span whole 128-row blocks (else throws std::invalid_argument in vLLM's words).
QuantMat concat_rows(const std::vector<QuantMat>& shards);

// How a plan merges the quantized shards of one weight buffer (BufferSpec::Quantized).
enum class ShardFusion {
  stack,        // one shard, or row/block shards stacked as they are (concat_rows): exact
  max_scale,    // per-tensor shards requantized to the largest scale (vLLM's fused FP8)
  channelwise,  // per-tensor shard scales as one scale per row (convert_to_channelwise)
};
std::string_view to_string(ShardFusion fusion);
// Each part ([part_rows[i], cols], row-major) quantized with one dynamic scale per tile of
// `kind`, then merged by `fusion`: what a plan's weight buffer holds, loaded once.
QuantMat quantize_shards(const std::vector<std::vector<float>>& parts,
                         const std::vector<std::int64_t>& part_rows, std::int64_t cols,
                         QuantDType dtype, ScaleKind kind, ShardFusion fusion);

// Quantized shards (a checkpoint's stored codes and scales, or quantize()'s) merged by `fusion`:
// max_scale -> requantize_with_max_scale, channelwise -> convert_to_channelwise, stack ->
// concat_rows; one shard comes back as it is.
QuantMat merge_shards(std::vector<QuantMat> shards, ShardFusion fusion);

// vLLM's validate_fp8_block_shape, in its arguments: the layer's full input and output sizes,
// this rank's input size and its output size of each logical part (q, k, v or gate, up). With
// tp > 1 a row-parallel layer's input_size_per_partition must be a multiple of block_k; a TP-split
// or merged layer's every output part must be a multiple of block_n, except the last part of a
// merged layer that TP does not split. Returns "" when accepted, else vLLM's message.
std::string fp8_block_shape_refusal(std::int64_t input_size, std::int64_t output_size,
                                    std::int64_t input_size_per_partition,
                                    const std::vector<std::int64_t>& output_partition_sizes, int tp,
                                    std::int64_t block_n = kQuantBlock,
                                    std::int64_t block_k = kQuantBlock);

// ---- float64 references and the error metrics ---------------------------------------------------

// Y[M, N] = X[M, K] W[N, K]^T in double, row-major.
std::vector<double> matmul_nt(const std::vector<double>& x, const std::vector<double>& w,
                              std::int64_t m, std::int64_t k, std::int64_t n);
// The product of the unquantized operands (floats, converted exactly).
std::vector<double> reference_product(const float* x, const float* w, std::int64_t m,
                                      std::int64_t k, std::int64_t n);
// A variant's exact dequantized product: the quantized values times their scales, in double.
std::vector<double> dequantized_product(const QuantMat& x, const QuantMat& w);
// Column blocks [rows, width_i] side by side: split's three outputs as one [rows, sum] matrix.
std::vector<double> concat_columns(const std::vector<std::vector<double>>& parts,
                                   std::int64_t rows);

// rms(y - ref) / rms(ref) over each shard's columns of [rows, sum(widths)] matrices (0 when both
// are zero, +inf when only ref is). quant_error: ref = the unquantized float64 product, and NaN
// (no figure, never 0.0) for a shard whose output or reference is not finite or whose reference
// is all zero; quant_error_vs_split: y = a fused variant's output, ref = split's.
std::vector<double> relative_rms_per_shard(const std::vector<double>& y,
                                           const std::vector<double>& ref, std::int64_t rows,
                                           const std::vector<std::int64_t>& widths);
std::vector<double> quant_error(const std::vector<double>& y, const std::vector<double>& exact,
                                std::int64_t rows, const std::vector<std::int64_t>& widths);
std::vector<double> quant_error_vs_split(const std::vector<double>& fused,
                                         const std::vector<double>& split, std::int64_t rows,
                                         const std::vector<std::int64_t>& widths);

}  // namespace fusebench
