#pragma once
// The cuda backend's quantize and scaled GEMM calls (docs/quant.md, "On the GPU"; the calls as
// data in cuda_scaled_gemm.hpp): our quantize kernels; fp8 as cuBLASLt's e4m3 matmul with the
// scales applied inside it; int8 as cuBLASLt's s8 x s8 -> s32 matmul, then our dequantize kernel.
// The state they keep (plans per shape, the int8 accumulators, the amax word, the ones vector)
// lives here, apart from the bf16 GEMMs of cuda_backend.cpp.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/cuda_lt_common.hpp"
#include "backends/cuda_scaled_gemm.hpp"
#include "fusebench/backend.hpp"

namespace fusebench::cuda {

class LtScaledGemm {
 public:
  // `lt` and `workspace` (kWorkspaceBytes) are the backend's; `owner.allocate` grows the int8
  // accumulators (its OutOfMemory names the size); `log` records each plan's algorithm.
  LtScaledGemm(cublasLtHandle_t lt, void* workspace, Backend& owner,
               std::function<void(const std::string&)> log);
  ~LtScaledGemm();
  LtScaledGemm(const LtScaledGemm&) = delete;
  LtScaledGemm& operator=(const LtScaledGemm&) = delete;

  void quantize(const QuantizeArgs& a, cudaStream_t stream);
  // `lane` picks the int8 accumulator: two lanes' GEMMs may overlap.
  void scaled_gemm(const ScaledGemmArgs& a, cudaStream_t stream, int lane);

 private:
  LtPlan make_plan(const ScaledGemmArgs& g, const ScaledGemmCall& call, const LtAlignments& align);
  std::int32_t* accumulator(int lane, std::size_t bytes, cudaStream_t stream);
  const float* unit_scales(std::int64_t count, cudaStream_t stream);

  cublasLtHandle_t lt_;
  void* workspace_;
  Backend& owner_;
  std::function<void(const std::string&)> log_;
  std::map<QuantPlanKey, LtPlan> plans_;
  unsigned* amax_scratch_ = nullptr;  // the dynamic per-tensor quantize's reduction word
  struct Accumulator {
    std::int32_t* data = nullptr;
    std::size_t bytes = 0;
  };
  std::array<Accumulator, 2> accumulators_{};
  // [0, 0, 0, 0, 1, 1, ...]: beta (a device zero) and the vector of ones an OUTER_VEC_32F operand
  // with a per-tensor scale reads (16-byte aligned, from element 4). Grown, never rewritten or
  // freed while the backend lives: a captured graph may hold an older one.
  std::vector<float*> unit_scales_;
  std::int64_t unit_count_ = 0;
};

}  // namespace fusebench::cuda
