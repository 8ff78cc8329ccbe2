#include "fusebench/quant.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <stdexcept>

#include "fusebench/dtype.hpp"

namespace fusebench {

// ---- The spec -----------------------------------------------------------------------------------

namespace {

constexpr std::string_view kGrammar = "DTYPE[:WEIGHTS[:ACTIVATIONS]][:SCHEME]";

std::string_view weights_word(WeightScales w) {
  switch (w) {
    case WeightScales::tensor:
      return "tensor";
    case WeightScales::channel:
      return "channel";
    case WeightScales::block:
      return "block";
  }
  return "?";
}

std::string_view activations_word(ActScales a) {
  switch (a) {
    case ActScales::tensor:
      return "tensor";
    case ActScales::token:
      return "token";
    case ActScales::group:
      return "group";
  }
  return "?";
}

// The activation granularity each weight granularity runs with unless the spec says otherwise.
ActScales paired_activations(WeightScales w) {
  switch (w) {
    case WeightScales::tensor:
      return ActScales::tensor;
    case WeightScales::channel:
      return ActScales::token;
    case WeightScales::block:
      return ActScales::group;
  }
  return ActScales::tensor;
}

bool parse_weights(std::string_view word, WeightScales& out) {
  for (WeightScales w : {WeightScales::tensor, WeightScales::channel, WeightScales::block})
    if (word == weights_word(w)) return out = w, true;
  return false;
}

bool parse_activations(std::string_view word, ActScales& out) {
  for (ActScales a : {ActScales::tensor, ActScales::token, ActScales::group})
    if (word == activations_word(a)) return out = a, true;
  return false;
}

std::vector<std::string_view> split_colons(std::string_view text) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto colon = text.find(':');
    out.push_back(text.substr(0, colon));
    if (colon == std::string_view::npos) return out;
    text.remove_prefix(colon + 1);
  }
}

[[noreturn]] void refuse(std::string_view text, const std::string& why) {
  throw std::invalid_argument("quantized dtype '" + std::string(text) + "': " + why);
}

}  // namespace

std::string QuantSpec::name() const {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on ":" + std::string(...).
  std::string out = dtype == QuantDType::int8 ? "int8" : "fp8";
  out.append(":").append(weights_word(weights));
  if (activations != paired_activations(weights))
    out.append(":").append(activations_word(activations));
  if (scheme == ActScheme::static_scale) out.append(":static");
  return out;
}

bool is_quant_spec(std::string_view text) {
  const auto head = text.substr(0, text.find(':'));
  return head == "fp8" || head == "int8";
}

QuantSpec parse_quant_spec(std::string_view text) {
  const auto fields = split_colons(text);
  QuantSpec spec;
  if (fields[0] == "fp8") {
    spec.dtype = QuantDType::fp8_e4m3fn;
  } else if (fields[0] == "int8") {
    spec.dtype = QuantDType::int8;
  } else {
    refuse(text, "unknown DTYPE '" + std::string(fields[0]) + "' (valid: fp8, int8; grammar " +
                     std::string(kGrammar) + ")");
  }
  // After DTYPE: up to two granularity words (weights, then activations), then the scheme.
  int granularities = 0;
  bool activations_given = false, scheme_given = false;
  for (std::size_t i = 1; i < fields.size(); ++i) {
    const std::string word(fields[i]);
    if (scheme_given)
      refuse(text, "'" + word + "' after the scheme (grammar " + std::string(kGrammar) + ")");
    if (word == "dynamic" || word == "static") {
      spec.scheme = word == "static" ? ActScheme::static_scale : ActScheme::dynamic;
      scheme_given = true;
    } else if (granularities == 0 && parse_weights(word, spec.weights)) {
      ++granularities;
    } else if (granularities == 1 && parse_activations(word, spec.activations)) {
      ++granularities;
      activations_given = true;
    } else if (granularities == 0) {
      refuse(text, "unknown WEIGHTS '" + word +
                       "' (valid: tensor, channel, block; or a SCHEME: dynamic, static)");
    } else if (granularities == 1) {
      refuse(text, "unknown ACTIVATIONS '" + word +
                       "' (valid: tensor, token, group; or a SCHEME: dynamic, static)");
    } else {
      refuse(text, "unknown SCHEME '" + word + "' (valid: dynamic, static)");
    }
  }
  if (!activations_given) spec.activations = paired_activations(spec.weights);

  // What no kernel runs: vLLM's block path quantizes activations per 1x128 group at run time.
  if (spec.weights == WeightScales::block && spec.activations != ActScales::group)
    refuse(text, "block weights take 1x128 activation groups (valid ACTIVATIONS: group)");
  if (spec.activations == ActScales::group && spec.weights != WeightScales::block)
    refuse(text, "1x128 activation groups need block weights (valid WEIGHTS: block)");
  if (spec.scheme == ActScheme::static_scale && spec.weights == WeightScales::block)
    refuse(text, "block weights take dynamic activations only (valid SCHEME: dynamic)");
  if (spec.scheme == ActScheme::static_scale && spec.activations != ActScales::tensor)
    refuse(text, "a static input scale is one per-tensor scale (valid ACTIVATIONS: tensor)");
  return spec;
}

std::string_view to_string(QuantDType dtype) {
  return dtype == QuantDType::int8 ? "int8" : "fp8_e4m3fn";
}

std::string_view to_string(WeightScales weights) {
  switch (weights) {
    case WeightScales::tensor:
      return "per-tensor";
    case WeightScales::channel:
      return "per-channel";
    case WeightScales::block:
      return "block-128x128";
  }
  return "?";
}

std::string_view to_string(ActScales activations) {
  switch (activations) {
    case ActScales::tensor:
      return "per-tensor";
    case ActScales::token:
      return "per-token";
    case ActScales::group:
      return "group-1x128";
  }
  return "?";
}

std::string_view to_string(ActScheme scheme) {
  return scheme == ActScheme::static_scale ? "static" : "dynamic";
}

// ---- Element rounding ---------------------------------------------------------------------------

double quant_max(QuantDType dtype) { return dtype == QuantDType::int8 ? kInt8Max : kFp8E4m3Max; }

namespace {

// Round to nearest, ties to even, without depending on the floating-point environment.
double round_half_even(double q) {
  const double floor = std::floor(q);
  const double diff = q - floor;
  if (diff > 0.5) return floor + 1;
  if (diff < 0.5) return floor;
  return std::fmod(floor, 2.0) == 0 ? floor : floor + 1;
}

}  // namespace

std::uint8_t fp8_e4m3fn_from_double(double value) {
  // On the double's bits, so the rounding is exact and needs no libm: sign, 11-bit exponent
  // (bias 1023), 52-bit mantissa.
  const auto bits = std::bit_cast<std::uint64_t>(value);
  const auto sign = static_cast<std::uint8_t>((bits >> 56) & 0x80);
  const std::uint64_t magnitude = bits & 0x7FFF'FFFF'FFFF'FFFFull;
  if (magnitude > 0x7FF0'0000'0000'0000ull) return sign | 0x7F;  // NaN
  // Saturate: up to 464 rounding gives 448 anyway (the tie goes to 448's even mantissa); beyond,
  // it would give 480, whose bit pattern is e4m3fn's NaN.
  if (std::fabs(value) >= kFp8E4m3Max) return sign | 0x7E;
  const int exponent = static_cast<int>(magnitude >> 52) - 1023;
  const std::uint64_t significand = (magnitude & ((1ull << 52) - 1)) | (1ull << 52);
  // Keep the bits of a code: 4 significant bits for a normal (binade >= 2^-6), fewer below, where
  // the step is 2^-9. `shift` drops the rest; round half to even on what was dropped.
  const int shift = exponent >= -6 ? 49 : 43 - exponent;
  if (shift > 54) return sign;  // below 2^-11: under half the smallest step
  std::uint64_t kept = significand >> shift;
  const std::uint64_t dropped = significand & ((1ull << shift) - 1);
  const std::uint64_t half = 1ull << (shift - 1);
  if (dropped > half || (dropped == half && (kept & 1))) ++kept;
  // A normal's kept bits are 1mmm with the binade in the exponent field; adding keeps a carry
  // (1111 + 1) moving into the next binade. Subnormals are just the step count (8 = 2^-6).
  const std::uint64_t code =
      exponent >= -6 ? (static_cast<std::uint64_t>(exponent + 7) << 3) + (kept - 8) : kept;
  return static_cast<std::uint8_t>(sign | code);
}

std::uint8_t fp8_e4m3fn_from_float(float value) {
  return fp8_e4m3fn_from_double(static_cast<double>(value));
}

double fp8_e4m3fn_to_double(std::uint8_t code) {
  const int exponent = (code >> 3) & 0x0F;
  const int mantissa = code & 0x07;
  if (exponent == 0x0F && mantissa == 0x07) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 7 - 3);
  return (code & 0x80) ? -magnitude : magnitude;
}

std::int8_t int8_from_double(double value) {
  if (std::isnan(value)) return 0;
  const double r = round_half_even(std::clamp(value, -kInt8Max, kInt8Max));
  return static_cast<std::int8_t>(r);
}

double decode_code(QuantDType dtype, std::uint8_t code) {
  if (dtype == QuantDType::int8) return static_cast<double>(static_cast<std::int8_t>(code));
  // A table: dequantizing a weight decodes millions of codes.
  static const auto kFp8 = [] {
    std::array<double, 256> table{};
    for (int c = 0; c < 256; ++c) table[c] = fp8_e4m3fn_to_double(static_cast<std::uint8_t>(c));
    return table;
  }();
  return kFp8[code];
}

namespace {

std::uint8_t round_to_code(QuantDType dtype, double x) {
  if (dtype == QuantDType::int8) return static_cast<std::uint8_t>(int8_from_double(x));
  return fp8_e4m3fn_from_double(x);
}

}  // namespace

std::uint8_t quantize_value(QuantDType dtype, float x, float scale) {
  return round_to_code(dtype, static_cast<double>(x / scale));
}

// ---- Scales and quantized matrices --------------------------------------------------------------

ScaleKind scale_kind(WeightScales weights) {
  switch (weights) {
    case WeightScales::tensor:
      return ScaleKind::tensor;
    case WeightScales::channel:
      return ScaleKind::row;
    case WeightScales::block:
      return ScaleKind::block;
  }
  return ScaleKind::tensor;
}

ScaleKind scale_kind(ActScales activations) {
  switch (activations) {
    case ActScales::tensor:
      return ScaleKind::tensor;
    case ActScales::token:
      return ScaleKind::row;
    case ActScales::group:
      return ScaleKind::group;
  }
  return ScaleKind::tensor;
}

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

struct Tile {
  std::int64_t rows, cols;
};

// At least 1 each, so an empty matrix still has a well-formed (empty) grid.
Tile tile_of(ScaleKind kind, std::int64_t rows, std::int64_t cols) {
  switch (kind) {
    case ScaleKind::tensor:
      return {std::max<std::int64_t>(rows, 1), std::max<std::int64_t>(cols, 1)};
    case ScaleKind::row:
      return {1, std::max<std::int64_t>(cols, 1)};
    case ScaleKind::block:
      return {kQuantBlock, kQuantBlock};
    case ScaleKind::group:
      return {1, kQuantBlock};
  }
  return {1, 1};
}

}  // namespace

std::string_view to_string(ScaleKind kind) {
  switch (kind) {
    case ScaleKind::tensor:
      return "per-tensor";
    case ScaleKind::row:
      return "per-row";
    case ScaleKind::block:
      return "128x128 block";
    case ScaleKind::group:
      return "1x128 group";
  }
  return "?";
}

std::int64_t QuantMat::tile_rows() const { return tile_of(kind, rows, cols).rows; }
std::int64_t QuantMat::tile_cols() const { return tile_of(kind, rows, cols).cols; }
std::int64_t QuantMat::scale_rows() const { return ceil_div(rows, tile_rows()); }
std::int64_t QuantMat::scale_cols() const { return ceil_div(cols, tile_cols()); }

float QuantMat::scale_at(std::int64_t r, std::int64_t c) const {
  return scales[static_cast<std::size_t>((r / tile_rows()) * scale_cols() + c / tile_cols())];
}

double QuantMat::value(std::int64_t r, std::int64_t c) const {
  return decode_code(dtype, codes[static_cast<std::size_t>(r * cols + c)]) *
         static_cast<double>(scale_at(r, c));
}

float dynamic_scale(QuantDType dtype, float amax) {
  if (!(amax > 0)) return 1.0f;
  // fp32 as vLLM's kernels; a denormal amax must not give scale 0 (x / 0 is inf or NaN).
  return std::max(amax / static_cast<float>(quant_max(dtype)),
                  std::numeric_limits<float>::denorm_min());
}

namespace {

// Calls fn(begin, end, tile) for each run of elements [begin, end) of one row that share the
// scale scales[tile], so the loops above do no index division per element.
template <class Fn>
void for_each_span(const QuantMat& m, Fn fn) {
  const std::int64_t tr = m.tile_rows(), tc = m.tile_cols(), sc = m.scale_cols();
  for (std::int64_t r = 0; r < m.rows; ++r)
    for (std::int64_t c = 0; c < m.cols; c += tc)
      fn(static_cast<std::size_t>(r * m.cols + c),
         static_cast<std::size_t>(r * m.cols + std::min(c + tc, m.cols)),
         static_cast<std::size_t>((r / tr) * sc + c / tc));
}

void check_shape(std::int64_t rows, std::int64_t cols) {
  if (rows < 0 || cols < 0)
    throw std::invalid_argument("quantize: negative shape " + std::to_string(rows) + "x" +
                                std::to_string(cols));
}

}  // namespace

QuantMat quantize_with_scales(const float* data, std::int64_t rows, std::int64_t cols,
                              QuantDType dtype, ScaleKind kind, std::vector<float> scales) {
  check_shape(rows, cols);
  QuantMat m{dtype, kind, rows, cols, {}, std::move(scales)};
  const auto want = static_cast<std::size_t>(m.scale_rows() * m.scale_cols());
  if (m.scales.size() != want)
    throw std::invalid_argument("quantize: " + std::to_string(m.scales.size()) + " " +
                                std::string(to_string(kind)) + " scales for a " +
                                std::to_string(rows) + "x" + std::to_string(cols) +
                                " matrix, which needs " + std::to_string(want));
  for (float s : m.scales)
    if (!(s > 0) || !std::isfinite(s))
      throw std::invalid_argument("quantize: scale " + std::to_string(s) +
                                  " is not a positive finite number");
  m.codes.resize(static_cast<std::size_t>(rows * cols));
  for_each_span(m, [&](std::size_t begin, std::size_t end, std::size_t tile) {
    for (std::size_t i = begin; i < end; ++i)
      m.codes[i] = quantize_value(dtype, data[i], m.scales[tile]);
  });
  return m;
}

QuantMat quantize(const float* data, std::int64_t rows, std::int64_t cols, QuantDType dtype,
                  ScaleKind kind) {
  check_shape(rows, cols);
  QuantMat grid{dtype, kind, rows, cols, {}, {}};
  std::vector<float> amax(static_cast<std::size_t>(grid.scale_rows() * grid.scale_cols()), 0.0f);
  for_each_span(grid, [&](std::size_t begin, std::size_t end, std::size_t tile) {
    for (std::size_t i = begin; i < end; ++i) amax[tile] = std::max(amax[tile], std::fabs(data[i]));
  });
  for (float& a : amax) a = dynamic_scale(dtype, a);
  return quantize_with_scales(data, rows, cols, dtype, kind, std::move(amax));
}

std::vector<double> dequantize(const QuantMat& m) {
  std::vector<double> out(static_cast<std::size_t>(m.rows * m.cols));
  for_each_span(m, [&](std::size_t begin, std::size_t end, std::size_t tile) {
    const auto scale = static_cast<double>(m.scales[tile]);
    for (std::size_t i = begin; i < end; ++i) out[i] = decode_code(m.dtype, m.codes[i]) * scale;
  });
  return out;
}

// ---- Fusing shards ------------------------------------------------------------------------------

namespace {

// Shards fuse along rows: same dtype, same K, the same kind of scales.
void check_shards(const std::vector<QuantMat>& shards, std::string_view what,
                  std::initializer_list<ScaleKind> kinds) {
  if (shards.empty()) throw std::invalid_argument(std::string(what) + ": no shards");
  for (const QuantMat& s : shards) {
    if (s.dtype != shards[0].dtype || s.cols != shards[0].cols)
      throw std::invalid_argument(std::string(what) + ": shards differ in dtype or input size (K " +
                                  std::to_string(s.cols) + " vs " + std::to_string(shards[0].cols) +
                                  ")");
    if (std::find(kinds.begin(), kinds.end(), s.kind) == kinds.end() || s.kind != shards[0].kind)
      throw std::invalid_argument(
          std::string(what) + ": takes " + std::string(to_string(*kinds.begin())) +
          (kinds.size() > 1 ? " or " + std::string(to_string(*(kinds.end() - 1))) : "") +
          " shards of one kind, not " + std::string(to_string(s.kind)));
  }
}

QuantMat stacked(const std::vector<QuantMat>& shards, ScaleKind kind) {
  QuantMat out{shards[0].dtype, kind, 0, shards[0].cols, {}, {}};
  for (const QuantMat& s : shards) {
    out.rows += s.rows;
    out.codes.insert(out.codes.end(), s.codes.begin(), s.codes.end());
  }
  return out;
}

}  // namespace

QuantMat requantize_with_max_scale(const std::vector<QuantMat>& shards,
                                   RequantArithmetic arithmetic) {
  check_shards(shards, "requantize_with_max_scale", {ScaleKind::tensor});
  float max_scale = 0;
  for (const QuantMat& s : shards) max_scale = std::max(max_scale, s.scales.at(0));
  const float inverse = 1.0f / max_scale;  // vLLM's static quantization multiplies by it
  QuantMat out = stacked(shards, ScaleKind::tensor);
  out.scales = {max_scale};
  std::size_t i = 0;
  for (const QuantMat& s : shards) {
    const float scale = s.scales[0];
    // per_tensor_dequantize: an fp16 tensor times weight_scale[idx], a 0-dim fp32 device tensor.
    // Torch's promotion makes the result fp16 and its CUDA kernel casts the scale to that dtype
    // on load, then multiplies in fp32 (exact here: 4 by 11 significant bits) and stores fp16.
    const float scale16 = f16_to_float(float_to_f16(scale));
    for (std::uint8_t code : s.codes) {
      const double v = decode_code(s.dtype, code);
      double x = 0;
      if (arithmetic == RequantArithmetic::vllm) {
        const float dq = f16_to_float(float_to_f16(static_cast<float>(v) * scale16));
        x = static_cast<double>(dq * inverse);
      } else {
        x = v * static_cast<double>(scale) / static_cast<double>(max_scale);
      }
      out.codes[i++] = round_to_code(s.dtype, x);
    }
  }
  return out;
}

QuantMat convert_to_channelwise(const std::vector<QuantMat>& shards) {
  check_shards(shards, "convert_to_channelwise", {ScaleKind::tensor});
  QuantMat out = stacked(shards, ScaleKind::row);
  for (const QuantMat& s : shards) out.scales.insert(out.scales.end(), s.rows, s.scales.at(0));
  return out;
}

QuantMat concat_rows(const std::vector<QuantMat>& shards) {
  check_shards(shards, "concat_rows", {ScaleKind::row, ScaleKind::block});
  if (shards[0].kind == ScaleKind::block)
    for (std::size_t i = 0; i + 1 < shards.size(); ++i)
      if (shards[i].rows % kQuantBlock != 0)
        throw std::invalid_argument(
            "Weight output_partition_size = " + std::to_string(shards[i].rows) +
            " is not divisible by weight quantization block_n = " + std::to_string(kQuantBlock) +
            ".");
  QuantMat out = stacked(shards, shards[0].kind);
  for (const QuantMat& s : shards)
    out.scales.insert(out.scales.end(), s.scales.begin(), s.scales.end());
  return out;
}

std::string_view to_string(ShardFusion fusion) {
  switch (fusion) {
    case ShardFusion::stack:
      return "stack";
    case ShardFusion::max_scale:
      return "max-scale";
    case ShardFusion::channelwise:
      return "channelwise";
  }
  return "?";
}

QuantMat quantize_shards(const std::vector<std::vector<float>>& parts,
                         const std::vector<std::int64_t>& part_rows, std::int64_t cols,
                         QuantDType dtype, ScaleKind kind, ShardFusion fusion) {
  if (parts.empty() || parts.size() != part_rows.size())
    throw std::invalid_argument("quantize_shards: one row count per part, at least one part");
  std::vector<QuantMat> shards;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (static_cast<std::int64_t>(parts[i].size()) != part_rows[i] * cols)
      throw std::invalid_argument("quantize_shards: part " + std::to_string(i) + " has " +
                                  std::to_string(parts[i].size()) + " values, not " +
                                  std::to_string(part_rows[i] * cols));
    shards.push_back(quantize(parts[i].data(), part_rows[i], cols, dtype, kind));
  }
  return merge_shards(std::move(shards), fusion);
}

QuantMat merge_shards(std::vector<QuantMat> shards, ShardFusion fusion) {
  if (shards.empty()) throw std::invalid_argument("merge_shards: no shards");
  if (shards.size() == 1) return std::move(shards.front());
  switch (fusion) {
    case ShardFusion::max_scale:
      return requantize_with_max_scale(shards);
    case ShardFusion::channelwise:
      return convert_to_channelwise(shards);
    case ShardFusion::stack:
      break;
  }
  return concat_rows(shards);
}

std::string fp8_block_shape_refusal(std::int64_t input_size, std::int64_t output_size,
                                    std::int64_t input_size_per_partition,
                                    const std::vector<std::int64_t>& output_partition_sizes, int tp,
                                    std::int64_t block_n, std::int64_t block_k) {
  // Row parallel: each rank's K slice is whole blocks.
  if (tp > 1 && input_size_per_partition > 0 && input_size / input_size_per_partition == tp &&
      input_size_per_partition % block_k != 0)
    return "Weight input_size_per_partition = " + std::to_string(input_size_per_partition) +
           " is not divisible by weight quantization block_k = " + std::to_string(block_k) + ".";
  // Column parallel or merged: each part's rows are whole blocks; a merged layer TP does not
  // split may end in a partial block.
  std::int64_t sum = 0;
  for (std::int64_t s : output_partition_sizes) sum += s;
  const bool tp_split = tp > 1 && sum > 0 && output_size / sum == tp;
  const bool merged = output_partition_sizes.size() > 1;
  if (!tp_split && !merged) return "";
  const std::size_t checked =
      tp_split ? output_partition_sizes.size() : output_partition_sizes.size() - 1;
  for (std::size_t i = 0; i < checked; ++i)
    if (output_partition_sizes[i] % block_n != 0)
      return "Weight output_partition_size = " + std::to_string(output_partition_sizes[i]) +
             " is not divisible by weight quantization block_n = " + std::to_string(block_n) + ".";
  return "";
}

// ---- float64 references and the error metrics ---------------------------------------------------

namespace {

// Four partial sums: independent adds instead of one dependency chain. The order is fixed, so
// the same operands give the same bits in every product (channelwise vs split).
double dot(const double* a, const double* b, std::int64_t k) {
  double acc[4] = {0, 0, 0, 0};
  std::int64_t p = 0;
  for (; p + 4 <= k; p += 4)
    for (int l = 0; l < 4; ++l) acc[l] += a[p + l] * b[p + l];
  for (; p < k; ++p) acc[0] += a[p] * b[p];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

}  // namespace

std::vector<double> matmul_nt(const std::vector<double>& x, const std::vector<double>& w,
                              std::int64_t m, std::int64_t k, std::int64_t n) {
  if (x.size() != static_cast<std::size_t>(m * k) || w.size() != static_cast<std::size_t>(n * k))
    throw std::invalid_argument("matmul_nt: operand sizes do not match " + std::to_string(m) + "x" +
                                std::to_string(k) + " times (" + std::to_string(n) + "x" +
                                std::to_string(k) + ")^T");
  // Rows of W in blocks that stay in cache while every row of X passes over them (W in double
  // is far larger than the caches: row by row of X it would be read from memory M times).
  constexpr std::int64_t kRowsPerBlock = 8;
  std::vector<double> y(static_cast<std::size_t>(m * n));
  for (std::int64_t j0 = 0; j0 < n; j0 += kRowsPerBlock)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = j0; j < std::min(j0 + kRowsPerBlock, n); ++j)
        y[static_cast<std::size_t>(i * n + j)] =
            dot(&x[static_cast<std::size_t>(i * k)], &w[static_cast<std::size_t>(j * k)], k);
  return y;
}

std::vector<double> reference_product(const float* x, const float* w, std::int64_t m,
                                      std::int64_t k, std::int64_t n) {
  return matmul_nt(std::vector<double>(x, x + m * k), std::vector<double>(w, w + n * k), m, k, n);
}

std::vector<double> dequantized_product(const QuantMat& x, const QuantMat& w) {
  if (x.cols != w.cols)
    throw std::invalid_argument("dequantized_product: X has K " + std::to_string(x.cols) +
                                ", W has K " + std::to_string(w.cols));
  return matmul_nt(dequantize(x), dequantize(w), x.rows, x.cols, w.rows);
}

std::vector<double> concat_columns(const std::vector<std::vector<double>>& parts,
                                   std::int64_t rows) {
  std::vector<std::int64_t> widths;
  std::int64_t total = 0;
  for (const auto& p : parts) {
    if (rows <= 0 || p.size() % static_cast<std::size_t>(rows) != 0)
      throw std::invalid_argument("concat_columns: a part of " + std::to_string(p.size()) +
                                  " values is not " + std::to_string(rows) + " rows");
    widths.push_back(static_cast<std::int64_t>(p.size()) / rows);
    total += widths.back();
  }
  std::vector<double> out(static_cast<std::size_t>(rows * total));
  std::int64_t col = 0;
  for (std::size_t s = 0; s < parts.size(); ++s) {
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy_n(&parts[s][static_cast<std::size_t>(r * widths[s])], widths[s],
                  &out[static_cast<std::size_t>(r * total + col)]);
    col += widths[s];
  }
  return out;
}

std::vector<double> relative_rms_per_shard(const std::vector<double>& y,
                                           const std::vector<double>& ref, std::int64_t rows,
                                           const std::vector<std::int64_t>& widths) {
  std::int64_t total = 0;
  for (std::int64_t w : widths) total += w;
  if (y.size() != ref.size() || y.size() != static_cast<std::size_t>(rows * total))
    throw std::invalid_argument("relative_rms_per_shard: " + std::to_string(y.size()) + " and " +
                                std::to_string(ref.size()) + " values for " + std::to_string(rows) +
                                " rows of " + std::to_string(total) + " columns");
  std::vector<double> out;
  std::int64_t col = 0;
  for (std::int64_t w : widths) {
    // The mean over the same count cancels: rms(d)/rms(ref) = sqrt(sum d^2 / sum ref^2).
    double diff2 = 0, ref2 = 0;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = col; c < col + w; ++c) {
        const auto i = static_cast<std::size_t>(r * total + c);
        diff2 += (y[i] - ref[i]) * (y[i] - ref[i]);
        ref2 += ref[i] * ref[i];
      }
    out.push_back(ref2 > 0    ? std::sqrt(diff2 / ref2)
                  : diff2 > 0 ? std::numeric_limits<double>::infinity()
                              : 0.0);
    col += w;
  }
  return out;
}

std::vector<double> quant_error(const std::vector<double>& y, const std::vector<double>& exact,
                                std::int64_t rows, const std::vector<std::int64_t>& widths) {
  std::vector<double> out = relative_rms_per_shard(y, exact, rows, widths);
  // An inf or NaN output, or a zero reference (a projection zeroed), has no relative error: NaN,
  // never the 0.0 that reads as exact (issue 37).
  std::int64_t total = 0;
  for (std::int64_t w : widths) total += w;
  std::int64_t col = 0;
  for (std::size_t s = 0; s < widths.size(); ++s) {
    bool broken = true;  // stays true when the reference is all zero
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = col; c < col + widths[s]; ++c) {
        const auto i = static_cast<std::size_t>(r * total + c);
        if (!std::isfinite(y[i]) || !std::isfinite(exact[i])) {
          broken = true;
          r = rows;
          break;
        }
        if (exact[i] != 0) broken = false;
      }
    if (broken) out[s] = std::numeric_limits<double>::quiet_NaN();
    col += widths[s];
  }
  return out;
}

std::vector<double> quant_error_vs_split(const std::vector<double>& fused,
                                         const std::vector<double>& split, std::int64_t rows,
                                         const std::vector<std::int64_t>& widths) {
  return relative_rms_per_shard(fused, split, rows, widths);
}

}  // namespace fusebench
