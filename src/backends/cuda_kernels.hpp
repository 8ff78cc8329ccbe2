#pragma once
// Host entry points of the few CUDA kernels the suite owns (cuda_kernels.cu).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "fusebench/activation.hpp"
#include "fusebench/dtype.hpp"

namespace fusebench::cuda {

// out[r, c] = act(gate[r, c * col_stride]) * up[r, c * col_stride] over rows x cols; each
// operand has its own leading dimension so gate and up may be the two halves of one fused output
// (col_stride 1) or its even and odd columns (col_stride 2, gpt-oss's interleaved w13). `limit`
// is swigluoai's clamp.
cudaError_t launch_act_and_mul(Activation act, float limit, const void* gate, std::int64_t ld_gate,
                               const void* up, std::int64_t ld_up, std::int64_t col_stride,
                               void* out, std::int64_t ld_out, std::int64_t rows, std::int64_t cols,
                               DType dtype, cudaStream_t stream);

// y[r, c] += bias[c] for every member, in one launch (up to kMaxBiasAddMembers members, all with
// `rows` rows): the separate kernel of a GEMM without a bias epilogue.
struct BiasAddMember {
  void* y = nullptr;
  const void* bias = nullptr;
  std::int64_t ld = 0, cols = 0;
};
inline constexpr int kMaxBiasAddMembers = 4;
cudaError_t launch_bias_add(const BiasAddMember* members, int count, std::int64_t rows, DType dtype,
                            cudaStream_t stream);

// out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight over rows x cols, fp32 accumulation
// (one block per row); weight is one row of cols elements.
cudaError_t launch_rms_norm(const void* x, std::int64_t ld_x, const void* weight, void* out,
                            std::int64_t ld_out, std::int64_t rows, std::int64_t cols, float eps,
                            DType dtype, cudaStream_t stream);

// The moe op's routing (GatherRowsStep, ScatterAddStep): device arrays the caller uploaded.
// dst[i, :] = src[rows[i], :] for i < dst_rows; a row index < 0 writes a zero row (padding).
// With `scale` (device, one per dst row; nullptr: a copy), dst[i, :] = scale[i] * src[rows[i], :]
// in fp32, rounded to the dtype once (the CPU backend's rounding).
cudaError_t launch_gather_rows(const void* src, std::int64_t ld_src, void* dst, std::int64_t ld_dst,
                               const std::int64_t* rows, const float* scale, std::int64_t dst_rows,
                               std::int64_t cols, DType dtype, cudaStream_t stream);
// x[r, :] *= sigmoid(gate[r * ld_gate]) for r < rows, in fp32, rounded once (the moe op's gated
// shared expert, SigmoidGateRowsStep).
cudaError_t launch_sigmoid_gate_rows(void* x, std::int64_t ld_x, const void* gate,
                                     std::int64_t ld_gate, std::int64_t rows, std::int64_t cols,
                                     DType dtype, cudaStream_t stream);
// For every dst row r: acc = zero_dst ? 0 : dst[r, :], then for j in offsets[r]..offsets[r+1]
// (the source rows routed to r, in ascending order) acc = round(acc + scale[j] * src[src_rows[j],
// :]) in dst's dtype after every add, dst[r, :] = acc: the CPU backend's order and roundings, and
// no atomics, so the result is deterministic.
cudaError_t launch_scatter_add(const void* src, std::int64_t ld_src, void* dst, std::int64_t ld_dst,
                               const std::int64_t* offsets, const std::int64_t* src_rows,
                               const float* scale, std::int64_t dst_rows, std::int64_t cols,
                               bool zero_dst, DType dtype, cudaStream_t stream);

// Evicts L2 by reading `bytes` (a multiple of 16, zero-filled once by the caller) of `buffer`
// through it; `sink` is a device int the kernel only writes if the data were not zero.
cudaError_t launch_evict_l2(const void* buffer, std::size_t bytes, int* sink, int blocks,
                            cudaStream_t stream);

}  // namespace fusebench::cuda
