// GPU checks of the sequence-parallel pieces; they skip (with the reason) without a CUDA device:
// the RMSNorm kernel and the unsharded pipelines against float64; the plan lanes on two streams
// (a loopback communicator whose collectives are device copies, so a missing event between the
// lanes shows as a race against the CPU run of the same plan); NCCL's row collectives and the
// four variants across two or more GPUs of one process; the modelled collectives' spin kernel
// against CUDA events (10 and 25 us within 2%, no backstop stop).
#include <gtest/gtest.h>

#ifdef FUSEBENCH_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstring>
#include <iostream>

#include "comm/delay.hpp"
#include "fusebench/nccl_comm.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/tp.hpp"
#include "fusebench/workspace.hpp"

using namespace fusebench;

namespace {

ModelShape tiny() { return {"tiny", 256, 8, 2, 32, 384, 2}; }

// Every "rank" holds the same data: all_gather_rows copies src into every block, reduce_scatter
// keeps this rank's rows of src (the others contribute zeros). Deterministic, so the GPU's lanes
// can be checked against the CPU's. Device copies go on the backend's current lane.
class LoopbackComm final : public Communicator {
 public:
  LoopbackComm(Backend& backend, int rank, int size)
      : backend_(backend), rank_(rank), size_(size) {}
  std::string name() const override { return "loopback"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce(const MatRef&) override {}
  void all_gather(const MatRef&, const MatRef&) override {}
  void reduce_scatter(const MatRef& src, const MatRef& dst) override {
    const std::size_t bytes = static_cast<std::size_t>(dst.rows * dst.cols) * dtype_size(dst.dtype);
    copy(dst.data,
         static_cast<const std::byte*>(src.data) + bytes * static_cast<std::size_t>(rank_), bytes);
  }
  void all_gather_rows(const MatRef& src, const MatRef& dst) override {
    const std::size_t bytes = static_cast<std::size_t>(src.rows * src.cols) * dtype_size(src.dtype);
    for (int r = 0; r < size_; ++r)
      copy(static_cast<std::byte*>(dst.data) + bytes * static_cast<std::size_t>(r), src.data,
           bytes);
  }
  void check_same_config(const std::string&) override {}

 private:
  void copy(void* to, const void* from, std::size_t bytes) {
    if (backend_.stream() == nullptr) {
      std::memcpy(to, from, bytes);
      return;
    }
#ifdef FUSEBENCH_HAVE_CUDA
    if (cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice,
                        static_cast<cudaStream_t>(backend_.stream())) != cudaSuccess)
      throw std::runtime_error("loopback copy failed");
#endif
  }
  Backend& backend_;
  int rank_, size_;
};

std::unique_ptr<Backend> gpu_or_skip_reason(std::string* why) { return make_cuda_backend(why); }

}  // namespace

TEST(GpuTp, UnshardedPipelinesWithRmsNormEqualFloat64) {
  std::string why;
  auto backend = gpu_or_skip_reason(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  for (const char* op : {"tp_attn", "tp_mlp"}) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      for (std::int64_t tokens : {1, 37, 300}) {
        // tp = 1: every variant, no collectives; checks the RMSNorm kernel on the way.
        for (const auto& r : verify_op(*backend, op, shard(tiny(), 1), tokens, dtype, 9, true))
          EXPECT_TRUE(r.ok()) << op << " tokens=" << tokens << " " << r.summary();
      }
    }
  }
}

TEST(GpuTp, OverlapLanesOnTwoStreamsMatchTheCpu) {
  std::string why;
  auto gpu = gpu_or_skip_reason(&why);
  if (!gpu) GTEST_SKIP() << "needs a CUDA device: " << why;
  auto cpu = make_cpu_backend();
  ShardShape s = shard(tiny(), 4);
  s.rank = 2;
  for (const char* op : {"tp_attn", "tp_mlp"}) {
    for (std::int64_t tokens : {16, 1000}) {
      const Plan p = build_plan(op, "overlap", s, tokens, DType::f32);
      Workspace on_gpu(*gpu, p, 5), on_cpu(*cpu, p, 5);
      LoopbackComm gpu_comm(*gpu, s.rank, s.tp), cpu_comm(*cpu, s.rank, s.tp);
      on_cpu.run(&cpu_comm);
      for (int i = 0; i < 20; ++i) on_gpu.run(&gpu_comm);  // races would show in some run
      const auto want = on_cpu.read(p.outputs.at("out"));
      const auto got = on_gpu.read(p.outputs.at("out"));
      const Comparison c =
          compare_outputs("out", "cpu", got, std::vector<float>(want), tolerance_for(DType::f32));
      EXPECT_TRUE(c.ok) << op << " tokens=" << tokens << ": " << c.mismatches << "/" << c.elements
                        << " max_abs=" << c.max_abs_error;
    }
  }
}

TEST(GpuTp, NcclRowCollectivesAndEveryVariantAcrossGpus) {
  const int gpus = cuda_device_count();
  if (!nccl_built()) GTEST_SKIP() << "this build has no NCCL";
  if (gpus < 2) GTEST_SKIP() << "needs 2 or more GPUs in this process (" << gpus << " visible)";
  const int tp = gpus >= 4 ? 4 : 2;
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<Backend*> raw;
  std::vector<int> devices;
  for (int d = 0; d < tp; ++d) {
    std::string why;
    backends.push_back(make_cuda_backend_on(d, &why));
    ASSERT_TRUE(backends.back()) << why;
    raw.push_back(backends.back().get());
    devices.push_back(d);
  }
  auto comms = make_nccl_local_group(raw, devices, 60);
  for (const char* op : {"tp_attn", "tp_mlp"}) {
    for (const auto& variant : find_op(op).variants) {
      for (std::int64_t tokens : {1, 37, 512}) {
        std::vector<VerifyResult> results(static_cast<std::size_t>(tp));
        run_ranks(tp, [&](int r) {
          results[static_cast<std::size_t>(r)] = verify_tp_rank(
              *backends[static_cast<std::size_t>(r)], *comms[static_cast<std::size_t>(r)], op,
              variant, shard(tiny(), tp), tokens, DType::bf16, 21, true);
        });
        for (const auto& r : results)
          EXPECT_TRUE(r.ok()) << "tokens=" << tokens << " " << r.summary();
      }
    }
  }
}

#ifdef FUSEBENCH_HAVE_CUDA
namespace {

// Device time of `count` spins of `seconds`, queued behind a 5 ms spin so that the host's launch
// rate stays out of the events' span.
double spins_seconds(cudaStream_t stream, double seconds, int count) {
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
    throw std::runtime_error("cudaEventCreate failed");
  comm::enqueue_gpu_delay(stream, 5e-3);
  cudaEventRecord(e0, stream);
  for (int i = 0; i < count; ++i) comm::enqueue_gpu_delay(stream, seconds);
  cudaEventRecord(e1, stream);
  float ms = 0;
  const bool ok =
      cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess;
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  if (!ok) throw std::runtime_error("timing the spins failed");
  return ms * 1e-3;
}

}  // namespace
#endif

// The modelled collectives' stand-in (delay_kernel.cu): a spin of d lasts d on the device. The
// spins' launch gaps are measured by spins of 1e-12 s (0 ns: the same kernel, returning at once)
// and taken off. The old spin (globaltimer alone) was short by up to one timer step: a 1 us step
// made 10 us spins last 9-10 us, 5% short on average, which this test fails by.
TEST(GpuTp, ModelledDelaySpinLastsItsTimeWithinTwoPercent) {
  std::string why;
  auto gpu = gpu_or_skip_reason(&why);
  if (!gpu) GTEST_SKIP() << "needs a CUDA device: " << why;
#ifdef FUSEBENCH_HAVE_CUDA
  const double step = comm::gpu_globaltimer_step_ns();
  std::cout << "global timer step: " << step << " ns\n";
  ASSERT_GT(step, 0) << "the global timer did not advance";
  const auto stream = static_cast<cudaStream_t>(gpu->stream());
  constexpr int kCount = 200;
  const unsigned long long stops_before = comm::gpu_delay_backstop_stops();
  spins_seconds(stream, 10e-6, 10);  // warm-up: module load, first launches
  const double gap = spins_seconds(stream, 1e-12, kCount) / kCount;
  for (double want : {10e-6, 25e-6}) {
    const double per = spins_seconds(stream, want, kCount) / kCount - gap;
    std::cout << "spin of " << want * 1e6 << " us: " << per * 1e6
              << " us on the device (launch gap " << gap * 1e6 << " us taken off)\n";
    EXPECT_NEAR(per, want, 0.02 * want) << "timer step " << step << " ns";
  }
  EXPECT_EQ(comm::gpu_delay_backstop_stops(), stops_before)
      << "the clock64 backstop ended spins: the global timer stalled";
#endif
}
