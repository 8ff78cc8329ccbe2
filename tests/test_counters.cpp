// Counter passes on the CPU: the activity-record aggregation fed synthetic records, the model
// ratios, and the CPU backend's library-call "launches" for every split/fused variant.
#include <gtest/gtest.h>

#include "fusebench/cost_model.hpp"
#include "fusebench/counter_passes.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/workspace.hpp"
#include "measure/activity_aggregator.hpp"

using namespace fusebench;
using measure::ActivityAggregator;
using measure::ActivityKind;
using measure::ActivityRecord;

namespace {

ActivityRecord kernel(const std::string& name, std::uint32_t graph_id = 0) {
  ActivityRecord r;
  r.kind = ActivityKind::kernel;
  r.name = name;
  r.graph_id = graph_id;
  return r;
}
ActivityRecord op(ActivityKind kind, std::uint64_t bytes) {
  ActivityRecord r;
  r.kind = kind;
  r.bytes = bytes;
  return r;
}

}  // namespace

TEST(ActivityAggregator, CountsKernelsInAndOutOfGraphsPerIteration) {
  ActivityAggregator agg;
  // Two iterations of: 3 GEMM kernels (one a split-K reduce in a graph), 1 memset, 1 memcpy.
  for (int it = 0; it < 2; ++it) {
    agg.add(kernel("sm90_xmma_gemm_bf16"));
    agg.add(kernel("sm90_xmma_gemm_bf16"));
    agg.add(kernel("splitKreduce_kernel", 7));
    agg.add(op(ActivityKind::memset, 4096));
    agg.add(op(ActivityKind::memcpy, 128));
  }
  EXPECT_EQ(agg.kernels(), 6u);
  EXPECT_EQ(agg.graph_kernels(), 2u);
  const RegionCounters c = agg.per_iteration(2);
  EXPECT_TRUE(c.unavailable.empty());
  EXPECT_DOUBLE_EQ(c.values.at("kernels"), 3.0);
  EXPECT_DOUBLE_EQ(c.values.at("memsets"), 1.0);
  EXPECT_DOUBLE_EQ(c.values.at("memcpys"), 1.0);
  EXPECT_DOUBLE_EQ(c.values.at("launches"), 5.0);
  EXPECT_EQ(c.kernel_names,
            (std::vector<std::string>{"sm90_xmma_gemm_bf16", "splitKreduce_kernel"}));
}

TEST(ActivityAggregator, GraphOnlyRegionCountsEveryNode) {
  ActivityAggregator agg;
  for (int node = 0; node < 3; ++node) agg.add(kernel("gemm", 42));
  const RegionCounters c = agg.per_iteration(1);
  EXPECT_DOUBLE_EQ(c.values.at("launches"), 3.0);
  EXPECT_EQ(agg.graph_kernels(), 3u);
}

TEST(ActivityAggregator, EmptyRegionIsZeroNotUnavailable) {
  // A region that really launched nothing measures 0: that is a value, not "unknown".
  const RegionCounters c = ActivityAggregator{}.per_iteration(1);
  EXPECT_DOUBLE_EQ(c.values.at("launches"), 0.0);
  EXPECT_TRUE(c.unavailable.empty());
}

TEST(ActivityAggregator, DroppedRecordsMakeCountsUnavailable) {
  ActivityAggregator agg;
  agg.add(kernel("gemm"));
  agg.add_dropped(5);
  const RegionCounters c = agg.per_iteration(1);
  for (const char* counter : {"launches", "kernels", "memcpys", "memsets"}) {
    EXPECT_EQ(c.values.count(counter), 0u) << counter << " must be absent, not a low count";
    ASSERT_EQ(c.unavailable.count(counter), 1u) << counter;
    EXPECT_NE(c.unavailable.at(counter).find("dropped 5"), std::string::npos)
        << c.unavailable.at(counter);
  }
}

TEST(ActivityAggregator, FailureMakesCountsUnavailableWithReason) {
  ActivityAggregator agg;
  agg.add(kernel("gemm"));
  agg.fail("another profiler attached: cuptiActivityEnable returned X");
  const RegionCounters c = agg.per_iteration(1);
  EXPECT_TRUE(c.values.empty());
  EXPECT_EQ(c.unavailable.at("launches"),
            "another profiler attached: cuptiActivityEnable returned X");
}

TEST(ActivityAggregator, ResetForgetsThePreviousPass) {
  ActivityAggregator agg;
  agg.add(kernel("a"));
  agg.add_dropped(1);
  agg.reset();
  agg.add(kernel("b"));
  const RegionCounters c = agg.per_iteration(1);
  EXPECT_DOUBLE_EQ(c.values.at("kernels"), 1.0);
  EXPECT_EQ(c.kernel_names, std::vector<std::string>{"b"});
  EXPECT_THROW(agg.per_iteration(0), std::invalid_argument);
}

TEST(ActivityAggregator, DemanglesCppKernelNames) {
  EXPECT_EQ(measure::demangle("_Z3fooi"), "foo(int)");
  EXPECT_EQ(measure::demangle("sm90_xmma_gemm"), "sm90_xmma_gemm");
  EXPECT_EQ(measure::demangle("_Znot_a_symbol"), "_Znot_a_symbol");
}

TEST(ModelRatios, MeasuredOverModel) {
  RegionCounters c;
  c.values = {{"launches", 4}, {"dram_read_bytes", 900}, {"dram_write_bytes", 300}};
  add_model_ratios(c, 2, 1000);
  EXPECT_DOUBLE_EQ(c.values.at("launches_vs_model"), 2.0);
  EXPECT_DOUBLE_EQ(c.values.at("bytes_vs_model"), 1.2);
}

TEST(ModelRatios, UnavailableInputsGiveUnavailableRatios) {
  RegionCounters c;
  c.values = {{"launches", 3}};
  c.unavailable = {{"dram_read_bytes", "no device"}, {"dram_write_bytes", "no device"}};
  add_model_ratios(c, 3, 1000);
  EXPECT_DOUBLE_EQ(c.values.at("launches_vs_model"), 1.0);
  EXPECT_EQ(c.values.count("bytes_vs_model"), 0u);
  EXPECT_EQ(c.unavailable.at("bytes_vs_model"), "no device");
}

TEST(ModelRatios, ZeroFromAPassThatSawNothingIsUnavailableNotZero) {
  RegionCounters c;
  c.values = {{"launches", 0},        {"kernels", 0},
              {"memcpys", 0},         {"memsets", 0},
              {"dram_read_bytes", 0}, {"dram_write_bytes", 0},
              {"l2_bytes", 0},        {"profiled_gpu_time_ns", 0}};
  add_model_ratios(c, 3, 1000);
  EXPECT_TRUE(c.values.empty());
  EXPECT_NE(c.unavailable.at("launches").find("issues 3"), std::string::npos);
  EXPECT_NE(c.unavailable.at("dram_read_bytes").find("1000 bytes"), std::string::npos);
  EXPECT_EQ(c.unavailable.at("launches_vs_model"), c.unavailable.at("launches"));
  EXPECT_EQ(c.unavailable.at("bytes_vs_model"), c.unavailable.at("dram_read_bytes"));
}

TEST(ModelRatios, CpuLibraryCallCountOfZeroIsAMeasurement) {
  RegionCounters c;  // CPU counts (no `kernels`) are our own call counts, never missed records
  c.values = {{"launches", 0}};
  add_model_ratios(c, 1, 1000);
  EXPECT_EQ(c.values.at("launches"), 0);
  EXPECT_EQ(c.values.at("launches_vs_model"), 0);
}

TEST(ModelRatios, ZeroIsKeptWhereTheModelExpectsNothing) {
  RegionCounters c;
  c.values = {{"launches", 0}, {"dram_read_bytes", 0}, {"dram_write_bytes", 0}, {"l2_bytes", 0}};
  add_model_ratios(c, 0, 0);
  EXPECT_EQ(c.values.at("launches"), 0);
  EXPECT_EQ(c.values.at("dram_read_bytes"), 0);
  EXPECT_TRUE(c.unavailable.empty());
}

// On the CPU, launches are backend library calls and must equal the plan's model launches:
// qkv split 3 / fused 1, gate_up split 3 (2 GEMMs + SiLU-and-mul) / fused 2.
TEST(CpuCounterPasses, LaunchesEqualModelForEverySplitFusedVariant) {
  auto backend = make_cpu_backend();
  CounterPassOptions options;
  options.backend_reason = "test";
  CounterPasses passes = make_counter_passes(*backend, options);
  EXPECT_EQ(passes.status.at("launches"), "available");
  EXPECT_EQ(
      passes.status.at("dram_read_bytes").get<std::string>().rfind("unavailable: no device", 0), 0u)
      << passes.status.dump();
  const ShardShape s = shard(find_model("qwen3-0.6b"), 1);
  const std::map<std::pair<std::string, std::string>, double> expected = {
      {{"qkv", "split"}, 3},
      {{"qkv", "fused"}, 1},
      {{"gate_up", "split"}, 3},
      {{"gate_up", "fused"}, 2}};
  for (const auto& [key, launches] : expected) {
    Workspace ws(*backend, build_plan(key.first, key.second, s, 3, DType::f32), 11);
    RegionCounters measured;
    for (auto& pass : passes.collectors)
      measured.merge(pass->collect(key.first + "/" + key.second, [&ws] { ws.run(); }));
    const Cost cost = cost_of(ws.plan());
    EXPECT_EQ(cost.launches, launches) << key.first << "/" << key.second;
    ASSERT_EQ(measured.values.count("launches"), 1u) << key.first << "/" << key.second;
    EXPECT_DOUBLE_EQ(measured.values.at("launches"), cost.launches)
        << key.first << "/" << key.second;
    for (const char* absent : {"dram_read_bytes", "dram_write_bytes", "l2_bytes", "kernels"}) {
      EXPECT_EQ(measured.values.count(absent), 0u) << absent;
      EXPECT_EQ(measured.unavailable.count(absent), 1u) << absent;
    }
  }
}

TEST(CpuCounterPasses, PassesTurnedOffSayWhy) {
  auto backend = make_cpu_backend();
  CounterPassOptions options;
  options.launch_counts = false;
  options.dram_counters = false;
  CounterPasses passes = make_counter_passes(*backend, options);
  EXPECT_EQ(passes.status.at("launches"), "unavailable: off (--launch-counts=off)");
  EXPECT_EQ(passes.status.at("l2_bytes"), "unavailable: off (--dram-counters=off)");
  RegionCounters measured;
  int runs = 0;
  for (auto& pass : passes.collectors) measured.merge(pass->collect("x", [&runs] { ++runs; }));
  EXPECT_EQ(runs, 0) << "a pass that is off must not run the region";
  EXPECT_TRUE(measured.values.empty());
  EXPECT_EQ(measured.unavailable.at("launches"), "off (--launch-counts=off)");
}

#ifdef FUSEBENCH_HAVE_CUPTI
#include <cupti.h>

#include <cstring>

#include "measure/cupti_passes.hpp"

// Real CUPTI record layouts (CUpti_ActivityKernel10, CUpti_ActivityMemset4) in a buffer walked by
// cuptiActivityGetNextRecord, which works without a GPU.
TEST(ActivityBuffer, ParsesKernelAndMemsetRecords) {
  alignas(8) static std::uint8_t buffer[4096];
  std::memset(buffer, 0, sizeof(buffer));
  std::size_t used = 0;
  const char* names[] = {"_Z12silu_and_mulPKfS0_Pfi", "sm90_xmma_gemm", "sm90_xmma_gemm"};
  for (int i = 0; i < 3; ++i) {
    auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(buffer + used);
    k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k->name = names[i];
    k->graphId = i == 2 ? 9 : 0;
    used += sizeof(*k);
  }
  auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(buffer + used);
  m->kind = CUPTI_ACTIVITY_KIND_MEMSET;
  m->bytes = 256;
  used += sizeof(*m);
  auto* batched = reinterpret_cast<CUpti_ActivityMemcpy6*>(buffer + used);
  batched->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  batched->copyCount = 4;  // one record of a batched copy stands for four copies
  used += sizeof(*batched);

  ActivityAggregator agg;
  EXPECT_EQ(measure::parse_activity_buffer(buffer, used, agg), "");
  EXPECT_EQ(agg.kernels(), 3u);
  EXPECT_EQ(agg.graph_kernels(), 1u);
  EXPECT_EQ(agg.memsets(), 1u);
  EXPECT_EQ(agg.memcpys(), 4u);
  EXPECT_EQ(agg.kernel_names(),
            (std::vector<std::string>{"silu_and_mul(float const*, float const*, float*, int)",
                                      "sm90_xmma_gemm"}));
}
#endif
