// GPU checks of the sequence-parallel pieces; they skip (with the reason) without a CUDA device:
// the RMSNorm kernel and the unsharded pipelines against float64; the plan lanes on two streams
// (a loopback communicator whose collectives are device copies, so a missing event between the
// lanes shows as a race against the CPU run of the same plan); NCCL's row collectives and the
// four variants across two or more GPUs of one process; the modelled collectives' spin kernel
// timed in SM cycles (10 and 25 us within 2%, no backstop stop).
#include <gtest/gtest.h>

#ifdef FUSEBENCH_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <cstring>
#include <iostream>
#include <random>
#include <utility>

#include "comm/delay.hpp"
#include "fusebench/link_model.hpp"
#include "fusebench/nccl_comm.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/routing.hpp"
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

namespace {

// One cuda backend per GPU 0..tp-1, for an NCCL group across them.
struct GpuRanks {
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<Backend*> raw;
  std::vector<int> devices;
};
void open_gpu_ranks(int tp, GpuRanks& out) {
  for (int d = 0; d < tp; ++d) {
    std::string why;
    out.backends.push_back(make_cuda_backend_on(d, &why));
    ASSERT_TRUE(out.backends.back()) << why;
    out.raw.push_back(out.backends.back().get());
    out.devices.push_back(d);
  }
}

}  // namespace

TEST(GpuTp, NcclRowCollectivesAndEveryVariantAcrossGpus) {
  const int gpus = cuda_device_count();
  if (!nccl_built()) GTEST_SKIP() << "this build has no NCCL";
  if (gpus < 2) GTEST_SKIP() << "needs 2 or more GPUs in this process (" << gpus << " visible)";
  const int tp = gpus >= 4 ? 4 : 2;
  GpuRanks ranks;
  open_gpu_ranks(tp, ranks);
  if (HasFatalFailure()) return;
  auto& backends = ranks.backends;
  auto comms = make_nccl_local_group(ranks.raw, ranks.devices, 60);
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

namespace {

// tiny()'s MLP as 8 routed experts, top-2, uniform routing (tp_moe's shard at tp).
ShardShape tiny_moe(int tp) {
  ShardShape s = shard(tiny(), tp);
  s.mlp = LayerKind::expert;
  auto block = std::make_shared<MoeBlock>();
  block->rule.experts = 8;
  block->rule.top_k = 2;
  block->rule.renormalize = true;
  block->source = parse_routing("zipf:1.2");
  block->seed = 5;
  s.moe = std::move(block);
  return s;
}

}  // namespace

// The MoE block across GPUs (tp_moe): every variant, NCCL's all-reduce, all-gather,
// reduce-scatter and grouped send/receive all-to-all, each rank against the float64 block.
TEST(GpuTpMoe, NcclVariantsAcrossGpusMatchFloat64) {
  const int gpus = cuda_device_count();
  if (!nccl_built()) GTEST_SKIP() << "this build has no NCCL";
  if (gpus < 2)
    GTEST_SKIP() << "needs 2 or more GPUs in this process (" << gpus
                 << " visible); GpuTpMoe.ModelledOnOneGpu runs the variants with modelled "
                    "collectives";
  const int tp = gpus >= 4 ? 4 : 2;
  GpuRanks ranks;
  open_gpu_ranks(tp, ranks);
  if (HasFatalFailure()) return;
  auto& backends = ranks.backends;
  auto comms = make_nccl_local_group(ranks.raw, ranks.devices, 60);
  for (const auto& variant : find_op("tp_moe").variants) {
    for (std::int64_t tokens : {1, 37, 512}) {
      std::vector<VerifyResult> results(static_cast<std::size_t>(tp));
      run_ranks(tp, [&](int r) {
        results[static_cast<std::size_t>(r)] = verify_tp_rank(
            *backends[static_cast<std::size_t>(r)], *comms[static_cast<std::size_t>(r)], "tp_moe",
            variant, tiny_moe(tp), tokens, DType::bf16, 21, true);
      });
      for (const auto& r : results)
        EXPECT_TRUE(r.ok() && r.checked()) << variant << " tokens=" << tokens << " " << r.summary();
    }
  }
}

// Where tp exceeds the GPUs the entries are modelled: rank 0's plan of every variant runs on the
// one GPU with the link model's delays standing in for the collectives (data untouched, so not
// compared), issuing every step the plan has.
TEST(GpuTpMoe, ModelledOnOneGpu) {
  std::string why;
  auto backend = gpu_or_skip_reason(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  auto comm = make_modelled_communicator(4, find_link_profile("nvlink-h200"), *backend);
  for (const auto& variant : find_op("tp_moe").variants) {
    Workspace ws(*backend, build_plan("tp_moe", variant, tiny_moe(4), 64, DType::bf16), 3);
    ws.run(comm.get());
    backend->synchronize();
    EXPECT_EQ(ws.plan().outputs.at("out").cols, tiny().hidden) << variant;
  }
}

#ifdef FUSEBENCH_HAVE_CUDA
namespace {

// `count` traced spins of `seconds`, each after a filler spin of a random 0-3 us, so that they
// start at random phases of the global timer's step.
std::vector<comm::SpinTrace> traced_spins(cudaStream_t stream, double seconds, int count,
                                          std::mt19937& rng) {
  comm::SpinTrace* dev = nullptr;
  const std::size_t bytes = sizeof(comm::SpinTrace) * static_cast<std::size_t>(count);
  if (cudaMalloc(reinterpret_cast<void**>(&dev), bytes) != cudaSuccess)
    throw std::runtime_error("cudaMalloc failed");
  std::uniform_real_distribution<double> filler(0, 3e-6);
  for (int i = 0; i < count; ++i) {
    comm::enqueue_gpu_delay(stream, filler(rng));
    comm::enqueue_gpu_delay_traced(stream, seconds, dev + i);
  }
  std::vector<comm::SpinTrace> out(static_cast<std::size_t>(count));
  const bool ok = cudaStreamSynchronize(stream) == cudaSuccess &&
                  cudaMemcpy(out.data(), dev, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
  cudaFree(dev);
  if (!ok) throw std::runtime_error("the traced spins failed");
  return out;
}

// SM cycles per ns over spins of 2 ms, whose timer readings are off by one step at most (0.05%
// of them at a 1 us step).
double cycles_per_ns(cudaStream_t stream, std::mt19937& rng) {
  std::vector<double> rates;
  for (const auto& t : traced_spins(stream, 2e-3, 3, rng))
    rates.push_back(static_cast<double>(t.cycles_end - t.cycles_start) /
                    static_cast<double>(t.timer_end - t.timer_start));
  std::sort(rates.begin(), rates.end());
  return rates[1];
}

}  // namespace
#endif

// The modelled collectives' stand-in (delay_kernel.cu): a spin of d lasts d. Its own timer
// cannot judge that (the old spin, globaltimer alone, ended on a tick edge and read exactly d
// while it lasted d minus the start's phase in the tick: 9-10 us for 10 us on a 1 us step), so
// each spin's length is read in SM cycles (clock64 at its start and end) converted at the clock
// rate measured over 2 ms spins before and after. The spins start at random phases of the step.
TEST(GpuTp, ModelledDelaySpinLastsItsTimeWithinTwoPercent) {
  std::string why;
  auto gpu = gpu_or_skip_reason(&why);
  if (!gpu) GTEST_SKIP() << "needs a CUDA device: " << why;
#ifdef FUSEBENCH_HAVE_CUDA
  const double step = comm::gpu_globaltimer_step_ns();
  std::cout << "global timer step: " << step << " ns\n";
  ASSERT_GT(step, 0) << "the global timer did not advance";
  const auto stream = static_cast<cudaStream_t>(gpu->stream());
  std::mt19937 rng(21);
  const unsigned long long stops_before = comm::gpu_delay_backstop_stops();
  traced_spins(stream, 10e-6, 20, rng);  // warm-up: module load, clocks up
  const double before = cycles_per_ns(stream, rng);
  const auto ten = traced_spins(stream, 10e-6, 200, rng);
  const auto twenty_five = traced_spins(stream, 25e-6, 100, rng);
  const double after = cycles_per_ns(stream, rng);
  std::cout << "SM clock: " << before << " then " << after << " cycles per ns\n";
  ASSERT_NEAR(after, before, 0.01 * before) << "the SM clock changed during the test";
  const double rate = (before + after) / 2;
  for (const auto& [want, spins] : {std::pair{10e3, ten}, std::pair{25e3, twenty_five}}) {
    double sum = 0, lo = 1e300, hi = 0;
    for (const auto& t : spins) {
      const double ns = static_cast<double>(t.cycles_end - t.cycles_start) / rate;
      sum += ns;
      lo = std::min(lo, ns);
      hi = std::max(hi, ns);
    }
    const double mean = sum / static_cast<double>(spins.size());
    std::cout << "spin of " << want / 1e3 << " us: mean " << mean / 1e3 << " us, range ["
              << lo / 1e3 << ", " << hi / 1e3 << "] us over " << spins.size() << " spins\n";
    EXPECT_NEAR(mean, want, 0.02 * want) << "timer step " << step << " ns";
    EXPECT_GE(lo, 0.95 * want) << "timer step " << step << " ns";
  }
  EXPECT_EQ(comm::gpu_delay_backstop_stops(), stops_before)
      << "the clock64 backstop ended spins: the global timer stalled";
#endif
}
