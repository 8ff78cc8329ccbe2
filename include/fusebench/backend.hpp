#pragma once
// The GEMM backend interface: cuBLASLt on CUDA, OpenBLAS on the CPU. Row-major everywhere,
// y[M,N] = x[M,K] * w[N,K]^T like F.linear.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusebench/activation.hpp"
#include "fusebench/dtype.hpp"
#include "fusebench/quant.hpp"

namespace fusebench {

struct MatRef {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;  // elements between consecutive rows
};

// y = x w^T (+ bias on every row). bias: null data for none, else N contiguous elements of y's
// dtype (an [N, 1] MatRef), added inside the GEMM (cuBLASLt's bias epilogue; the CPU adds it in
// the same library call).
struct GemmArgs {
  MatRef x, w, y;
  MatRef bias{};
};

// y += bias on every row; bias as in GemmArgs.
struct BiasAddArgs {
  MatRef y, bias;
};

// out = act(gate) * up elementwise; element c of a row of gate/up is at column c * col_stride of
// its MatRef (col_stride 2: gpt-oss's interleaved gate/up columns).
struct ActAndMulArgs {
  MatRef gate, up, out;
  Activation act = Activation::silu;
  double limit = 0;  // swigluoai clamp
  std::int64_t col_stride = 1;
};

// A quantized matrix: one-byte codes (fp8 e4m3fn or int8), row stride ld, and the fp32 scales of
// its whole scale grid (kind over [rows, cols], row-major; QuantMat's layout). One exception: the
// 1x128 group scales a backend's quantize writes are read only by its own scaled_gemm, and may
// lie as that GEMM reads them (the cuda backend's: group-major, cuBLASLt's VEC128_32F layout;
// src/backends/cuda_scale_layout.hpp).
struct QuantRef {
  std::uint8_t* codes = nullptr;
  std::int64_t rows = 0, cols = 0, ld = 0;
  float* scales = nullptr;
  ScaleKind kind = ScaleKind::tensor;
  QuantDType dtype = QuantDType::fp8_e4m3fn;
};
// out = quantize(x): dynamic (scales computed and written) or static (out.scales given, read).
struct QuantizeArgs {
  MatRef x;
  QuantRef out;
  bool static_scale = false;
};
// y = dequant(x) dequant(w)^T, fp32 accumulation (int8: exact int32, then scaled in fp32), y in
// its dtype.
struct ScaledGemmArgs {
  QuantRef x, w;
  MatRef y;
};

// Thrown when an allocation does not fit; the message names the size asked and what is free.
class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Times a region on the backend's own clock: CUDA events on the GPU, steady_clock on the CPU.
class RegionTimer {
 public:
  virtual ~RegionTimer() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual double seconds() = 0;  // waits for the region to finish
};

// Memory a backend could still allocate, and where the figure comes from.
struct FreeMemory {
  std::size_t bytes = 0;
  std::string source;  // e.g. "MemAvailable in /proc/meminfo"; empty: unknown
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cuda" or "cpu"
  // Empty when supported, else the reason.
  virtual std::string unsupported_reason(DType dtype) const = 0;

  virtual void* allocate(std::size_t bytes) = 0;
  // What allocate() could still get now (CPU: MemAvailable; CUDA: cudaMemGetInfo), so a sweep
  // that cannot fit is refused before anything is measured.
  virtual FreeMemory free_memory() const { return {}; }
  virtual void release(void* ptr) noexcept = 0;
  virtual void upload(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void download(void* dst, const void* src, std::size_t bytes) = 0;

  virtual void gemm(const GemmArgs& args) = 0;
  // One launch for all members (grouped GEMM); members may differ in shape.
  virtual void gemm_grouped(std::span<const GemmArgs> gemms);
  // One launch for all members, which share one shape (strided-batched GEMM).
  virtual void gemm_batched(std::span<const GemmArgs> gemms);
  // Empty when gemm_grouped/gemm_batched are one launch; else why timing them would mislead
  // (the sweep then skips the one-launch variants).
  virtual std::string one_launch_gemm_caveat() const { return {}; }
  // "timed": the fastest of the top heuristic candidates, timed per shape; "heuristic": the
  // library's first choice. A no-op where the library offers no choice (OpenBLAS).
  virtual void set_gemm_algo_policy(const std::string& policy) { (void)policy; }
  // CPU: the threads this backend's GEMM libraries use from now on (0: their defaults). TP ranks
  // sharing one machine split its cores, as ranks on their own GPUs do not compete.
  virtual void set_host_threads(int threads) { (void)threads; }
  // CPU: what "the defaults" (set_host_threads(0)) means for this process, and what TP ranks on
  // this machine split among them: the run's thread policy (--cpu-threads). 0: every hardware
  // thread, the libraries' own defaults.
  static void set_host_thread_budget(int threads);
  static int host_thread_budget();
  virtual void act_and_mul(const ActAndMulArgs& args) = 0;
  void silu_mul(const MatRef& gate, const MatRef& up, const MatRef& out) {
    act_and_mul({gate, up, out});
  }
  // Quantized projections (docs/quant.md). Empty when this backend runs `dtype`'s quantize and
  // scaled GEMM, else why not; then how it runs them: "native", or "emulated: <how>" (the times
  // of such entries are labelled emulated).
  virtual std::string quant_unsupported_reason(const QuantSpec& spec) const;
  virtual std::string quant_execution(QuantDType) const { return "native"; }
  // One launch each (a library call on the CPU), but an int8 scaled_gemm: two, the GEMM and its
  // dequantize pass (cost_model.hpp, scaled_gemm_launches). Defaults throw
  // quant_unsupported_reason.
  virtual void quantize(const QuantizeArgs& args);
  virtual void scaled_gemm(const ScaledGemmArgs& args);
  // One launch for all members (the quantized moe's grouped and padded stages). The default
  // throws: a backend offers it where it runs them.
  virtual void scaled_gemm_grouped(std::span<const ScaledGemmArgs> gemms);
  // Every member's y += bias in one launch (one library call on the CPU).
  virtual void bias_add(std::span<const BiasAddArgs> members) = 0;
  // MoE routing (GatherRowsStep, ScatterAddStep, plan.hpp): one launch each. The default throws
  // (a backend without them refuses the moe op).
  // With `scale` (one per dst row; empty: a copy) each gathered row is multiplied by it.
  virtual void gather_rows(const MatRef& src, const MatRef& dst, std::span<const std::int64_t> rows,
                           std::span<const float> scale);
  // x row t *= sigmoid(gate[t, 0]) (SigmoidGateRowsStep), one launch. The default throws.
  virtual void sigmoid_gate_rows(const MatRef& x, const MatRef& gate);
  virtual void scatter_add(const MatRef& src, const MatRef& dst, std::span<const std::int64_t> rows,
                           std::span<const float> scale, bool zero_dst);
  // out = x / sqrt(mean(x^2 over the row) + eps) * weight, row by row; weight is [1, cols].
  virtual void rms_norm(const MatRef& x, const MatRef& weight, const MatRef& out, float eps) = 0;
  virtual void synchronize() = 0;
  // Evicts the last-level cache (GPU: writes an L2-sized scratch buffer on the stream) so the
  // next region reads its operands from DRAM. A no-op where that cannot be done.
  virtual void flush_l2() {}

  virtual std::unique_ptr<RegionTimer> make_timer() = 0;
  // Library calls issued so far (the CPU backend's "launches"); GPU backends count kernels
  // through CUPTI instead and return -1.
  virtual std::int64_t library_calls() const { return -1; }
  // Algorithms the last GEMM calls selected, for the report (e.g. cuBLASLt algo ids).
  virtual std::vector<std::string> take_algorithm_log() { return {}; }
  // Static description for the report context (device, library versions).
  virtual nlohmann::json context() const = 0;
  // Opaque stream handle for collectives and CUPTI (cudaStream_t on CUDA, nullptr on CPU): the
  // current lane's.
  virtual void* stream() const { return nullptr; }
  // The CUDA device this backend runs on; -1 on the CPU.
  virtual int device() const { return -1; }

  // Lanes of a plan (plan.hpp StepOrder). A backend with device lanes (GPU: lane 1 is a second
  // stream) issues every later call on the lane set here, and orders lanes by events recorded
  // and waited for on the device. Without them (CPU) the workspace runs lane 1 on a thread.
  virtual bool has_device_lanes() const { return false; }
  virtual void set_lane(int lane) { (void)lane; }
  // Records event `id` after the work issued so far on the current lane.
  virtual void lane_signal(int id) { (void)id; }
  // The current lane waits (on the device, the host does not block) for event `id`.
  virtual void lane_wait(int id) { (void)id; }
};

enum class BackendKind { automatic, cuda, cpu };
BackendKind parse_backend_kind(const std::string& text);

struct BackendChoice {
  std::unique_ptr<Backend> backend;
  std::string reason;  // why this backend was chosen (e.g. "no CUDA device: ...")
};
// `automatic` picks CUDA when a device is usable, else the CPU with the reason. Asking for
// `cuda` explicitly where none is usable throws with the reason.
BackendChoice make_backend(BackendKind kind);

std::unique_ptr<Backend> make_cpu_backend();
// Returns nullptr and sets `why` when the CUDA backend is not built or no device is usable.
std::unique_ptr<Backend> make_cuda_backend(std::string* why);
// Why the cuda backend does not run `spec` ("" when it does): its quant_unsupported_reason, and
// what --list-for=cuda says of a GPU's sweep from a machine without one.
std::string cuda_quant_refusal(const QuantSpec& spec);
// make_cuda_backend opens pinned_cuda_device() (local_device.hpp): device 0 unless the process
// pinned another one (its launcher's local rank, under mpirun/srun).
// The same on a given device (the ranks of a single-process multi-GPU run), and how many
// devices are visible (0 without CUDA).
std::unique_ptr<Backend> make_cuda_backend_on(int device, std::string* why);
int cuda_device_count();
bool cuda_backend_built();

}  // namespace fusebench
