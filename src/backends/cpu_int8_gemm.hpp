#pragma once
// An exact int8 GEMM for x86 CPUs with AVX2 and no VNNI, where oneDNN 2.x's int8 kernels sum
// u8*s8 pairs in int16 (vpmaddubsw) and saturate on full-range codes (cpu_gemm.cpp). Here both
// operands are widened to int16 and multiplied with vpmaddwd, whose pair sums are int32: exact
// for every int8 code, -128 included. docs/quant.md, "What runs".
#include <cstdint>
#include <string>

namespace fusebench::cpu {

// True when this CPU runs int8_gemm_avx2 (AVX2; checked at run time, the file is built for any
// x86-64).
bool int8_avx2_available();

// The largest K int8_gemm_avx2 takes: every partial sum of K products of codes in [-128, 127]
// fits an int32.
constexpr std::int64_t kInt8AvxMaxK = std::int64_t{1} << 17;

// The scales of a scaled GEMM, applied by the threads as their tiles finish: out[i][j]
// (+)= y[i][j] * (row_scale[i] * col_scale[j]) in fp32 (out dense, ld N); or, with out_bf16, that
// fp32 value rounded to bf16 (nearest even) and written at out_bf16[i * ld_bf16 + j], so that a
// bf16 output needs no further pass over the result.
struct Int8Epilogue {
  const float* row_scale = nullptr;
  const float* col_scale = nullptr;
  float* out = nullptr;
  bool accumulate = false;
  std::uint16_t* out_bf16 = nullptr;  // instead of out (accumulate must be false)
  std::int64_t ld_bf16 = 0;
};

// The epilogue on rows [i0, i0 + rows) x columns [n0, n0 + cols) of y (dense, ld n): what the
// kernel's threads run on each finished tile, and what a caller runs on another kernel's y
// (oneDNN's int32 products, or the fp32 products of the fp8 emulation's GEMM).
void apply_int8_epilogue(const Int8Epilogue& e, const std::int32_t* y, std::int64_t n,
                         std::int64_t i0, std::int64_t rows, std::int64_t n0, std::int64_t cols);
void apply_int8_epilogue(const Int8Epilogue& e, const float* y, std::int64_t n, std::int64_t i0,
                         std::int64_t rows, std::int64_t n0, std::int64_t cols);

// y[M,N] (int32, dense, ld N) = x[M,K] w[N,K]^T with row strides ldx, ldw, on `threads` OpenMP
// threads (columns split between them). The weight is packed (widened, 16 columns a panel) on
// every call: nothing is cached between calls, as a layer whose weight changes would need.
// Throws std::invalid_argument where the CPU lacks AVX2 or K is over kInt8AvxMaxK.
void int8_gemm_avx2(const std::int8_t* x, std::int64_t ldx, const std::int8_t* w, std::int64_t ldw,
                    std::int32_t* y, std::int64_t m, std::int64_t n, std::int64_t k, int threads,
                    const Int8Epilogue* epilogue = nullptr);

// What the kernel is, for the report's execution labels.
std::string int8_avx2_description();

}  // namespace fusebench::cpu
