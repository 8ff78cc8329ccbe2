#pragma once
// The CPU backend's GEMM: y[M,N] = x[M,K] w[N,K]^T (+ bias), row-major (F.linear), fp32 or bf16
// (bf16 in, fp32 accumulate, rounded to bf16 on store). A bias is added in the same library call
// on every path (oneDNN matmul's bias argument; the BLAS calls accumulate onto it, beta = 1),
// before the one rounding, as cuBLASLt's epilogue adds it in its kernel. Which library runs a call
// is a fixed rule, chosen by measurement on the 2-core AVX-512 machine this suite is developed on
// (docs/cpu-gemm.md):
//   fp32, M = 1     -> OpenBLAS cblas_sgemv (sgemm packs the whole weight: 2-3x slower);
//   fp32, M = 2, 3  -> oneDNN dnnl_sgemm (1.5x faster than its matmul primitive there);
//   fp32, M >= 4    -> oneDNN matmul (JIT AVX-512 kernels; OpenBLAS runs Haswell kernels here);
//   bf16            -> oneDNN matmul (native bf16 dot products where the CPU has them).
// Built without oneDNN, every M >= 2 fp32 call is OpenBLAS sgemm and bf16 is widened to fp32
// (or OpenBLAS sbgemm where the build has it); the context says which.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/cpu_int8_gemm.hpp"
#include "fusebench/backend.hpp"

namespace fusebench::cpu {

enum class GemmPath {
  blas_gemv,      // OpenBLAS cblas_sgemv (fp32, one row)
  blas_gemm,      // OpenBLAS cblas_sgemm (fp32)
  blas_sbgemm,    // OpenBLAS cblas_sbgemm (bf16; only where this OpenBLAS has it)
  widened_sgemm,  // bf16 widened to fp32 (exact), cblas_sgemm, rounded to bf16 (timed)
  dnnl_sgemm,     // oneDNN dnnl_sgemm (fp32)
  dnnl_matmul,    // oneDNN matmul primitive (fp32 or bf16)
};
const char* to_string(GemmPath path);

// The dispatch rule (pure, for tests and the report): the path a call of this shape takes.
GemmPath choose_path(DType dtype, std::int64_t m, bool have_dnnl);
// True when this build has oneDNN.
bool dnnl_built();

class CpuGemm {
 public:
  CpuGemm();
  ~CpuGemm();
  CpuGemm(const CpuGemm&) = delete;
  CpuGemm& operator=(const CpuGemm&) = delete;

  // Runs the path choose_path() picks; returns it.
  GemmPath run(const GemmArgs& a);
  // Runs a given path (tests compare paths on one shape); throws std::invalid_argument when the
  // path does not exist in this build or does not take this dtype or shape.
  void run_path(GemmPath path, const GemmArgs& a);
  // A short description of a path as it runs here (library, kernel), for gemm_algorithms.
  std::string describe(GemmPath path, const GemmArgs& a);
  // Library, versions, threading and the dispatch rule, for the report context.
  nlohmann::json context() const;
  // True when oneDNN runs this dtype here (built with it; bf16 also needs a CPU it supports).
  bool dnnl_takes(DType dtype) const;
  // y[M,N] (int32) = x[M,K] w[N,K]^T on int8 operands with row strides ldx, ldw, y dense,
  // exact integer accumulation: oneDNN's int8 matmul where the CPU has VNNI, else our AVX2
  // kernel (cpu_int8_gemm.hpp). With `epilogue`, the scales are applied into its fp32 output
  // too (by the kernel's threads as tiles finish, or after oneDNN's call). False, nothing run,
  // where neither runs here (int8_kernel() is then empty and int8_unavailable() says why).
  bool int8_gemm(const std::int8_t* x, std::int64_t ldx, const std::int8_t* w, std::int64_t ldw,
                 std::int32_t* y, std::int64_t m, std::int64_t n, std::int64_t k,
                 const Int8Epilogue* epilogue = nullptr);
  // The int8 kernel int8_gemm runs ("" where there is none), and why there is none.
  std::string int8_kernel() const;
  std::string int8_unavailable() const;
  // Threads of the libraries' calls made by this object from now on (0: the defaults they had
  // when it was made). Applied before every call on the calling thread (OpenMP's count is per
  // thread; OpenBLAS's is global, set only when it differs); oneDNN primitives are cached per
  // thread count, so one made for 1 thread never runs where 2 are asked for.
  void set_threads(int threads);
  int threads() const;

 private:
  void apply_threads() const;
  int threads_ = 0;
  int default_blas_threads_ = 1;
  int default_omp_threads_ = -1;  // -1: no OpenMP runtime loaded
  struct Dnnl;
  std::unique_ptr<Dnnl> dnnl_;                // null without oneDNN
  std::vector<float> scratch_;                // fp32 result of the bf16 fallbacks
  std::vector<float> widened_x_, widened_w_;  // the widened bf16 operands, kept across calls
};

}  // namespace fusebench::cpu
