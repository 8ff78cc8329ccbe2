#include "fusebench/backend.hpp"

#include <atomic>
#include <stdexcept>

namespace fusebench {
namespace {
std::atomic<int> g_host_thread_budget{0};
}  // namespace

void Backend::set_host_thread_budget(int threads) {
  g_host_thread_budget = threads < 0 ? 0 : threads;
}
int Backend::host_thread_budget() { return g_host_thread_budget; }

void Backend::gemm_grouped(std::span<const GemmArgs>) {
  throw std::runtime_error("the " + name() + " backend has no grouped GEMM");
}

void Backend::gemm_batched(std::span<const GemmArgs>) {
  throw std::runtime_error("the " + name() + " backend has no batched GEMM");
}

std::string Backend::quant_unsupported_reason(const QuantSpec& spec) const {
  return "the " + name() + " backend has no " + std::string(to_string(spec.dtype)) +
         " quantize or scaled GEMM";
}

void Backend::quantize(const QuantizeArgs& args) {
  throw std::runtime_error(quant_unsupported_reason(QuantSpec{args.out.dtype}));
}

void Backend::scaled_gemm(const ScaledGemmArgs& args) {
  throw std::runtime_error(quant_unsupported_reason(QuantSpec{args.w.dtype}));
}

void Backend::scaled_gemm_grouped(std::span<const ScaledGemmArgs> gemms) {
  throw std::runtime_error("the " + name() + " backend has no grouped scaled GEMM" +
                           (gemms.empty()
                                ? std::string{}
                                : " (" + std::to_string(gemms.size()) + " members asked for)"));
}

std::string cuda_quant_refusal(const QuantSpec& spec) {
  // What the cuda backend's scaled GEMM takes (backends/cuda_scaled_gemm.hpp): fp8 at every
  // granularity, int8 per tensor and per channel/token. Shape rules (int8's multiples of 4, the
  // block scales' row stride) are the call's, named when it is made.
#if defined(FUSEBENCH_HAVE_CUDA) && !defined(FUSEBENCH_CUDA_FP8_GEMM)
  // cmake/CudaFeatures.cmake left it out: the toolkit this was built with is below 12.9.
  if (spec.dtype == QuantDType::fp8_e4m3fn)
    return "fp8 on cuda: this build's CUDA toolkit is older than 12.9, whose cuBLASLt first has "
           "the scale modes (OUTER_VEC_32F, VEC128_32F, BLK128x128_32F) the fp8 scaled GEMM "
           "sets; int8 and bf16 run";
#endif
  if (spec.dtype == QuantDType::int8 && spec.weights == WeightScales::block)
    return "int8 with 128x128 weight blocks on cuda: cuBLASLt's int8 matmul applies no scales "
           "along K, and a K-blocked int8 GEMM is not written (int8 per tensor and per channel "
           "run, and fp8 with 128x128 blocks)";
  return {};
}

void Backend::gather_rows(const MatRef&, const MatRef&, std::span<const std::int64_t>,
                          std::span<const float>) {
  throw std::runtime_error("the " + name() + " backend has no row gather (the moe op)");
}

void Backend::sigmoid_gate_rows(const MatRef&, const MatRef&) {
  throw std::runtime_error("the " + name() + " backend has no sigmoid row gate (the moe op)");
}

void Backend::scatter_add(const MatRef&, const MatRef&, std::span<const std::int64_t>,
                          std::span<const float>, bool) {
  throw std::runtime_error("the " + name() + " backend has no scatter-add (the moe op)");
}

BackendKind parse_backend_kind(const std::string& text) {
  if (text == "auto") return BackendKind::automatic;
  if (text == "cuda") return BackendKind::cuda;
  if (text == "cpu") return BackendKind::cpu;
  throw std::invalid_argument("unknown backend '" + text + "' (valid: auto, cuda, cpu)");
}

BackendChoice make_backend(BackendKind kind) {
  if (kind == BackendKind::cpu) return {make_cpu_backend(), "requested with --backend=cpu"};
  std::string why;
  auto cuda = make_cuda_backend(&why);
  if (cuda) return {std::move(cuda), "CUDA device found"};
  if (kind == BackendKind::cuda) {
    throw std::runtime_error("--backend=cuda requested but the CUDA backend is unusable: " + why);
  }
  return {make_cpu_backend(), why + "; running the CPU backend"};
}

}  // namespace fusebench
