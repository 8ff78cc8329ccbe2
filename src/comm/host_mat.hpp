#pragma once
// Column all-gather helpers of the CPU communicators (element access: backends/host_mat.hpp).
#include "backends/host_mat.hpp"

namespace fusebench::comm {

// The block of `dst` that rank `r` owns in a column all-gather of `src`-shaped pieces.
inline MatRef gather_block(const MatRef& dst, const MatRef& src, int r) {
  MatRef b = dst;
  b.data = static_cast<std::byte*>(dst.data) +
           static_cast<std::size_t>(r * src.cols) * dtype_size(dst.dtype);
  b.cols = src.cols;
  return b;
}

// Throws unless dst is [src.rows, size * src.cols] of the same dtype.
void check_gather_shapes(const MatRef& src, const MatRef& dst, int size, const char* who);

}  // namespace fusebench::comm
