#pragma once
// Element types the suite benchmarks, and their host-side conversions.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fusebench {

enum class DType { f32, f16, bf16 };

std::string_view to_string(DType dtype);
// Accepts "fp32|f32|float32", "fp16|f16|float16|half", "bf16|bfloat16"; throws
// std::invalid_argument naming the bad value and the valid ones.
DType parse_dtype(std::string_view text);
std::size_t dtype_size(DType dtype);

// Round-to-nearest-even conversions used to build inputs and read outputs on the host.
std::uint16_t float_to_bf16(float value);
float bf16_to_float(std::uint16_t bits);
std::uint16_t float_to_f16(float value);
float f16_to_float(std::uint16_t bits);

// Packs floats into the byte layout of `dtype` (and back).
std::vector<std::byte> encode(const std::vector<float>& values, DType dtype);
std::vector<float> decode(const std::byte* data, std::size_t count, DType dtype);

}  // namespace fusebench
