// Counter passes on a real GPU; every test skips without a CUDA device.
#include <gtest/gtest.h>

#include <functional>

#include "fusebench/cost_model.hpp"
#include "fusebench/counter_passes.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/workspace.hpp"
#include "measure/timing_device.hpp"

using namespace fusebench;

namespace {

struct GpuPasses {
  std::unique_ptr<Backend> backend;
  CounterPasses passes;
};

// The CUDA backend and the passes of `options`; "" or why the test must skip (no device, or
// `counter` not readable here).
std::string gpu_passes(const CounterPassOptions& options, const std::string& counter,
                       GpuPasses* out) {
  std::string why;
  out->backend = make_cuda_backend(&why);
  if (!out->backend) return "needs a CUDA device: " + why;
  out->passes = make_counter_passes(*out->backend, options);
  const std::string status = out->passes.status.at(counter);
  return status == "available" ? "" : counter + " unavailable here: " + status;
}

RegionCounters collect_all(CounterPasses& passes, const std::string& name,
                           const std::function<void()>& region) {
  RegionCounters c;
  for (auto& pass : passes.collectors) c.merge(pass->collect(name, region));
  return c;
}

RegionCounters count_region(CounterPasses& passes, Workspace& ws, const std::string& name) {
  ws.run();  // warm-up: heuristics and lazy module loading stay out of the counts
  ws.backend().synchronize();
  return collect_all(passes, name, [&ws] { ws.run(); });
}

}  // namespace

// The GPU counts the kernels cuBLASLt really ran: split qkv is 3 GEMM kernels, fused 1. At 1024
// tokens every GEMM has hundreds of output tiles, so cuBLASLt has no reason for a split-K reduce
// kernel; if it adds one anyway, the failure message names it.
TEST(GpuCounterPasses, QkvSplitLaunchesThreeKernelsFusedOne) {
  CounterPassOptions options;
  options.dram_counters = false;
  GpuPasses gpu;
  if (const std::string why = gpu_passes(options, "launches", &gpu); !why.empty())
    GTEST_SKIP() << why;
  const ShardShape s = shard(find_model("llama3-8b"), 1);
  for (const auto& [variant, expected] :
       std::map<std::string, double>{{"split", 3}, {"fused", 1}}) {
    Workspace ws(*gpu.backend, build_plan("qkv", variant, s, 1024, DType::bf16), 5);
    const RegionCounters c = count_region(gpu.passes, ws, "qkv/" + variant);
    ASSERT_EQ(c.values.count("launches"), 1u)
        << (c.unavailable.count("launches") ? c.unavailable.at("launches") : "");
    std::string names;
    for (const auto& n : c.kernel_names) names += "\n  " + n;
    EXPECT_DOUBLE_EQ(c.values.at("launches"), expected) << variant << " kernels:" << names;
    EXPECT_DOUBLE_EQ(c.values.at("launches"), cost_of(ws.plan()).launches) << variant;
    EXPECT_DOUBLE_EQ(c.values.at("memcpys"), 0.0);
  }
}

// A replay of the captured region executes what an eager run does, and CUPTI sees the graph's
// nodes (kernel records with a graph id) as launches.
TEST(GpuCounterPasses, GraphReplayLaunchesWhatTheEagerRegionLaunches) {
  CounterPassOptions options;
  options.dram_counters = false;
  GpuPasses gpu;
  if (const std::string why = gpu_passes(options, "launches", &gpu); !why.empty())
    GTEST_SKIP() << why;
  std::string why;
  auto device = measure::make_device_timing(*gpu.backend, &why);
  ASSERT_TRUE(device) << why;
  const ShardShape s = shard(find_model("llama3-8b"), 1);
  Workspace ws(*gpu.backend, build_plan("gate_up", "split", s, 64, DType::bf16), 5);
  const RegionCounters eager = count_region(gpu.passes, ws, "gate_up/split");
  auto graph = device->capture([&ws] { ws.run(); });
  const RegionCounters replay =
      collect_all(gpu.passes, "gate_up/split/graph", [&graph] { graph->launch(); });
  ASSERT_EQ(replay.values.count("launches"), 1u);
  EXPECT_DOUBLE_EQ(replay.values.at("launches"), eager.values.at("launches"));
  EXPECT_DOUBLE_EQ(replay.values.at("kernels"), eager.values.at("kernels"));
}

// DRAM bytes of a weight-dominated decode GEMM: at least the weights must come from DRAM after
// the L2 flush, and not wildly more than the minimal bytes.
TEST(GpuCounterPasses, DramBytesCoverTheWeights) {
  CounterPassOptions options;
  options.launch_counts = false;
  GpuPasses gpu;
  if (const std::string why = gpu_passes(options, "dram_read_bytes", &gpu); !why.empty())
    GTEST_SKIP() << why;
  const ShardShape s = shard(find_model("llama3-8b"), 1);
  Workspace ws(*gpu.backend, build_plan("qkv", "fused", s, 1, DType::bf16), 5);
  RegionCounters c = count_region(gpu.passes, ws, "qkv/fused");
  const Cost cost = cost_of(ws.plan());
  ASSERT_EQ(c.values.count("dram_read_bytes"), 1u) << c.unavailable.begin()->second;
  add_model_ratios(c, cost.launches, cost.bytes);
  EXPECT_GT(c.values.at("bytes_vs_model"), 0.8) << "read " << c.values.at("dram_read_bytes");
  EXPECT_LT(c.values.at("bytes_vs_model"), 2.0) << "read " << c.values.at("dram_read_bytes");
  EXPECT_GT(c.values.at("l2_bytes"), 0.0);
}
