#pragma once
// Host entry points of the few CUDA kernels the suite owns (cuda_kernels.cu).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "fusebench/dtype.hpp"

namespace fusebench::cuda {

// out[r, c] = silu(gate[r, c]) * up[r, c] over rows x cols; each operand has its own leading
// dimension so gate and up may be the two halves of one fused output.
cudaError_t launch_silu_mul(const void* gate, std::int64_t ld_gate, const void* up,
                            std::int64_t ld_up, void* out, std::int64_t ld_out, std::int64_t rows,
                            std::int64_t cols, DType dtype, cudaStream_t stream);

// out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight over rows x cols, fp32 accumulation
// (one block per row); weight is one row of cols elements.
cudaError_t launch_rms_norm(const void* x, std::int64_t ld_x, const void* weight, void* out,
                            std::int64_t ld_out, std::int64_t rows, std::int64_t cols, float eps,
                            DType dtype, cudaStream_t stream);

// Evicts L2 by reading `bytes` (a multiple of 16, zero-filled once by the caller) of `buffer`
// through it; `sink` is a device int the kernel only writes if the data were not zero.
cudaError_t launch_evict_l2(const void* buffer, std::size_t bytes, int* sink, int blocks,
                            cudaStream_t stream);

}  // namespace fusebench::cuda
