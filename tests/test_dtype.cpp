#include <gtest/gtest.h>

#include <cmath>

#include "fusebench/dtype.hpp"

using namespace fusebench;

TEST(DType, ParsesNamesAndRejectsUnknownWithValidList) {
  EXPECT_EQ(parse_dtype("bf16"), DType::bf16);
  EXPECT_EQ(parse_dtype("float16"), DType::f16);
  EXPECT_EQ(parse_dtype("fp32"), DType::f32);
  try {
    parse_dtype("int8");
    FAIL() << "int8 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("int8"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("bf16, fp16, fp32"), std::string::npos);
  }
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3*2^-8 ties up to 1 + 2^-6 (even mantissa).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))),
            1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(bf16_to_float(float_to_bf16(-2.5f)), -2.5f);
}

TEST(DType, F16RoundTripsNormalsSubnormalsAndSpecials) {
  for (float v : {1.0f, -0.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.0f}) {
    EXPECT_EQ(f16_to_float(float_to_f16(v)), v) << v;
  }
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
  EXPECT_TRUE(std::isinf(f16_to_float(float_to_f16(1e6f))));
  EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(std::nanf("")))));
  // Relative error of a normal value stays within half an ulp (2^-11).
  const float x = 0.1234567f;
  EXPECT_LE(std::abs(f16_to_float(float_to_f16(x)) - x) / x, std::ldexp(1.0f, -11));
}

TEST(DType, EncodeDecodeRoundTrip) {
  const std::vector<float> values = {0.25f, -1.5f, 3.0f};
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
    const auto bytes = encode(values, d);
    EXPECT_EQ(bytes.size(), values.size() * dtype_size(d));
    EXPECT_EQ(decode(bytes.data(), values.size(), d), values);
  }
}
