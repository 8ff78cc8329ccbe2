// CPU backend: GEMMs through cpu_gemm (OpenBLAS sgemv for one-row fp32 products, oneDNN matmul
// otherwise; see cpu_gemm.hpp), elementwise steps as loops. Used where no GPU is present, and as
// a second implementation the tests compare against.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "backends/cpu_gemm.hpp"
#include "backends/cpu_memory.hpp"
#include "core/host_mat.hpp"
#include "fusebench/backend.hpp"

namespace fusebench {
namespace {

class SteadyTimer final : public RegionTimer {
 public:
  void start() override { begin_ = std::chrono::steady_clock::now(); }
  void stop() override { end_ = std::chrono::steady_clock::now(); }
  double seconds() override { return std::chrono::duration<double>(end_ - begin_).count(); }

 private:
  std::chrono::steady_clock::time_point begin_, end_;
};

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }

  std::string unsupported_reason(DType dtype) const override {
    if (dtype == DType::f32 || dtype == DType::bf16) return {};
    return "the CPU backend (OpenBLAS, oneDNN) has no " + std::string(to_string(dtype)) +
           " GEMM; use fp32 or bf16";
  }

  void* allocate(std::size_t bytes) override {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    const double total = static_cast<double>(pages) * static_cast<double>(page);
    if (static_cast<double>(bytes) > 0.8 * total) {
      throw OutOfMemory(
          "allocation of " + std::to_string(bytes >> 20) + " MiB exceeds 80% of the " +
          std::to_string(static_cast<long long>(total) >> 20) + " MiB of host memory");
    }
    void* p = cpu::allocate_host(bytes);
    if (p == nullptr)
      throw OutOfMemory("host allocation of " + std::to_string(bytes) + " bytes failed");
    return p;
  }
  void release(void* ptr) noexcept override { std::free(ptr); }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }

  void gemm(const GemmArgs& a) override {
    ++calls_;
    const cpu::GemmPath path = gemm_.run(a);
    if (algorithm_log_.size() < kMaxLoggedAlgorithms)
      algorithm_log_.push_back(gemm_.describe(path, a));
  }
  std::vector<std::string> take_algorithm_log() override {
    return std::exchange(algorithm_log_, {});
  }

  // Grouped/batched GEMMs run as a loop of BLAS calls (k library calls, counted as such) so
  // the one-launch variants are checked for correctness here; they are not timed on the CPU.
  void gemm_grouped(std::span<const GemmArgs> gemms) override {
    for (const auto& g : gemms) gemm(g);
  }
  void gemm_batched(std::span<const GemmArgs> gemms) override {
    for (const auto& g : gemms) gemm(g);
  }
  std::string one_launch_gemm_caveat() const override {
    return "the CPU backend runs grouped/batched GEMMs as a loop of BLAS calls, not one launch";
  }

  void silu_mul(const MatRef& gate, const MatRef& up, const MatRef& out) override {
    ++calls_;
    for (std::int64_t r = 0; r < out.rows; ++r) {
      for (std::int64_t c = 0; c < out.cols; ++c) {
        const float g = load(gate, r, c);
        store(out, r, c, g / (1.0f + std::exp(-g)) * load(up, r, c));
      }
    }
  }

  void synchronize() override {}
  std::unique_ptr<RegionTimer> make_timer() override { return std::make_unique<SteadyTimer>(); }
  std::int64_t library_calls() const override { return calls_; }

  nlohmann::json context() const override {
    nlohmann::json j = {{"backend", "cpu"}, {"cpu_gemm", gemm_.context()}};
    j["hardware_threads"] = j["cpu_gemm"]["hardware_threads"];
    return j;
  }

 private:
  static constexpr std::size_t kMaxLoggedAlgorithms = 64;
  std::int64_t calls_ = 0;
  cpu::CpuGemm gemm_;
  std::vector<std::string> algorithm_log_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace fusebench
