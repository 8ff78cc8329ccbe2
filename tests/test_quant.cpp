// Quantization as data (src/core/quant.*): the spec grammar, exact fp8 e4m3fn and int8 rounding,
// scales at each granularity, vLLM's shard fusions and block rule, the references and metrics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>

#include "error_of.hpp"
#include "fusebench/quant.hpp"

using namespace fusebench;

namespace {

// Portable uniform values in [-amax, amax) (std distributions differ between libraries), with
// one element set to exactly +-amax so the tile's scale is known.
std::vector<float> random_matrix(std::int64_t rows, std::int64_t cols, float amax,
                                 std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  for (float& v : out) v = amax * (std::ldexp(static_cast<float>(rng() >> 8), -23) - 1.0f);
  if (!out.empty()) out[out.size() / 2] = -amax;
  return out;
}

std::vector<QuantMat> per_tensor_shards(const std::vector<std::vector<float>>& shards,
                                        std::int64_t k, QuantDType dtype) {
  std::vector<QuantMat> out;
  for (const auto& s : shards)
    out.push_back(
        quantize(s.data(), static_cast<std::int64_t>(s.size()) / k, k, dtype, ScaleKind::tensor));
  return out;
}

std::vector<float> stack(const std::vector<std::vector<float>>& shards) {
  std::vector<float> out;
  for (const auto& s : shards) out.insert(out.end(), s.begin(), s.end());
  return out;
}

}  // namespace

// ---- The spec -----------------------------------------------------------------------------------

TEST(QuantSpec, ParsesTheGrammarWithPairedDefaultsAndCanonicalNames) {
  const QuantSpec fp8 = parse_quant_spec("fp8");
  EXPECT_EQ(fp8.dtype, QuantDType::fp8_e4m3fn);
  EXPECT_EQ(fp8.weights, WeightScales::tensor);
  EXPECT_EQ(fp8.activations, ActScales::tensor);
  EXPECT_EQ(fp8.scheme, ActScheme::dynamic);
  EXPECT_EQ(fp8.name(), "fp8:tensor");

  EXPECT_EQ(parse_quant_spec("fp8:channel").activations, ActScales::token);
  EXPECT_EQ(parse_quant_spec("fp8:block").activations, ActScales::group);
  EXPECT_EQ(parse_quant_spec("int8:channel").dtype, QuantDType::int8);
  const QuantSpec stat = parse_quant_spec("fp8:tensor:static");
  EXPECT_EQ(stat.scheme, ActScheme::static_scale);
  EXPECT_EQ(stat.name(), "fp8:tensor:static");
  EXPECT_EQ(parse_quant_spec("fp8:static").name(), "fp8:tensor:static");
  EXPECT_EQ(parse_quant_spec("fp8:dynamic").name(), "fp8:tensor");
  // A non-paired activation granularity is named; a paired one is not.
  EXPECT_EQ(parse_quant_spec("fp8:tensor:token").name(), "fp8:tensor:token");
  EXPECT_EQ(parse_quant_spec("fp8:channel:token").name(), "fp8:channel");
  EXPECT_EQ(parse_quant_spec("int8:channel:tensor:static").name(), "int8:channel:tensor:static");

  for (const char* text :
       {"fp8:tensor", "fp8:channel", "fp8:block", "int8:tensor", "int8:channel", "fp8:tensor:token",
        "fp8:channel:tensor", "fp8:tensor:static", "int8:channel:tensor:static"}) {
    const QuantSpec spec = parse_quant_spec(text);
    EXPECT_EQ(spec.name(), text);
    EXPECT_EQ(parse_quant_spec(spec.name()), spec) << text;
  }
  EXPECT_EQ(to_string(parse_quant_spec("fp8:block").weights), "block-128x128");
  EXPECT_EQ(to_string(parse_quant_spec("fp8:block").activations), "group-1x128");

  EXPECT_TRUE(is_quant_spec("fp8"));
  EXPECT_TRUE(is_quant_spec("int8:channel"));
  EXPECT_FALSE(is_quant_spec("bf16"));
  EXPECT_FALSE(is_quant_spec("fp8x"));
}

TEST(QuantSpec, RefusesBadValuesNamingThemAndTheValidOnes) {
  const auto contains = [](const std::string& text, const char* part) {
    return text.find(part) != std::string::npos;
  };
  std::string e = error_of([] { parse_quant_spec("fp9:channel"); });
  EXPECT_TRUE(contains(e, "'fp9'") && contains(e, "fp8, int8")) << e;
  e = error_of([] { parse_quant_spec(""); });
  EXPECT_TRUE(contains(e, "DTYPE") && contains(e, "fp8, int8")) << e;
  e = error_of([] { parse_quant_spec("fp8:row"); });
  EXPECT_TRUE(contains(e, "'row'") && contains(e, "tensor, channel, block")) << e;
  e = error_of([] { parse_quant_spec("fp8:channel:col"); });
  EXPECT_TRUE(contains(e, "'col'") && contains(e, "tensor, token, group")) << e;
  e = error_of([] { parse_quant_spec("fp8:channel:token:sometimes"); });
  EXPECT_TRUE(contains(e, "'sometimes'") && contains(e, "dynamic, static")) << e;
  e = error_of([] { parse_quant_spec("fp8:static:tensor"); });
  EXPECT_TRUE(contains(e, "'tensor' after the scheme")) << e;
  e = error_of([] { parse_quant_spec("fp8:block:token"); });
  EXPECT_TRUE(contains(e, "valid ACTIVATIONS: group")) << e;
  e = error_of([] { parse_quant_spec("fp8:tensor:group"); });
  EXPECT_TRUE(contains(e, "valid WEIGHTS: block")) << e;
  e = error_of([] { parse_quant_spec("fp8:block:static"); });
  EXPECT_TRUE(contains(e, "valid SCHEME: dynamic")) << e;
  e = error_of([] { parse_quant_spec("fp8:channel:static"); });
  EXPECT_TRUE(contains(e, "valid ACTIVATIONS: tensor")) << e;
}

// ---- Element rounding ---------------------------------------------------------------------------

TEST(QuantFp8E4m3, DecodesAll256CodesAndEncodesThemBack) {
  EXPECT_EQ(fp8_e4m3fn_to_double(0x7E), 448.0);
  EXPECT_EQ(fp8_e4m3fn_to_double(0xFE), -448.0);
  EXPECT_EQ(fp8_e4m3fn_to_double(0x01), std::ldexp(1.0, -9));  // min subnormal
  EXPECT_EQ(fp8_e4m3fn_to_double(0x07), 7 * std::ldexp(1.0, -9));
  EXPECT_EQ(fp8_e4m3fn_to_double(0x08), std::ldexp(1.0, -6));  // min normal
  EXPECT_EQ(fp8_e4m3fn_to_double(0x38), 1.0);
  EXPECT_EQ(fp8_e4m3fn_to_double(0x3C), 1.5);
  EXPECT_EQ(fp8_e4m3fn_to_double(0x00), 0.0);
  EXPECT_TRUE(std::signbit(fp8_e4m3fn_to_double(0x80)));
  int nans = 0;
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    const double v = fp8_e4m3fn_to_double(code);
    if (std::isnan(v)) {
      ++nans;
      EXPECT_TRUE(c == 0x7F || c == 0xFF) << c;
      continue;
    }
    EXPECT_EQ(fp8_e4m3fn_from_double(v), code) << c;
    EXPECT_EQ(fp8_e4m3fn_to_double(code ^ 0x80), -v) << c;  // sign-magnitude
    if (c >= 1 && c <= 0x7E) {
      EXPECT_LT(fp8_e4m3fn_to_double(code - 1), v) << c;  // monotonic
    }
  }
  EXPECT_EQ(nans, 2);
}

TEST(QuantFp8E4m3, RoundsToNearestWithTiesToEvenInEveryBinade) {
  const double sub = std::ldexp(1.0, -9);
  struct Case {
    double in, want;
  };
  for (const Case& t : std::initializer_list<Case>{
           {1 + 1.0 / 16, 1.0},  // tie between 1 (m=000) and 1.125: even
           {1 + 3.0 / 16, 1.25},
           {34, 32},  // binade 32: spacing 4
           {38, 40},
           {272, 256},  // binade 256: spacing 32
           {304, 320},
           {432, 448},  // 416 (m=101) and 448 (m=110): up to the max
           {std::ldexp(1.0, -6) * (1 + 1.0 / 16), std::ldexp(1.0, -6)},  // smallest normals
           {0.5 * sub, 0},                                               // subnormals
           {1.5 * sub, 2 * sub},
           {2.5 * sub, 2 * sub},
           {7.5 * sub, std::ldexp(1.0, -6)},  // 7 (odd) subnormal steps up to the min normal
           {-(1 + 1.0 / 16), -1.0},
           {std::nextafter(1 + 1.0 / 16, 2.0), 1.125},  // off the tie: nearest
           {std::nextafter(1.5 * sub, 0.0), sub},
           {0.1, 0.1015625},
       }) {
    EXPECT_EQ(fp8_e4m3fn_to_double(fp8_e4m3fn_from_double(t.in)), t.want) << t.in;
    if (static_cast<double>(static_cast<float>(t.in)) == t.in) {
      EXPECT_EQ(fp8_e4m3fn_from_float(static_cast<float>(t.in)), fp8_e4m3fn_from_double(t.in));
    }
  }
}

TEST(QuantFp8E4m3, SaturatesToMaxAndKeepsNaN) {
  const double inf = std::numeric_limits<double>::infinity();
  for (double v : {448.0, 449.0, 463.9, 464.0, 480.0, 1e30, inf}) {
    EXPECT_EQ(fp8_e4m3fn_from_double(v), 0x7E) << v;
    EXPECT_EQ(fp8_e4m3fn_from_double(-v), 0xFE) << v;
  }
  EXPECT_EQ(fp8_e4m3fn_from_double(std::nan("")), 0x7F);
  EXPECT_EQ(fp8_e4m3fn_from_double(-std::nan("")), 0xFF);
  EXPECT_EQ(fp8_e4m3fn_from_double(1e-30), 0x00);
  EXPECT_EQ(fp8_e4m3fn_from_double(-1e-30), 0x80);
}

TEST(QuantFp8E4m3, AgreesWithMlDtypesOnCodesTiesAndRandomValues) {
  // tests/quant/make_fp8_table.py: ml_dtypes' rounding of every code, every midpoint and its
  // float32 neighbours, and 2048 random values, clamped to +-448 first as vLLM does.
  struct Row {
    std::uint32_t bits;
    std::uint8_t code;
  };
  static constexpr Row kTable[] = {
#include "quant/fp8_e4m3fn_ml_dtypes.inc"
  };
  static_assert(std::size(kTable) > 3000);
  int mismatches = 0;
  for (const Row& row : kTable) {
    float x = 0;
    std::memcpy(&x, &row.bits, sizeof x);
    if (fp8_e4m3fn_from_float(x) != row.code && ++mismatches <= 5)
      ADD_FAILURE() << std::hexfloat << x << ": 0x" << std::hex << int{fp8_e4m3fn_from_float(x)}
                    << ", ml_dtypes 0x" << int{row.code};
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(QuantInt8, RoundsHalfToEvenAndClampsSymmetrically) {
  struct Case {
    double in;
    int want;
  };
  for (const Case& t : std::initializer_list<Case>{{0.5, 0},
                                                   {1.5, 2},
                                                   {2.5, 2},
                                                   {-0.5, 0},
                                                   {-1.5, -2},
                                                   {-2.5, -2},
                                                   {0.49, 0},
                                                   {126.5, 126},
                                                   {127.4, 127},
                                                   {127.5, 127},
                                                   {1e9, 127},
                                                   {-127.6, -127},
                                                   {-1e9, -127},
                                                   {std::numeric_limits<double>::infinity(), 127},
                                                   {std::nan(""), 0}})
    EXPECT_EQ(int8_from_double(t.in), t.want) << t.in;
  EXPECT_EQ(decode_code(QuantDType::int8, 0x81), -127.0);
}

// ---- Scales ------------------------------------------------------------------------------------

TEST(QuantScales, PerTensorScaleIsAmaxOverTheDtypeMax) {
  std::vector<float> x = random_matrix(3, 5, 3.5f, 1);
  const QuantMat f = quantize(x.data(), 3, 5, QuantDType::fp8_e4m3fn, ScaleKind::tensor);
  ASSERT_EQ(f.scales.size(), 1u);
  EXPECT_EQ(f.scales[0], 3.5f / 448.0f);
  EXPECT_EQ(f.codes[x.size() / 2], 0xFE);  // -amax -> -448
  const QuantMat i = quantize(x.data(), 3, 5, QuantDType::int8, ScaleKind::tensor);
  EXPECT_EQ(i.scales[0], 3.5f / 127.0f);
  EXPECT_EQ(static_cast<std::int8_t>(i.codes[x.size() / 2]), -127);
  // An all-zero tensor: scale 1, codes 0, no NaN.
  const std::vector<float> zeros(6, 0.0f);
  const QuantMat z = quantize(zeros.data(), 2, 3, QuantDType::fp8_e4m3fn, ScaleKind::tensor);
  EXPECT_EQ(z.scales[0], 1.0f);
  for (double v : dequantize(z)) EXPECT_EQ(v, 0.0);
}

TEST(QuantScales, PerRowScalesAreEachRowsAmax) {
  const std::vector<float> w = {0.5f, -1.0f, 0.25f, 0.0f,   // amax 1
                                2.0f, 0.1f,  -0.3f, 0.0f,   // amax 2
                                0.0f, 0.0f,  0.0f,  0.0f};  // zero row
  const QuantMat q = quantize(w.data(), 3, 4, QuantDType::fp8_e4m3fn, ScaleKind::row);
  EXPECT_EQ(q.scales, (std::vector<float>{1.0f / 448, 2.0f / 448, 1.0f}));
  EXPECT_EQ(q.codes[1], 0xFE);
  EXPECT_EQ(q.codes[4], 0x7E);
  EXPECT_EQ(q.value(0, 0), fp8_e4m3fn_to_double(q.codes[0]) * static_cast<double>(1.0f / 448));
}

TEST(QuantScales, BlockScalesAreCeilShapedAndCoverTheirTiles) {
  // W[300, 200]: weight_scale_inv is [ceil(300/128), ceil(200/128)] = [3, 2].
  std::vector<float> w = random_matrix(300, 200, 0.5f, 2);
  w[static_cast<std::size_t>(299 * 200 + 150)] = 4.0f;  // in the partial block (2, 1)
  const QuantMat q = quantize(w.data(), 300, 200, QuantDType::fp8_e4m3fn, ScaleKind::block);
  EXPECT_EQ(q.scale_rows(), 3);
  EXPECT_EQ(q.scale_cols(), 2);
  ASSERT_EQ(q.scales.size(), 6u);
  EXPECT_EQ(q.scales[5], 4.0f / 448);
  EXPECT_EQ(q.scale_at(299, 150), 4.0f / 448);
  EXPECT_EQ(q.scale_at(256, 128), 4.0f / 448);
  EXPECT_EQ(q.scale_at(255, 150), q.scales[3]);
  for (std::size_t b = 0; b < 5; ++b) EXPECT_LE(q.scales[b], 0.5f / 448) << b;
  EXPECT_EQ(q.codes[static_cast<std::size_t>(299 * 200 + 150)], 0x7E);
}

TEST(QuantScales, TokenGroupScalesAreOnePer128Columns) {
  std::vector<float> x = random_matrix(2, 300, 1.0f, 3);
  x[static_cast<std::size_t>(300 + 290)] = 8.0f;  // row 1, group 2 (columns 256..299)
  const QuantMat q = quantize(x.data(), 2, 300, QuantDType::fp8_e4m3fn, ScaleKind::group);
  EXPECT_EQ(q.scale_rows(), 2);
  EXPECT_EQ(q.scale_cols(), 3);
  EXPECT_EQ(q.scales[5], 8.0f / 448);
  EXPECT_LE(q.scales[4], 1.0f / 448);
  EXPECT_EQ(q.scale_at(1, 256), 8.0f / 448);
  EXPECT_NE(q.scale_at(1, 255), 8.0f / 448);
}

TEST(QuantScales, DequantizedValuesAreWithinHalfACodeStep) {
  const std::vector<float> x = random_matrix(16, 256, 2.0f, 4);
  for (ScaleKind kind : {ScaleKind::tensor, ScaleKind::row, ScaleKind::block, ScaleKind::group}) {
    const QuantMat f = quantize(x.data(), 16, 256, QuantDType::fp8_e4m3fn, kind);
    const QuantMat i = quantize(x.data(), 16, 256, QuantDType::int8, kind);
    for (std::int64_t r = 0; r < 16; ++r)
      for (std::int64_t c = 0; c < 256; ++c) {
        const double v = x[static_cast<std::size_t>(r * 256 + c)];
        // e4m3: half a step is 2^-4 relative (normals), 2^-10 scales (subnormals); int8: half.
        const double fs = f.scale_at(r, c), is = i.scale_at(r, c);
        EXPECT_LE(std::fabs(f.value(r, c) - v), std::max(std::fabs(v) / 16, fs / 1024) * 1.0001);
        EXPECT_LE(std::fabs(i.value(r, c) - v), is / 2 * 1.0001);
      }
  }
}

TEST(QuantScales, GivenScalesMustMatchTheGrid) {
  const std::vector<float> x = random_matrix(4, 8, 1.0f, 5);
  const QuantMat q =
      quantize_with_scales(x.data(), 4, 8, QuantDType::fp8_e4m3fn, ScaleKind::tensor, {0.5f / 448});
  EXPECT_EQ(q.codes[x.size() / 2], 0xFE);  // -1 / (0.5/448) saturates at -448
  std::string e = error_of(
      [&] { quantize_with_scales(x.data(), 4, 8, QuantDType::int8, ScaleKind::row, {1.0f}); });
  EXPECT_NE(e.find("needs 4"), std::string::npos) << e;
  e = error_of(
      [&] { quantize_with_scales(x.data(), 4, 8, QuantDType::int8, ScaleKind::tensor, {0.0f}); });
  EXPECT_NE(e.find("positive"), std::string::npos) << e;
}

// ---- Fusing shards ------------------------------------------------------------------------------

namespace {

constexpr std::int64_t kM = 8, kK = 128;
const std::vector<std::int64_t> kWidths = {32, 16, 16};  // q, k, v

// q has the largest scale; k's and v's are smaller and not a power of two apart (a power of two
// would only move the exponent, which e4m3 represents exactly).
std::vector<std::vector<float>> qkv_weights() {
  return {random_matrix(32, kK, 1.0f, 11), random_matrix(16, kK, 0.7f, 12),
          random_matrix(16, kK, 0.45f, 13)};
}

std::vector<double> split_product(const QuantMat& x, const std::vector<QuantMat>& shards) {
  std::vector<std::vector<double>> parts;
  for (const QuantMat& s : shards) parts.push_back(dequantized_product(x, s));
  return concat_columns(parts, x.rows);
}

}  // namespace

TEST(QuantFusion, ChannelwiseExpansionReproducesSplitBitwise) {
  const std::vector<float> x = random_matrix(kM, kK, 3.0f, 10);
  for (QuantDType dtype : {QuantDType::fp8_e4m3fn, QuantDType::int8}) {
    const QuantMat xq = quantize(x.data(), kM, kK, dtype, ScaleKind::tensor);
    const std::vector<QuantMat> shards = per_tensor_shards(qkv_weights(), kK, dtype);
    const QuantMat fused = convert_to_channelwise(shards);
    EXPECT_EQ(fused.kind, ScaleKind::row);
    ASSERT_EQ(fused.scales.size(), 64u);
    EXPECT_EQ(fused.scales[31], shards[0].scales[0]);
    EXPECT_EQ(fused.scales[32], shards[1].scales[0]);
    EXPECT_EQ(fused.scales[63], shards[2].scales[0]);
    const std::vector<double> split = split_product(xq, shards);
    const std::vector<double> channelwise = dequantized_product(xq, fused);
    ASSERT_EQ(split.size(), channelwise.size());
    EXPECT_EQ(std::memcmp(split.data(), channelwise.data(), split.size() * sizeof(double)), 0);
    for (double e : quant_error_vs_split(channelwise, split, kM, kWidths)) EXPECT_EQ(e, 0.0);
  }
}

TEST(QuantFusion, MaxScaleRequantizationCostsTheSmallerShardsOnly) {
  const std::vector<float> x = random_matrix(kM, kK, 3.0f, 10);
  const auto weights = qkv_weights();
  const std::vector<double> exact = reference_product(x.data(), stack(weights).data(), kM, kK, 64);
  const QuantMat xq = quantize(x.data(), kM, kK, QuantDType::fp8_e4m3fn, ScaleKind::tensor);
  const std::vector<QuantMat> shards = per_tensor_shards(weights, kK, QuantDType::fp8_e4m3fn);
  const std::vector<double> split = split_product(xq, shards);
  const std::vector<double> split_error = quant_error(split, exact, kM, kWidths);
  for (RequantArithmetic arithmetic : {RequantArithmetic::vllm, RequantArithmetic::exact}) {
    const QuantMat fused = requantize_with_max_scale(shards, arithmetic);
    ASSERT_EQ(fused.scales, (std::vector<float>{shards[0].scales[0]}));
    // The max shard's codes come back unchanged; the others are re-rounded.
    EXPECT_TRUE(std::equal(shards[0].codes.begin(), shards[0].codes.end(), fused.codes.begin()));
    EXPECT_FALSE(
        std::equal(shards[1].codes.begin(), shards[1].codes.end(), fused.codes.begin() + 32 * kK));
    const std::vector<double> y = dequantized_product(xq, fused);
    const std::vector<double> error = quant_error(y, exact, kM, kWidths);
    const std::vector<double> vs_split = quant_error_vs_split(y, split, kM, kWidths);
    EXPECT_EQ(error[0], split_error[0]);
    EXPECT_EQ(vs_split[0], 0.0);
    for (std::size_t s : {1u, 2u}) {
      EXPECT_GT(error[s], split_error[s] * 1.1) << "shard " << s;
      EXPECT_GT(vs_split[s], 0.0) << "shard " << s;
    }
  }
}

TEST(QuantFusion, VllmRequantizationDequantizesThroughFp16) {
  // Code 0x01 (2^-9) at scale 2^-16 is 2^-25: half of fp16's smallest subnormal, so vLLM's fp16
  // dequantization rounds it (ties to even) to 0; exactly, 2^-9 / 1.5 still rounds to 2^-9.
  const QuantMat small{QuantDType::fp8_e4m3fn, ScaleKind::tensor, 1, 1, {0x01},
                       {std::ldexp(1.0f, -16)}};
  const QuantMat max{QuantDType::fp8_e4m3fn,        ScaleKind::tensor, 1, 1, {0x08},
                     {1.5f * std::ldexp(1.0f, -16)}};
  const QuantMat exact = requantize_with_max_scale({small, max}, RequantArithmetic::exact);
  const QuantMat vllm = requantize_with_max_scale({small, max}, RequantArithmetic::vllm);
  EXPECT_EQ(exact.codes, (std::vector<std::uint8_t>{0x01, 0x08}));
  EXPECT_EQ(vllm.codes, (std::vector<std::uint8_t>{0x00, 0x08}));

  // The scale is cast to fp16 first: 0.5625 - 3*2^-14 becomes 0.5625, so code 3.0 (0x44)
  // dequantizes to 1.6875, the tie between 1.625 and 1.75 (even); exactly, 3 * the scale is
  // below the tie and rounds to 1.625.
  const QuantMat three{QuantDType::fp8_e4m3fn,
                       ScaleKind::tensor,
                       1,
                       1,
                       {0x44},
                       {0.5625f - 3 * std::ldexp(1.0f, -14)}};
  const QuantMat one{QuantDType::fp8_e4m3fn, ScaleKind::tensor, 1, 1, {0x38}, {1.0f}};
  EXPECT_EQ(requantize_with_max_scale({three, one}, RequantArithmetic::vllm).codes[0], 0x3E);
  EXPECT_EQ(requantize_with_max_scale({three, one}, RequantArithmetic::exact).codes[0], 0x3D);
}

TEST(QuantFusion, RowAndBlockShardsStackAsTheyAre) {
  const auto weights = qkv_weights();
  const std::vector<float> merged = stack(weights);
  std::vector<QuantMat> rows;
  for (const auto& w : weights)
    rows.push_back(quantize(w.data(), static_cast<std::int64_t>(w.size()) / kK, kK,
                            QuantDType::int8, ScaleKind::row));
  const QuantMat row_fused = concat_rows(rows);
  const QuantMat row_direct = quantize(merged.data(), 64, kK, QuantDType::int8, ScaleKind::row);
  EXPECT_EQ(row_fused.codes, row_direct.codes);
  EXPECT_EQ(row_fused.scales, row_direct.scales);

  // Block shards of 128 and 100 rows: the last may end in a partial block.
  const std::vector<float> a = random_matrix(128, 200, 1.0f, 21),
                           b = random_matrix(100, 200, 0.3f, 22);
  const QuantMat qa = quantize(a.data(), 128, 200, QuantDType::fp8_e4m3fn, ScaleKind::block);
  const QuantMat qb = quantize(b.data(), 100, 200, QuantDType::fp8_e4m3fn, ScaleKind::block);
  const QuantMat block_fused = concat_rows({qa, qb});
  const std::vector<float> ab = stack({a, b});
  const QuantMat block_direct =
      quantize(ab.data(), 228, 200, QuantDType::fp8_e4m3fn, ScaleKind::block);
  EXPECT_EQ(block_fused.codes, block_direct.codes);
  EXPECT_EQ(block_fused.scales, block_direct.scales);
  EXPECT_EQ(error_of([&] {
              concat_rows({qb, qa});
            }),
            "Weight output_partition_size = 100 is not divisible by weight quantization block_n = "
            "128.");
  const std::string e =
      error_of([&] { concat_rows(per_tensor_shards(weights, kK, QuantDType::int8)); });
  EXPECT_NE(e.find("not per-tensor"), std::string::npos) << e;
}

// ---- vLLM's block rule
// ----------------------------------------------------------------------------

TEST(QuantBlockShape, AcceptsAndRefusesInVllmsWords) {
  // Qwen3-0.6B qkv (hidden 1024, q 2048, k and v 1024) at every tp up to its 8 kv heads.
  for (int tp : {1, 2, 4, 8})
    EXPECT_EQ(fp8_block_shape_refusal(1024, 4096, 1024, {2048 / tp, 1024 / tp, 1024 / tp}, tp), "")
        << tp;
  // Qwen3-30B-A3B's 768-wide experts at tp 8: gate/up 96 rows each, down a 96-wide K slice.
  EXPECT_EQ(fp8_block_shape_refusal(2048, 1536, 2048, {96, 96}, 8),
            "Weight output_partition_size = 96 is not divisible by weight quantization block_n = "
            "128.");
  EXPECT_EQ(fp8_block_shape_refusal(768, 2048, 96, {2048}, 8),
            "Weight input_size_per_partition = 96 is not divisible by weight quantization block_k "
            "= 128.");
  EXPECT_NE(fp8_block_shape_refusal(768, 2048, 192, {2048}, 4), "");  // tp 4: 192
  EXPECT_EQ(fp8_block_shape_refusal(768, 2048, 384, {2048}, 2), "");  // tp 2: 384
  // A dense one: intermediate 18944 (Qwen2.5-7B) at tp 8 is 2368 per rank, at tp 4 4736.
  EXPECT_NE(fp8_block_shape_refusal(3584, 37888, 3584, {2368, 2368}, 8).find("= 2368 "),
            std::string::npos);
  EXPECT_EQ(fp8_block_shape_refusal(3584, 37888, 3584, {4736, 4736}, 4), "");
  // Merged without TP: the last part may be partial, an earlier one may not.
  EXPECT_EQ(fp8_block_shape_refusal(256, 228, 256, {128, 100}, 1), "");
  EXPECT_NE(fp8_block_shape_refusal(256, 228, 256, {100, 128}, 1).find("= 100 "),
            std::string::npos);
  // Split by TP: no part is exempt.
  EXPECT_NE(fp8_block_shape_refusal(256, 456, 256, {128, 100}, 2).find("= 100 "),
            std::string::npos);
  // One part, no TP: nothing to check; a row-parallel K of 100 at tp 1 is fine.
  EXPECT_EQ(fp8_block_shape_refusal(100, 100, 100, {100}, 1), "");
}

// ---- References and metrics
// ----------------------------------------------------------------------

TEST(QuantReference, ProductsAndErrorMetricsOnHandComputedCases) {
  const std::vector<float> x = {1.0f, 2.0f}, w = {3.0f, 4.0f, 5.0f, 6.0f};
  EXPECT_EQ(reference_product(x.data(), w.data(), 1, 2, 2), (std::vector<double>{11, 17}));

  // int8: x = [1.25, -0.75] at a static 0.5 -> codes 2, -2 (2.5 and -1.5 tie to even); w
  // dynamic: scale 0.75/127, codes 42 (42.33) and 127.
  const std::vector<float> xi = {1.25f, -0.75f}, wi = {0.25f, 0.75f};
  const QuantMat xq =
      quantize_with_scales(xi.data(), 1, 2, QuantDType::int8, ScaleKind::tensor, {0.5f});
  const QuantMat wq = quantize(wi.data(), 1, 2, QuantDType::int8, ScaleKind::tensor);
  EXPECT_EQ(xq.codes, (std::vector<std::uint8_t>{2, 0xFE}));
  EXPECT_EQ(wq.codes, (std::vector<std::uint8_t>{42, 127}));
  const double sw = 0.75f / 127;
  EXPECT_DOUBLE_EQ(dequantized_product(xq, wq)[0], (2 * 42 - 2 * 127) * 0.5 * sw);

  // quant_error: shard 0 off by 0.5 in one of four values, shard 1 exact.
  const std::vector<double> ref = {1, 2, 3, 4, 1, 2, 3, 4};
  const std::vector<double> y = {1, 2.5, 3, 4, 1, 2, 3, 4};
  const std::vector<double> e = quant_error(y, ref, 2, {2, 2});
  EXPECT_DOUBLE_EQ(e[0], std::sqrt(0.25 / 10));
  EXPECT_EQ(e[1], 0.0);
  // vs split: relative to split's output (the second argument).
  EXPECT_DOUBLE_EQ(quant_error_vs_split(ref, y, 2, {4})[0], std::sqrt(0.25 / 62.25));
  // A zero reference: vs split, 0 when equal and +inf otherwise; quant_error has no figure
  // (NaN), never the 0.0 that reads as exact, and none for a non-finite output (issue 37).
  const std::vector<double> zero(2, 0.0), one = {0.0, 1.0};
  EXPECT_EQ(quant_error_vs_split(zero, zero, 1, {2})[0], 0.0);
  EXPECT_TRUE(std::isinf(quant_error_vs_split(one, zero, 1, {2})[0]));
  EXPECT_TRUE(std::isnan(quant_error(zero, zero, 1, {2})[0]));
  EXPECT_TRUE(std::isnan(quant_error(one, zero, 1, {2})[0]));
  const std::vector<double> inf_out = {std::numeric_limits<double>::infinity(), 1.0},
                            nan_out = {1.0, std::numeric_limits<double>::quiet_NaN()};
  EXPECT_TRUE(std::isnan(quant_error(inf_out, one, 1, {2})[0]));
  EXPECT_TRUE(std::isnan(quant_error(nan_out, one, 1, {2})[0]));
  EXPECT_TRUE(std::isnan(quant_error(one, inf_out, 1, {2})[0]));
  EXPECT_NE(error_of([&] {
              quant_error(y, ref, 2, {2, 3});
            }).find("rows of 5 columns"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              dequantized_product(xq,
                                  quantize(w.data(), 1, 4, QuantDType::int8, ScaleKind::tensor));
            }).find("K 2"),
            std::string::npos);
}
