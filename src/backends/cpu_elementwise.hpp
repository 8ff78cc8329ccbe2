#pragma once
// The CPU backend's elementwise steps (activation-and-multiply, bias, MoE gather/scatter/combine,
// the sigmoid gate, RMSNorm, fp32 results into a plan's dtype), vectorized and on the backend's
// OpenMP threads, so that the glue around a GEMM runs near the machine's copy bandwidth instead
// of deciding what the suite reports (a scalar loop with a dtype switch per element took 23 of
// gate_up's 31 ms at 1024 tokens on a Xeon). Each is compiled for AVX-512, AVX2 and plain x86-64
// and picked once by what the CPU offers (isa()).
#include <cstdint>
#include <span>
#include <string>

#include "backends/cpu_int8_gemm.hpp"
#include "fusebench/backend.hpp"

namespace fusebench::cpu {

// The instruction set the elementwise kernels run with here: "avx512", "avx2" or "x86-64".
std::string elementwise_isa();

void act_and_mul(const ActAndMulArgs& a, int threads);
// y[r, c] += bias[c] for a [N, 1] bias of y's dtype.
void add_bias(const MatRef& y, const MatRef& bias, int threads);
// dst row i = scale[i] * src row rows[i] (zero where rows[i] < 0), rounded to dst's dtype.
void gather_scaled(const MatRef& src, const MatRef& dst, std::span<const std::int64_t> rows,
                   std::span<const float> scale, int threads);
// dst row rows[i] += scale[i] * src row i, in dst's dtype after every add (a combine kernel
// accumulating into its output); dst zeroed first when zero_dst.
void scatter_add(const MatRef& src, const MatRef& dst, std::span<const std::int64_t> rows,
                 std::span<const float> scale, bool zero_dst, int threads);
// x row r *= sigmoid(gate[r, 0]).
void sigmoid_gate_rows(const MatRef& x, const MatRef& gate, int threads);
void rms_norm(const MatRef& x, const MatRef& weight, const MatRef& out, float eps, int threads);
// apply_int8_epilogue over all m rows of y (dense, ld n) on `threads` threads, vectorized: the
// scale epilogue after a library's int32 (or the fp8 emulation's fp32) products.
void int8_epilogue(const Int8Epilogue& e, const std::int32_t* y, std::int64_t m, std::int64_t n,
                   int threads);
void int8_epilogue(const Int8Epilogue& e, const float* y, std::int64_t m, std::int64_t n,
                   int threads);
// A quantized matrix's codes as fp32 values (exact), dense [rows, cols] into out: what the fp8
// emulation (and int8 without a native kernel) multiplies.
void decode_codes(const QuantRef& q, float* out, int threads);
// An fp32 [rows, cols] result (row stride ld) into out, rounded to out's dtype.
void store_rows(const float* src, std::int64_t ld, const MatRef& out, int threads);

}  // namespace fusebench::cpu
