#pragma once
// The CPU backend's quantize and scaled GEMM (docs/quant.md). Neither fp8 nor int8 runs natively
// here: the scaled GEMM is an exact emulation, an fp32 GEMM on the decoded code values (every
// fp8 e4m3 and int8 value is exact in fp32) with the scales applied after, per 128-wide K block
// where the scales are blocked. Its times are labelled emulated.
#include "backends/cpu_gemm.hpp"
#include "fusebench/backend.hpp"

namespace fusebench::cpu {

// The same codes and scales as quantize()/quantize_with_scales() on the host (bitwise: the
// verifier's reference quantizes with those).
void quantize(const QuantizeArgs& args);
// y = dequant(x) dequant(w)^T through `gemm`'s fp32 path; one call per 128-wide K block when
// either operand has block or group scales.
void scaled_gemm(CpuGemm& gemm, const ScaledGemmArgs& args);
// What quant_execution() says for the CPU.
std::string emulation(QuantDType dtype);

}  // namespace fusebench::cpu
