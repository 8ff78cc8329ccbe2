#pragma once
// NCCL all-gathers rank-major ([ranks][rows][cols]); a column-parallel output is wanted as
// [rows][ranks * cols]. One kernel lays it out, as vLLM's all-gather does with one movedim copy,
// instead of one 2D copy per rank (which would bill the naive pipeline tp - 1 extra launches).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace fusebench::comm {

// dst[row][r * cols + c] = stage[r][row][c]; `elem` bytes per element (2 or 4), `ld` dst's
// leading dimension in elements.
cudaError_t launch_gather_columns(const void* stage, void* dst, std::int64_t rows,
                                  std::int64_t cols, std::int64_t ld, int ranks, std::size_t elem,
                                  cudaStream_t stream);

}  // namespace fusebench::comm
