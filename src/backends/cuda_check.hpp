#pragma once
// Turns CUDA and cuBLAS status codes into exceptions that name the call and the error.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace fusebench::detail {

inline void check_cuda(cudaError_t err, const char* call) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(err));
}
inline void check_cublas(cublasStatus_t st, const char* call) {
  if (st != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(call) + ": " + cublasLtGetStatusName(st) + " (" +
                             cublasLtGetStatusString(st) + ")");
  }
}

}  // namespace fusebench::detail

#define FUSEBENCH_CUDA(call) ::fusebench::detail::check_cuda((call), #call)
#define FUSEBENCH_CUBLAS(call) ::fusebench::detail::check_cublas((call), #call)
