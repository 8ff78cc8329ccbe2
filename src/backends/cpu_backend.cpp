// CPU backend: GEMMs through cpu_gemm (OpenBLAS sgemv for one-row fp32 products, oneDNN matmul
// otherwise; see cpu_gemm.hpp), elementwise steps vectorized and threaded (cpu_elementwise.hpp).
// Used where no GPU is present, and as a second implementation the tests compare against.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backends/cpu_elementwise.hpp"
#include "backends/cpu_gemm.hpp"
#include "backends/cpu_memory.hpp"
#include "backends/cpu_quant.hpp"
#include "fusebench/backend.hpp"
#include "fusebench/cost_model.hpp"

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
    void* p = cpu::allocate_host(bytes);
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
    ++calls_;
    // Lane 1 of today's plans runs collectives only, but the GEMM's primitive cache, scratch
    // and log are not safe on two threads: a plan putting a GEMM there stays correct.
    std::lock_guard lock(gemm_mutex_);
    const cpu::GemmPath path = gemm_.run(a);
    if (algorithm_log_.size() < kMaxLoggedAlgorithms)
      algorithm_log_.push_back(gemm_.describe(path, a));
  }
  void set_host_threads(int threads) override {
    std::lock_guard lock(gemm_mutex_);
    gemm_.set_threads(threads);
  }
  std::vector<std::string> take_algorithm_log() override {
    std::lock_guard lock(gemm_mutex_);
    return std::exchange(algorithm_log_, {});
  }

  // Grouped/batched GEMMs: no CPU library here has one (OpenBLAS 0.3.21, oneDNN 2.6), so each is
  // one parallel region in which worker threads take whole members, each member's GEMM on one
  // thread (its own single-threaded CpuGemm), against one multi-threaded call per GEMM elsewhere:
  // the CPU's launch cost is the fork/join of a call. One library call.
  void gemm_grouped(std::span<const GemmArgs> gemms) override { gemm_region(gemms); }
  void gemm_batched(std::span<const GemmArgs> gemms) override { gemm_region(gemms); }
  // Not one kernel: qkv's and gate_up's one-launch variants are GPU comparisons, skipped on the
  // CPU by default; moe's grouped and padded are its comparison here (sweep.cpp).
  std::string one_launch_gemm_caveat() const override {
    return "the CPU backend runs a grouped/batched GEMM as one parallel region of single-threaded "
           "GEMMs, not one kernel";
  }

  void gather_rows(const MatRef& src, const MatRef& dst, std::span<const std::int64_t> rows,
                   std::span<const float> scale) override {
    if (static_cast<std::int64_t>(rows.size()) != dst.rows || src.cols != dst.cols ||
        src.dtype != dst.dtype || (!scale.empty() && scale.size() != rows.size()))
      throw std::invalid_argument("gather_rows: " + std::to_string(rows.size()) + " rows for " +
                                  std::to_string(dst.rows) + ", or src and dst differ");
    ++calls_;
    cpu::gather_scaled(src, dst, rows, scale, gemm_.threads());
  }

  void scatter_add(const MatRef& src, const MatRef& dst, std::span<const std::int64_t> rows,
                   std::span<const float> scale, bool zero_dst) override {
    if (static_cast<std::int64_t>(rows.size()) != src.rows || scale.size() != rows.size() ||
        src.cols != dst.cols)
      throw std::invalid_argument("scatter_add: " + std::to_string(rows.size()) + " rows for " +
                                  std::to_string(src.rows) + ", or src and dst differ");
    ++calls_;
    cpu::scatter_add(src, dst, rows, scale, zero_dst, gemm_.threads());
  }

  void sigmoid_gate_rows(const MatRef& x, const MatRef& gate) override {
    if (gate.rows != x.rows || gate.cols != 1)
      throw std::invalid_argument("sigmoid_gate_rows: the gate is not one column per row of x");
    ++calls_;
    cpu::sigmoid_gate_rows(x, gate, gemm_.threads());
  }

  void act_and_mul(const ActAndMulArgs& a) override {
    ++calls_;
    cpu::act_and_mul(a, gemm_.threads());
  }

  // int8 through oneDNN where it can, fp8 (and int8 without it) as exact emulations
  // (cpu_quant.hpp): one counted call each, but int8's scaled GEMM two, its int32 GEMM and the
  // host loop applying the scales after it (the cuda backend's GEMM and dequantize kernel; the
  // cost model's scaled_gemm_launches).
  std::string quant_unsupported_reason(const QuantSpec&) const override { return {}; }
  std::string quant_execution(QuantDType dtype) const override {
    return cpu::execution(gemm_, dtype);
  }
  void quantize(const QuantizeArgs& a) override {
    ++calls_;
    cpu::quantize(a, gemm_.threads());
  }
  void scaled_gemm(const ScaledGemmArgs& a) override {
    calls_ += scaled_gemm_launches(a.x.dtype);
    std::lock_guard lock(gemm_mutex_);
    cpu::scaled_gemm(gemm_, a);
  }
  // The quantized moe's grouped and padded stages: one region, each member's scaled GEMM on one
  // thread (as gemm_grouped); int8 counts its dequantize over every member once, as one
  // elementwise launch would (scaled_gemm_launches).
  void scaled_gemm_grouped(std::span<const ScaledGemmArgs> gemms) override {
    calls_ += gemms.empty() ? 1 : scaled_gemm_launches(gemms.front().x.dtype);
    std::lock_guard lock(gemm_mutex_);
    region(gemms.size(), [&](cpu::CpuGemm& g, std::size_t i) { cpu::scaled_gemm(g, gemms[i]); });
  }

  // One library call for all members, as the GPU's one launch.
  void bias_add(std::span<const BiasAddArgs> members) override {
    ++calls_;
    for (const auto& m : members) cpu::add_bias(m.y, m.bias, gemm_.threads());
  }

  void rms_norm(const MatRef& x, const MatRef& weight, const MatRef& out, float eps) override {
    if (x.rows != out.rows || x.cols != out.cols || weight.cols != x.cols || weight.rows != 1) {
      throw std::invalid_argument("rms_norm: x, weight [1, cols] and out differ in shape");
    }
    ++calls_;
    cpu::rms_norm(x, weight, out, eps, gemm_.threads());
  }

  void synchronize() override {}
  std::unique_ptr<RegionTimer> make_timer() override { return std::make_unique<SteadyTimer>(); }
  std::int64_t library_calls() const override { return calls_; }

  nlohmann::json context() const override {
    nlohmann::json j = {{"backend", "cpu"}, {"cpu_gemm", gemm_.context()}};
    j["hardware_threads"] = j["cpu_gemm"]["hardware_threads"];
    j["elementwise"] = {{"isa", cpu::elementwise_isa()},
                        {"threads", "the GEMM library's (--cpu-threads)"},
                        {"steps",
                         "act_and_mul, bias, gather, combine, gate, rms_norm, quantize, "
                         "scale epilogue output"}};
    return j;
  }

 private:
  // The parallel region of a grouped step: threads take members in order, member i run by
  // run(gemm, i) on the thread's single-threaded CpuGemm. Returns the threads used.
  template <class Run>
  std::size_t region(std::size_t members, Run&& run) {
    const int budget = gemm_.threads() > 0 ? gemm_.threads()
                                           : static_cast<int>(std::thread::hardware_concurrency());
    const auto threads = static_cast<std::size_t>(
        std::clamp<std::size_t>(static_cast<std::size_t>(std::max(budget, 1)), 1, members));
    while (region_gemms_.size() < threads) {
      region_gemms_.push_back(std::make_unique<cpu::CpuGemm>());
      region_gemms_.back()->set_threads(1);
    }
    std::atomic<std::size_t> next{0};
    std::exception_ptr error;
    std::mutex error_mutex;
    const auto work = [&](std::size_t t) {
      try {
        for (std::size_t i = next++; i < members; i = next++) run(*region_gemms_[t], i);
      } catch (...) {
        std::lock_guard l(error_mutex);
        if (!error) error = std::current_exception();
      }
    };
    std::vector<std::thread> workers;
    for (std::size_t t = 1; t < threads; ++t) workers.emplace_back(work, t);
    work(0);
    for (auto& w : workers) w.join();
    if (error) std::rethrow_exception(error);
    return threads;
  }

  // gemm_grouped/gemm_batched: one region of single-threaded GEMMs.
  void gemm_region(std::span<const GemmArgs> gemms) {
    ++calls_;
    std::lock_guard lock(gemm_mutex_);
    cpu::GemmPath first_path = cpu::GemmPath::blas_gemm;  // member 0's, for the log
    const std::size_t threads = region(gemms.size(), [&](cpu::CpuGemm& g, std::size_t i) {
      const cpu::GemmPath path = g.run(gemms[i]);
      if (i == 0) first_path = path;
    });
    if (algorithm_log_.size() < kMaxLoggedAlgorithms && !gemms.empty())
      algorithm_log_.push_back(
          std::to_string(gemms.size()) + " GEMMs on " + std::to_string(threads) +
          " threads, 1 thread each: " + region_gemms_[0]->describe(first_path, gemms[0]));
  }

  static constexpr std::size_t kMaxLoggedAlgorithms = 64;
  std::vector<std::unique_ptr<cpu::CpuGemm>> region_gemms_;  // one per region thread
  std::atomic<std::int64_t> calls_{0};  // lanes of a plan may call from two threads
  std::mutex gemm_mutex_;
  cpu::CpuGemm gemm_;
  std::vector<std::string> algorithm_log_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace fusebench
