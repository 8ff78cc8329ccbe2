#pragma once
// What the cuda backend's bf16 GEMMs (cuda_backend.cpp) and its scaled GEMMs (cuda_lt_scaled.cpp)
// share: a cuBLASLt plan, its description, dtype mapping, and the capture guard.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "fusebench/dtype.hpp"

namespace fusebench::cuda {

constexpr std::size_t kWorkspaceBytes = 32u << 20;  // cuBLASLt workspace, as PyTorch uses on sm90
constexpr std::size_t kMaxLoggedAlgorithms = 64;    // algorithm log entries kept between takes

// One cuBLASLt matmul configuration per distinct shape, built once and reused.
struct LtPlan {
  cublasLtMatmulDesc_t desc{};
  cublasLtMatrixLayout_t a{}, b{}, c{};
  cublasLtMatmulAlgo_t algo{};
  std::string algo_text;
};
void destroy(LtPlan& p) noexcept;  // null handles are skipped

std::string describe_algo(const cublasLtMatmulAlgo_t& algo);
cudaDataType_t cuda_type(DType dtype);

// Throws when `stream` is being captured: `what` would allocate or synchronise, which breaks a
// capture with an obscure error far from the cause.
void refuse_inside_capture(cudaStream_t stream, const char* what);

}  // namespace fusebench::cuda
