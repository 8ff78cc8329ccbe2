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

std::string Backend::quant_unsupported_reason(QuantDType dtype) const {
  return "the " + name() + " backend has no " + std::string(to_string(dtype)) +
         " quantize or scaled GEMM yet (its cuBLASLt FP8 path is still to come: issue 29)";
}

void Backend::quantize(const QuantizeArgs& args) {
  throw std::runtime_error(quant_unsupported_reason(args.out.dtype));
}

void Backend::scaled_gemm(const ScaledGemmArgs& args) {
  throw std::runtime_error(quant_unsupported_reason(args.w.dtype));
}

void Backend::gather_rows(const MatRef&, const MatRef&, std::span<const std::int64_t>) {
  throw std::runtime_error("the " + name() + " backend has no row gather (the moe op)");
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
