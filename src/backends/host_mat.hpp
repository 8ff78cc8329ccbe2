#pragma once
// Host-side element and row access to a strided MatRef of any dtype: the CPU backend's loops and
// the CPU communicators read and write matrices through these.
#include <cstring>
#include <vector>

#include "fusebench/backend.hpp"

namespace fusebench {

inline float load(const MatRef& m, std::int64_t r, std::int64_t c) {
  const std::size_t i = static_cast<std::size_t>(r * m.ld + c);
  switch (m.dtype) {
    case DType::f32:
      return static_cast<const float*>(m.data)[i];
    case DType::bf16:
      return bf16_to_float(static_cast<const std::uint16_t*>(m.data)[i]);
    case DType::f16:
      return f16_to_float(static_cast<const std::uint16_t*>(m.data)[i]);
  }
  return 0;
}

inline void store(const MatRef& m, std::int64_t r, std::int64_t c, float v) {
  const std::size_t i = static_cast<std::size_t>(r * m.ld + c);
  switch (m.dtype) {
    case DType::f32:
      static_cast<float*>(m.data)[i] = v;
      break;
    case DType::bf16:
      static_cast<std::uint16_t*>(m.data)[i] = float_to_bf16(v);
      break;
    case DType::f16:
      static_cast<std::uint16_t*>(m.data)[i] = float_to_f16(v);
      break;
  }
}

// Raw bytes of a strided matrix, row by row, and back.
inline std::vector<std::byte> pack(const MatRef& m) {
  const std::size_t row = static_cast<std::size_t>(m.cols) * dtype_size(m.dtype);
  std::vector<std::byte> out(row * static_cast<std::size_t>(m.rows));
  for (std::int64_t r = 0; r < m.rows; ++r) {
    std::memcpy(out.data() + static_cast<std::size_t>(r) * row,
                static_cast<const std::byte*>(m.data) +
                    static_cast<std::size_t>(r * m.ld) * dtype_size(m.dtype),
                row);
  }
  return out;
}

inline void unpack(const std::byte* src, const MatRef& m) {
  const std::size_t row = static_cast<std::size_t>(m.cols) * dtype_size(m.dtype);
  for (std::int64_t r = 0; r < m.rows; ++r) {
    std::memcpy(
        static_cast<std::byte*>(m.data) + static_cast<std::size_t>(r * m.ld) * dtype_size(m.dtype),
        src + static_cast<std::size_t>(r) * row, row);
  }
}

}  // namespace fusebench
