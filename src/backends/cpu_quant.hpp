#pragma once
// The CPU backend's quantize and scaled GEMM (docs/quant.md). INT8 runs for real where oneDNN
// has an s8 x s8 -> s32 matmul (exact integer accumulation; the scales applied after by a host
// loop). FP8 has no instructions here: its scaled GEMM is an exact emulation, an fp32 GEMM on the
// decoded code values (every fp8 e4m3 value is exact in fp32) with the scales applied after, and
// its times are labelled emulated. Both run one GEMM per 128-wide K block where scales are blocked.
#include "backends/cpu_gemm.hpp"
#include "fusebench/backend.hpp"

namespace fusebench::cpu {

// The same codes and scales as quantize()/quantize_with_scales() on the host (bitwise: the
// verifier's reference quantizes with those), on `threads` OpenMP threads.
void quantize(const QuantizeArgs& args, int threads);
// y = dequant(x) dequant(w)^T through `gemm`'s fp32 path; one call per 128-wide K block when
// either operand has block or group scales.
void scaled_gemm(CpuGemm& gemm, const ScaledGemmArgs& args);
// What quant_execution() says for the CPU: "native: ..." or "emulated: ...".
std::string execution(const CpuGemm& gemm, QuantDType dtype);

}  // namespace fusebench::cpu
