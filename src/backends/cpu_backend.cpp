// CPU backend on OpenBLAS: fp32 through sgemm, bf16 through sbgemm (bf16 in, fp32 accumulate,
// rounded to bf16 on store). Used where no GPU is present, and as a second implementation the
// tests compare against.
#include <cblas.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/host_mat.hpp"
#include "fusebench/backend.hpp"

namespace fusebench {
namespace {

std::vector<float> widen(const MatRef& m) {
  std::vector<float> out(static_cast<std::size_t>(m.rows * m.cols));
  for (std::int64_t r = 0; r < m.rows; ++r) {
    for (std::int64_t c = 0; c < m.cols; ++c)
      out[static_cast<std::size_t>(r * m.cols + c)] = load(m, r, c);
  }
  return out;
}

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
    return "the CPU backend (OpenBLAS) has no " + std::string(to_string(dtype)) +
           " GEMM; use fp32 or bf16";
  }

  void* allocate(std::size_t bytes) override {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    const double total = static_cast<double>(pages) * static_cast<double>(page);
    const FreeMemory free = free_memory();
    // Beyond what is free the host would swap, and the timings with it.
    if (static_cast<double>(bytes) > 0.8 * total || (!free.source.empty() && bytes > free.bytes)) {
      throw OutOfMemory(
          "host allocation of " + std::to_string(bytes >> 20) + " MiB does not fit: " +
          (free.source.empty() ? std::string("?") : std::to_string(free.bytes >> 20)) +
          " MiB free (" + (free.source.empty() ? "unknown" : free.source) + ") of " +
          std::to_string(static_cast<long long>(total) >> 20) +
          " MiB; use fewer tokens or a smaller model");
    }
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr)
      throw OutOfMemory("host allocation of " + std::to_string(bytes) + " bytes failed");
    return p;
  }
  FreeMemory free_memory() const override {
    // The kernel's estimate of what can be allocated without swapping (page cache included).
    std::ifstream in("/proc/meminfo");
    std::string key;
    std::size_t kib = 0;
    std::string unit;
    while (in >> key >> kib >> unit) {
      if (key == "MemAvailable:") return {kib * 1024, "MemAvailable in /proc/meminfo"};
    }
    return {};
  }
  void release(void* ptr) noexcept override { std::free(ptr); }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }

  void gemm(const GemmArgs& a) override {
    const auto m = static_cast<blasint>(a.y.rows), n = static_cast<blasint>(a.y.cols),
               k = static_cast<blasint>(a.x.cols);
    ++calls_;
    // One scratch per thread: a plan's lanes may run GEMMs on two threads at once.
    thread_local std::vector<float> scratch;
    if (a.x.dtype == DType::f32) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f,
                  static_cast<const float*>(a.x.data), static_cast<blasint>(a.x.ld),
                  static_cast<const float*>(a.w.data), static_cast<blasint>(a.w.ld), 0.0f,
                  static_cast<float*>(a.y.data), static_cast<blasint>(a.y.ld));
      return;
    }
    if (a.x.dtype != DType::bf16) throw std::runtime_error(unsupported_reason(a.x.dtype));
    scratch.resize(static_cast<std::size_t>(m) * static_cast<std::size_t>(n));
#ifdef FUSEBENCH_HAVE_SBGEMM
    cblas_sbgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f,
                 static_cast<const bfloat16*>(a.x.data), static_cast<blasint>(a.x.ld),
                 static_cast<const bfloat16*>(a.w.data), static_cast<blasint>(a.w.ld), 0.0f,
                 scratch.data(), n);
#else
    // No sbgemm in this OpenBLAS build: widen the bf16 operands to fp32 (exact) and use sgemm.
    // Same numerics as sbgemm (fp32 accumulate); the widening is part of the timed region.
    const std::vector<float> x = widen(a.x), w = widen(a.w);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x.data(), k, w.data(), k,
                0.0f, scratch.data(), n);
#endif
    for (blasint r = 0; r < m; ++r) {
      for (blasint c = 0; c < n; ++c)
        store(a.y, r, c, scratch[static_cast<std::size_t>(r) * n + c]);
    }
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

  void rms_norm(const MatRef& x, const MatRef& weight, const MatRef& out, float eps) override {
    if (x.rows != out.rows || x.cols != out.cols || weight.cols != x.cols || weight.rows != 1) {
      throw std::invalid_argument("rms_norm: x, weight [1, cols] and out differ in shape");
    }
    ++calls_;
    for (std::int64_t r = 0; r < out.rows; ++r) {
      float sum = 0;  // fp32 accumulation, as the CUDA kernel
      for (std::int64_t c = 0; c < x.cols; ++c) sum += load(x, r, c) * load(x, r, c);
      const float inv = 1.0f / std::sqrt(sum / static_cast<float>(x.cols) + eps);
      for (std::int64_t c = 0; c < x.cols; ++c)
        store(out, r, c, load(x, r, c) * inv * load(weight, 0, c));
    }
  }

  void synchronize() override {}
  std::unique_ptr<RegionTimer> make_timer() override { return std::make_unique<SteadyTimer>(); }
  std::int64_t library_calls() const override { return calls_; }

  nlohmann::json context() const override {
    return {{"backend", "cpu"},
            {"blas", "OpenBLAS"},
            {"blas_config", openblas_get_config()},
            {"blas_core", openblas_get_corename()},
            {"blas_threads", openblas_get_num_threads()},
#ifdef FUSEBENCH_HAVE_SBGEMM
            {"cpu_bf16_gemm", "cblas_sbgemm (bf16 in, fp32 accumulate)"},
#else
            {"cpu_bf16_gemm",
             "bf16 widened to fp32 then cblas_sgemm (this OpenBLAS has no sbgemm); widening is "
             "timed"},
#endif
            {"hardware_threads", std::thread::hardware_concurrency()}};
  }

 private:
  std::atomic<std::int64_t> calls_{0};  // lanes of a plan may call from two threads
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace fusebench
