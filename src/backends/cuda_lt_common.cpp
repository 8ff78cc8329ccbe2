#include "backends/cuda_lt_common.hpp"

#include <cstdint>
#include <sstream>
#include <stdexcept>

#include "backends/cuda_check.hpp"

namespace fusebench::cuda {

void destroy(LtPlan& p) noexcept {
  if (p.a != nullptr) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b != nullptr) cublasLtMatrixLayoutDestroy(p.b);
  if (p.c != nullptr) cublasLtMatrixLayoutDestroy(p.c);
  if (p.desc != nullptr) cublasLtMatmulDescDestroy(p.desc);
  p.a = p.b = p.c = nullptr;
  p.desc = nullptr;
}

std::string describe_algo(const cublasLtMatmulAlgo_t& algo) {
  // Each attribute must be read at its own size (cublasLt.h): a mismatched sizeInBytes returns
  // CUBLAS_STATUS_INVALID_VALUE and the report showed 0 (the cluster shape id is uint16_t).
  const auto attr = [&]<class T>(cublasLtMatmulAlgoConfigAttributes_t which, T) -> long long {
    T v = 0;
    std::size_t written = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&algo, which, &v, sizeof(v), &written);
    return static_cast<long long>(v);
  };
  std::ostringstream out;
  out << "algo=" << attr(CUBLASLT_ALGO_CONFIG_ID, std::int32_t{})
      << " tile=" << attr(CUBLASLT_ALGO_CONFIG_TILE_ID, std::uint32_t{})
      << " stages=" << attr(CUBLASLT_ALGO_CONFIG_STAGES_ID, std::uint32_t{})
      << " splitk=" << attr(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, std::int32_t{})
      << " cluster=" << attr(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, std::uint16_t{});
  return out.str();
}

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return CUDA_R_32F;
    case DType::f16:
      return CUDA_R_16F;
    case DType::bf16:
      return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

void refuse_inside_capture(cudaStream_t stream, const char* what) {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  FUSEBENCH_CUDA(cudaStreamIsCapturing(stream, &capturing));
  if (capturing != cudaStreamCaptureStatusNone) {
    throw std::logic_error(std::string(what) +
                           " inside a graph capture: run the region once before capturing it");
  }
}

}  // namespace fusebench::cuda
