#include "fusebench/dtype.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace fusebench {

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "fp32";
    case DType::f16:
      return "fp16";
    case DType::bf16:
      return "bf16";
  }
  return "?";
}

DType parse_dtype(std::string_view text) {
  if (text == "fp32" || text == "f32" || text == "float32") return DType::f32;
  if (text == "fp16" || text == "f16" || text == "float16" || text == "half") return DType::f16;
  if (text == "bf16" || text == "bfloat16") return DType::bf16;
  throw std::invalid_argument("unknown dtype '" + std::string(text) +
                              "' (valid: bf16, fp16, fp32)");
}

std::size_t dtype_size(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

std::uint16_t float_to_bf16(float value) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest even
  return static_cast<std::uint16_t>(bits >> 16);
}

float bf16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t float_to_f16(float value) {
  // IEEE binary16 with round to nearest even, handling subnormals, infinities and NaN.
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000;
  const std::uint32_t abs = x & 0x7fffffff;
  if (abs >= 0x7f800000)
    return static_cast<std::uint16_t>(sign | (abs > 0x7f800000 ? 0x7e00 : 0x7c00));
  if (abs >= 0x477ff000) return static_cast<std::uint16_t>(sign | 0x7c00);  // overflow to inf
  if (abs < 0x38800000) {  // subnormal or zero in half
    if (abs < 0x33000000) return static_cast<std::uint16_t>(sign);
    const std::uint32_t mant = (abs & 0x7fffff) | 0x800000;
    const int shift = 126 - static_cast<int>(abs >> 23);  // value = half * 2^-24
    std::uint32_t half = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = ((abs - 0x38000000) >> 13);
  const std::uint32_t rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return static_cast<std::uint16_t>(sign | half);
}

float f16_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1f;
  const std::uint32_t mant = bits & 0x3ff;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000 | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

std::vector<std::byte> encode(const std::vector<float>& values, DType dtype) {
  std::vector<std::byte> out(values.size() * dtype_size(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::f32) {
      std::memcpy(out.data() + 4 * i, &values[i], 4);
    } else {
      const std::uint16_t h =
          dtype == DType::bf16 ? float_to_bf16(values[i]) : float_to_f16(values[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

std::vector<float> decode(const std::byte* data, std::size_t count, DType dtype) {
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (dtype == DType::f32) {
      std::memcpy(&out[i], data + 4 * i, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      out[i] = dtype == DType::bf16 ? bf16_to_float(h) : f16_to_float(h);
    }
  }
  return out;
}

}  // namespace fusebench
