// Timing regimes: the pure policies (rotation, runs per sample, decomposition), the CPU report
// entries, and the GPU pieces (skipped without a device).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "cli_run.hpp"
#include "fusebench/backend.hpp"
#include "fusebench/cost_model.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/routing.hpp"
#include "fusebench/shapes.hpp"
#include "fusebench/verify.hpp"
#include "fusebench/workspace.hpp"
#include "measure/ceilings.hpp"
#include "measure/timing_device.hpp"
#include "measure/timing_policy.hpp"

using namespace fusebench;
using namespace fusebench::measure;

TEST(TimingPolicy, ParsesRegimes) {
  EXPECT_EQ(parse_regime("cold"), Regime::cold);
  EXPECT_EQ(parse_regime("graph"), Regime::graph);
  EXPECT_FALSE(regime_needs_gpu(Regime::eager));
  EXPECT_TRUE(regime_needs_gpu(Regime::batch));
  try {
    parse_regime("hot");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("valid: cold, batch, eager, graph"), std::string::npos);
  }
}

TEST(TimingPolicy, RotationCoversTwiceTheCache) {
  const std::size_t mib = 1 << 20;
  const auto r = rotation_sets(4 * mib, 60 * mib, 4096 * mib);
  EXPECT_EQ(r.sets, 31u);  // ceil(120 / 4) + 1: the other 30 sets move 2x L2 between uses
  EXPECT_TRUE(r.covers_cache);
  EXPECT_GE((r.sets - 1) * 4 * mib, 2 * 60 * mib);
}

TEST(TimingPolicy, NoRotationWhenOneSetExceedsTwiceTheCache) {
  const std::size_t mib = 1 << 20;
  EXPECT_EQ(rotation_sets(120 * mib, 60 * mib, 4096 * mib).sets, 1u);
  // Between one and two caches a set would find part of itself still cached: rotate.
  const auto r = rotation_sets(100 * mib, 60 * mib, 4096 * mib);
  EXPECT_EQ(r.sets, 3u);
  EXPECT_GE((r.sets - 1) * 100 * mib, 2 * 60 * mib);
  EXPECT_EQ(rotation_sets(4 * mib, 0, 4096 * mib).sets, 1u);  // unknown cache
}

TEST(TimingPolicy, RotationRespectsMemoryBudget) {
  const std::size_t mib = 1 << 20;
  const auto r = rotation_sets(4 * mib, 60 * mib, 40 * mib);
  EXPECT_EQ(r.sets, 10u);
  EXPECT_FALSE(r.covers_cache);  // said, not hidden
  EXPECT_EQ(rotation_sets(1024, 60 * mib, 4096 * mib, 64).sets, 64u);
}

TEST(TimingPolicy, RunsBehindTheBlockingKernelStayFarBelowTheLaunchQueue) {
  EXPECT_EQ(max_runs_behind_block(1), 64);  // 128 queued launches, counting 2 per model launch
  EXPECT_EQ(max_runs_behind_block(3), 21);
  EXPECT_EQ(max_runs_behind_block(100), 1);  // never 0
  EXPECT_EQ(max_runs_behind_block(0), 64);
}

TEST(TimingPolicy, RunsPerSample) {
  EXPECT_EQ(runs_per_sample(10e-6, 1e-3, 1000), 100);
  EXPECT_EQ(runs_per_sample(10e-6, 1e-3, 64), 64);  // the batch queue bound
  EXPECT_EQ(runs_per_sample(5e-3, 1e-3, 1000), 1);
  EXPECT_EQ(runs_per_sample(0, 1e-3, 1000), 1);
}

TEST(TimingDecomposition, PartsSumToTheEagerSaving) {
  // split: 3 launches, eager 30 us, device 18 us; fused: 1 launch, eager 14 us, device 12 us.
  const VariantTimes split{30e-6, 18e-6, 12e6, 3};
  const VariantTimes fused{14e-6, 12e-6, 10e6, 1};
  const double bw = 4e12;  // 4 TB/s
  const Decomposition d = decompose(split, fused, bw);
  EXPECT_NEAR(d.total_s, 16e-6, 1e-15);
  EXPECT_NEAR(d.host_launch_s, (30e-6 - 18e-6) - (14e-6 - 12e-6), 1e-15);  // 10 us
  EXPECT_NEAR(d.device_s, 6e-6, 1e-15);
  EXPECT_NEAR(d.bytes_saved, 2e6, 1e-6);
  EXPECT_NEAR(d.bytes_s, 0.5e-6, 1e-15);  // 2 MB at 4 TB/s
  EXPECT_NEAR(d.device_overhead_s, 5.5e-6, 1e-15);
  EXPECT_NEAR(d.host_launch_s + d.bytes_s + d.device_overhead_s, d.total_s, 1e-15);
  EXPECT_EQ(d.launches_saved, 2);
  ASSERT_TRUE(d.device_overhead_per_launch_s.has_value());
  EXPECT_NEAR(*d.device_overhead_per_launch_s, 2.75e-6, 1e-15);
  EXPECT_NEAR(*d.host_launch_per_launch_s, 5e-6, 1e-15);
  const auto j = to_json(d);
  EXPECT_TRUE(j.contains("host_launch_saving_s"));
  EXPECT_TRUE(j.contains("device_overhead_per_launch_s"));
}

TEST(TimingDecomposition, NoPerLaunchFiguresWithoutSavedLaunches) {
  const Decomposition d = decompose({10e-6, 8e-6, 1e6, 2}, {11e-6, 9e-6, 1e6, 2}, 1e12);
  EXPECT_LT(d.total_s, 0);  // a loss is reported as a negative saving
  EXPECT_FALSE(d.device_overhead_per_launch_s.has_value());
  EXPECT_FALSE(to_json(d).contains("device_overhead_per_launch_s"));
}

TEST(TimingDecomposition, RejectsMissingInputs) {
  EXPECT_THROW(decompose({1, 1, 0, 1}, {1, 1, 0, 1}, 0), std::invalid_argument);
  EXPECT_THROW(decompose({1, 0, 0, 1}, {1, 1, 0, 1}, 1), std::invalid_argument);
}

TEST(TimingCeilings, RooflineFraction) {
  const ShardShape s = shard(find_model("qwen3-0.6b"), 1);
  const Plan plan = build_plan("qkv", "fused", s, 1, DType::f32);
  Ceilings c{1e12, 1e11, "measured"};
  const double roof = roofline_seconds(plan, c);
  EXPECT_NEAR(roofline_fraction(plan, 2 * roof, c), 0.5, 1e-12);
  EXPECT_LT(roofline_fraction(plan, 0, c), 0);  // not computable: negative, never NaN
  EXPECT_LT(roofline_fraction(plan, 1, Ceilings{}), 0);
}

TEST(TimingCeilings, CpuCeilingsAreMeasuredQuickly) {
  auto backend = make_cpu_backend();
  const auto t0 = std::chrono::steady_clock::now();
  const auto m = measure_ceilings(*backend, {DType::f32}, nullptr);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(m.bandwidth, 1e8);
  EXPECT_GT(m.peak_flops.at(DType::f32), 1e8);
  EXPECT_EQ(m.json["source"], "measured");
  EXPECT_LT(s, 10.0);  // ~2 s budget on two busy cores, with margin
}

// Issue 29: every quantized spec of the sweep gets its scaled GEMM's ceiling, labelled with how
// the backend runs it; a spec not measured has no peak (its entries get no roofline_fraction).
TEST(TimingCeilings, QuantizedSpecsGetTheirScaledGemmCeilingLabelled) {
  auto backend = make_cpu_backend();
  const std::vector<QuantSpec> specs = {parse_quant_spec("fp8"), parse_quant_spec("int8:channel"),
                                        parse_quant_spec("fp8")};
  const auto m = measure_ceilings(*backend, {DType::f32}, nullptr, specs);
  const auto& by = m.json.at("peak_flops_by_quant");
  ASSERT_EQ(by.size(), 2u) << by.dump();  // one per distinct spec
  for (const QuantSpec& q : specs) {
    const auto& e = by.at(q.name());
    ASSERT_TRUE(e.contains("flops")) << e.dump();
    EXPECT_GT(e["flops"].get<double>(), 1e8) << q.name();
    EXPECT_EQ(e["execution"], backend->quant_execution(q.dtype)) << q.name();
    EXPECT_DOUBLE_EQ(m.for_quant(q).peak_flops, e["flops"].get<double>());
    EXPECT_DOUBLE_EQ(m.for_quant(q).bandwidth, m.bandwidth);
  }
  EXPECT_EQ(m.json["peak_flops_by_quant"]["fp8:tensor"]["execution"].get<std::string>().rfind(
                "emulated", 0),
            0u);  // no fp8 instruction on any CPU this runs on
  EXPECT_EQ(m.for_quant(parse_quant_spec("fp8:block")).peak_flops, 0);  // not measured
  EXPECT_TRUE(m.json.contains("quant_gemm_method"));
}

// Issue 19: published ceilings are never below what the sweep observed, so no entry's
// roofline_fraction can exceed 1, whatever the measured ceilings were (here: far too low).
TEST(TimingCeilings, NeverBelowWhatTheSweepObserved) {
  MeasuredCeilings measured;
  measured.bandwidth = 1e9;
  measured.peak_flops[DType::f32] = 1e9;
  measured.peak_flops[DType::bf16] = 2e9;
  measured.json = {{"source", "measured"}};
  CeilingsLog log(measured);
  std::mt19937 rng(19);
  std::uniform_real_distribution<double> speed(0.01, 100);  // x the measured roofline
  std::vector<std::pair<std::string, double>> seen;
  const ShardShape s = shard(find_model("qwen3-0.6b"), 1);
  int i = 0;
  for (const char* op : {"qkv", "gate_up"}) {
    for (const char* variant : {"split", "fused"}) {
      for (std::int64_t tokens : {1, 16, 256, 4096}) {
        for (DType d : {DType::f32, DType::bf16}) {
          const Plan plan = build_plan(op, variant, s, tokens, d);
          const double t = roofline_seconds(plan, log.for_dtype(d)) / speed(rng);
          const std::string name = "entry" + std::to_string(i++);
          log.observe(name, d, plan, t);
          EXPECT_LE(log.fraction(name, t), 1 + 1e-9) << name;
          seen.emplace_back(name, t);
        }
      }
    }
  }
  // On the final ceilings too (what the report's rewrite publishes for every entry).
  for (const auto& [name, t] : seen) EXPECT_LE(log.fraction(name, t), 1 + 1e-9) << name;
  const nlohmann::json j = log.json();
  EXPECT_EQ(j["source"], "measured, raised to what the sweep observed");
  EXPECT_GT(j["raised_count"].get<int>(), 0);
  EXPECT_EQ(j["measured_bandwidth"], 1e9);
  EXPECT_GT(j["bandwidth"].get<double>(), 1e9);
  EXPECT_TRUE(j["raised"][0].contains("entry"));
  // An entry slower than the roofline raises nothing.
  CeilingsLog slow(measured);
  const Plan plan = build_plan("qkv", "fused", s, 16, DType::f32);
  slow.observe("slow", DType::f32, plan, 10 * roofline_seconds(plan, slow.for_dtype(DType::f32)));
  EXPECT_EQ(slow.json()["source"], "measured");
  EXPECT_NEAR(slow.fraction("slow", 10 * roofline_seconds(plan, slow.for_dtype(DType::f32))), 0.1,
              1e-12);
}

// Issue 29: a shared host's bandwidth moves over a run; measured again, each entry is judged
// against the measurement nearest it, raised only by the entries nearest that measurement, and
// the report shows the spread.
TEST(TimingCeilings, EachEntryIsJudgedByTheMeasurementNearestIt) {
  MeasuredCeilings first, later;
  first.bandwidth = 1e9;
  first.peak_flops[DType::f32] = 1e12;
  first.json = {{"source", "measured"}};
  later = first;
  later.bandwidth = 2e9;  // the neighbour stopped streaming
  CeilingsLog log(first);
  const ShardShape s = shard(find_model("qwen3-0.6b"), 1);
  const Plan plan = build_plan("qkv", "fused", s, 1, DType::f32);  // bandwidth-bound at 1 token
  const double t = 10 * roofline_seconds(plan, log.for_dtype(DType::f32));  // 0.1 of the roofline
  log.observe("early", DType::f32, plan, t, 10);
  log.observe("late", DType::f32, plan, t, 90);
  EXPECT_NEAR(log.fraction("late", t), 0.1, 1e-12);  // only the first measurement so far
  log.add_measurement(100, later);
  EXPECT_EQ(log.judged_against_s("early"), 0);
  EXPECT_EQ(log.judged_against_s("late"), 100);
  EXPECT_NEAR(log.fraction("early", t), 0.1, 1e-12);
  EXPECT_NEAR(log.fraction("late", t), 0.05, 1e-12);  // twice the bandwidth: half the fraction
  // An entry faster than the later roofline raises the later measurement only.
  const double fast = roofline_seconds(plan, log.for_dtype(DType::f32, 100)) / 4;
  log.observe("fast", DType::f32, plan, fast, 99);
  EXPECT_LE(log.fraction("fast", fast), 1 + 1e-9);
  const nlohmann::json j = log.json();
  EXPECT_EQ(j["source"], "measured");  // the first measurement: not raised
  const auto& over = j["over_run"];
  ASSERT_EQ(over["measurements"].size(), 2u);
  EXPECT_EQ(over["measurements"][1]["at_s"], 100);
  EXPECT_EQ(over["measurements"][1]["raised_count"], 1);
  EXPECT_NEAR(over["spread"]["bandwidth"]["max_over_min"].get<double>(), 2, 1e-12);
  EXPECT_EQ(over["spread"]["peak_flops_by_dtype"]["fp32"]["max_over_min"], 1);
}

TEST(TimingCeilings, CpuPhysicalPeakFromTheCpusOwnFigures) {
  const nlohmann::json p = cpu_physical_peak();
  if (p.contains("unavailable")) GTEST_SKIP() << p["unavailable"];
  EXPECT_GE(p["cores"].get<int>(), 1);
  EXPECT_GT(p["clock_mhz"].get<double>(), 0);
  const int lanes = p["fp32_lanes"].get<int>();
  EXPECT_TRUE(lanes == 4 || lanes == 8 || lanes == 16);
  EXPECT_NEAR(p["fp32_per_fma_unit"].get<double>(),
              p["cores"].get<int>() * lanes * (p["fma"].get<bool>() ? 2 : 1) *
                  p["clock_mhz"].get<double>() * 1e6,
              1);
  EXPECT_DOUBLE_EQ(p["fp32_two_fma_units"].get<double>(), 2 * p["fp32_per_fma_unit"].get<double>());
}

TEST(OneLaunchVariants, VerifiedAgainstSplitOnCpu) {
  auto backend = make_cpu_backend();
  const ShardShape s = shard(find_model("qwen3-0.6b"), 1);
  for (const auto& [op, variant] : {std::pair{"qkv", "grouped"}, std::pair{"gate_up", "batched"}}) {
    const Plan plan = build_plan(op, variant, s, 3, DType::f32);
    ASSERT_TRUE(std::holds_alternative<GroupedGemmStep>(plan.steps.front())) << op;
    EXPECT_EQ(cost_of(plan).gemm_launches, 1) << op;
    bool seen = false;
    for (const auto& r : verify_op(*backend, op, s, 3, DType::f32, 99, true)) {
      if (r.variant != variant) continue;
      seen = true;
      EXPECT_TRUE(r.ok()) << r.summary();
      EXPECT_FALSE(r.comparisons.empty());
    }
    EXPECT_TRUE(seen) << op << "/" << variant;
  }
  EXPECT_FALSE(backend->one_launch_gemm_caveat().empty());
}

namespace {

std::unique_ptr<Backend> gpu_backend(std::string* why) { return make_cuda_backend(why); }

}  // namespace

TEST(TimingGpu, BlockingKernelHoldsTheStreamUntilReleased) {
  std::string why;
  auto backend = gpu_backend(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  auto dev = make_device_timing(*backend, &why);
  ASSERT_TRUE(dev) << why;
  dev->block(5.0);
  auto timer = backend->make_timer();
  timer->start();
  timer->stop();
  dev->release();
  backend->synchronize();
  EXPECT_FALSE(dev->block_timed_out());
  dev->block(0.01);  // never released: gives up after 10 ms
  backend->synchronize();
  EXPECT_TRUE(dev->block_timed_out());
}

TEST(TimingGpu, ClockProbeAndGraphReplay) {
  std::string why;
  auto backend = gpu_backend(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  auto dev = make_device_timing(*backend, &why);
  ASSERT_TRUE(dev) << why;
  dev->probe_clock();
  backend->synchronize();
  EXPECT_GT(dev->probed_clock_mhz(), 100);
  EXPECT_LT(dev->probed_clock_mhz(), 5000);
  EXPECT_GT(dev->default_clock_mhz(), 0);
  const ShardShape s = shard(find_model("qwen3-0.6b"), 1);
  Workspace ws(*backend, build_plan("qkv", "fused", s, 4, DType::bf16), 7);
  ws.run();  // algorithm selection outside the capture
  const auto before = ws.read(ws.plan().outputs.at("q"));
  auto graph = dev->capture([&] { ws.run(); });
  graph->launch();
  backend->synchronize();
  EXPECT_EQ(ws.read(ws.plan().outputs.at("q")), before);  // same inputs, same result
  EXPECT_GT(dev->copy_bandwidth(64 << 20, 3), 1e11);
}

// The least proven captures: cublasGemmGroupedBatchedEx and the stride-0 batched cuBLASLt matmul.
// Outputs are zeroed before the replay, so a replay that writes nothing fails.
TEST(TimingGpu, GraphReplayOfGroupedAndBatchedVariantsRewritesOutputs) {
  std::string why;
  auto backend = gpu_backend(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  auto dev = make_device_timing(*backend, &why);
  ASSERT_TRUE(dev) << why;
  const ShardShape s = shard(find_model("llama3-8b"), 1);
  for (const auto& [op, variant] : std::vector<std::pair<std::string, std::string>>{
           {"qkv", "grouped"}, {"gate_up", "batched"}}) {
    Workspace ws(*backend, build_plan(op, variant, s, 37, DType::bf16), 7);
    ws.run();  // pointer arrays and algorithms outside the capture
    std::map<std::string, std::vector<float>> before;
    for (const auto& [name, view] : ws.plan().outputs) before[name] = ws.read(view);
    auto graph = dev->capture([&] { ws.run(); });
    const Plan& plan = ws.plan();
    for (int b = 0; b < static_cast<int>(plan.buffers.size()); ++b) {
      const BufferSpec& spec = plan.buffers[static_cast<std::size_t>(b)];
      if (spec.role != BufferRole::output) continue;
      const std::vector<std::byte> zeros(plan.buffer_bytes(b));
      backend->upload(ws.ref(View{b, 0, 0, spec.rows, spec.cols}).data, zeros.data(), zeros.size());
    }
    graph->launch();
    backend->synchronize();
    for (const auto& [name, view] : plan.outputs) {
      EXPECT_EQ(ws.read(view), before.at(name)) << op << "/" << variant << " output " << name;
    }
  }
}

// The moe op in a graph: its routing is the plan's, uploaded by the eager run before the capture,
// so a replay writes what the eager run wrote (the routing it captured is the entry's own).
TEST(TimingGpu, GraphReplayOfMoeVariantsRewritesOutputs) {
  std::string why;
  auto backend = gpu_backend(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  auto dev = make_device_timing(*backend, &why);
  ASSERT_TRUE(dev) << why;
  const std::string text =
      R"({"model_type": "qwen3_moe", "hidden_size": 1024, "num_attention_heads": 16,
          "num_key_value_heads": 4, "head_dim": 64, "intermediate_size": 3072,
          "moe_intermediate_size": 384, "num_experts": 32, "num_experts_per_tok": 8,
          "norm_topk_prob": true, "hidden_act": "silu", "num_hidden_layers": 1})";
  ShardShape s = shard(parse_hf_config(text, "mid-qwen3-moe.json"), 1, LayerKind::expert);
  auto block = std::make_shared<MoeBlock>();
  block->rule = routing_rule_from_config(text, "mid-qwen3-moe.json");
  block->source = parse_routing("zipf:1.2");
  block->seed = 3;
  s.moe = std::move(block);
  for (const char* variant : {"per_expert", "grouped", "padded"}) {
    Workspace ws(*backend, build_plan("moe", variant, s, 37, DType::bf16), 7);
    ws.run();
    const Plan& plan = ws.plan();
    std::map<std::string, std::vector<float>> before;
    for (const auto& [name, view] : plan.outputs) before[name] = ws.read(view);
    auto graph = dev->capture([&] { ws.run(); });
    for (int b = 0; b < static_cast<int>(plan.buffers.size()); ++b) {
      const BufferSpec& spec = plan.buffers[static_cast<std::size_t>(b)];
      if (spec.role != BufferRole::output) continue;
      const std::vector<std::byte> zeros(plan.buffer_bytes(b));
      backend->upload(ws.ref(View{b, 0, 0, spec.rows, spec.cols}).data, zeros.data(), zeros.size());
    }
    graph->launch();
    backend->synchronize();
    for (const auto& [name, view] : plan.outputs)
      EXPECT_EQ(ws.read(view), before.at(name)) << "moe/" << variant << " output " << name;
  }
}

TEST(TimingGpu, OneLaunchVariantsEqualSplit) {
  std::string why;
  auto backend = gpu_backend(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  const ShardShape s = shard(find_model("llama3-8b"), 1);
  for (const char* op : {"qkv", "gate_up"}) {
    for (std::int64_t tokens : {1, 37}) {
      for (const auto& r : verify_op(*backend, op, s, tokens, DType::bf16, 5, tokens == 1)) {
        EXPECT_TRUE(r.ok()) << r.summary();
      }
    }
  }
}

// End to end on the CPU: the binary's report entries carry the timing statistics.
namespace {

int run_binary(const std::string& args, std::string* output) {
  const auto r = fusebench::testing::run_fusebench(args);
  *output += r.output;
  return r.exit_code;
}

}  // namespace

TEST(TimingReport, CpuEntriesCarryStatistics) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("fusebench_timing_" + std::to_string(::getpid()) + ".json");
  std::string out;
  const int rc = run_binary(
      "--backend=cpu --ops=qkv --tokens=1 --dtypes=fp32 --timing-max-time=0.2 --report=" +
          path.string(),
      &out);
  ASSERT_EQ(rc, 0) << out;
  std::ifstream in(path);
  const auto report = nlohmann::json::parse(in);
  std::filesystem::remove(path);
  EXPECT_NE(report["context"]["ceilings"]["source"].get<std::string>().find("measured"),
            std::string::npos);
  EXPECT_GT(report["context"]["ceilings"]["bandwidth"].get<double>(), 0);
  EXPECT_TRUE(report["context"]["ceilings"].contains("physical_peak"));
  EXPECT_TRUE(report["context"]["cpu_threads"].contains("threads"));
  EXPECT_TRUE(report["context"]["host_load"].contains("start"));
  EXPECT_TRUE(report["context"]["host_load"].contains("end"));
  EXPECT_TRUE(report["context"].contains("contention"));
  EXPECT_EQ(report["context"]["timing"]["regimes"], nlohmann::json::array({"eager"}));
  int entries = 0;
  for (const auto& b : report["benchmarks"]) {
    ++entries;
    EXPECT_EQ(b["timing"], "eager");
    EXPECT_NE(b["name"].get<std::string>().find("/timing:eager"), std::string::npos);
    for (const char* key :
         {"time_median", "time_mean", "time_min", "time_cv", "samples", "samples_dropped_throttled",
          "roofline_fraction", "runs_per_sample", "time_median_ci_low", "time_median_ci_high",
          "timing_rounds", "timing_stop", "timing_target", "interleaved_with", "speedup_baseline",
          "speedup_over"}) {
      EXPECT_TRUE(b.contains(key)) << key;
    }
    EXPECT_LE(b["time_median_ci_low"].get<double>(), b["time_median"].get<double>());
    EXPECT_GE(b["time_median_ci_high"].get<double>(), b["time_median"].get<double>());
    EXPECT_EQ(b["interleaved_with"], nlohmann::json::array({"split", "fused"}));
    EXPECT_EQ(b["speedup_baseline"], "split");
    EXPECT_EQ(b["timing_target"], "speedup_ci_half_width <= 0.03");  // the CPU default
    if (b["variant"] == "fused") {
      for (const char* key : {"speedup", "speedup_ci_low", "speedup_ci_high", "speedup_pairs"})
        EXPECT_TRUE(b.contains(key)) << key;
      EXPECT_LE(b["speedup_ci_low"].get<double>(), b["speedup"].get<double>());
      EXPECT_GE(b["speedup_ci_high"].get<double>(), b["speedup"].get<double>());
      EXPECT_EQ(b["speedup_over"]["split"]["speedup"], b["speedup"]);
    } else {
      EXPECT_FALSE(b.contains("speedup"));  // the baseline has none of its own
      EXPECT_TRUE(b["speedup_over"].contains("fused"));
    }
    EXPECT_GE(b["samples"].get<double>(), 1);
    EXPECT_LE(b["time_min"].get<double>(), b["time_median"].get<double>());
    // real_time (us) is the per-run median.
    EXPECT_NEAR(b["real_time"].get<double>() * 1e-6, b["time_median"].get<double>(),
                1e-9 + 1e-6 * b["time_median"].get<double>());
    EXPECT_TRUE(b.contains("sm_clock_unavailable"));  // said, not zero
  }
  EXPECT_EQ(entries, 2);  // split and fused; grouped is skipped on the CPU
  EXPECT_EQ(report["context"]["timing"]["stopping_rule"]["target_ci"], 0.03);
  EXPECT_NE(
      report["context"]["timing"]["interval_method"].get<std::string>().find("order-statistic"),
      std::string::npos);
  // The console says how the measurement stopped.
  EXPECT_NE(out.find("interleaved group measurement(s)"), std::string::npos) << out;
}

namespace {

nlohmann::json run_report(const std::string& args, const std::string& tag, std::string* out) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("fusebench_timing_" + tag + std::to_string(::getpid()) + ".json");
  const int rc = run_binary(args + " --report=" + path.string(), out);
  EXPECT_EQ(rc, 0) << *out;
  std::ifstream in(path);
  auto report = nlohmann::json::parse(in);
  std::filesystem::remove(path);
  return report;
}

}  // namespace

TEST(TimingReport, CeilingsMeasuredAgainDuringTheRunJudgeTheEntriesNearest) {
  std::string out;
  const auto report = run_report(
      "--backend=cpu --ops=qkv --tokens=1,4 --dtypes=fp32 --timing-max-time=0.05 "
      "--cpu-threads=1 --ceilings-every=0.001",
      "ceilings_every_", &out);
  const auto& over = report["context"]["ceilings"]["over_run"];
  // At the start, between groups (the CPU's two groups share one window of blocks) and after
  // the last.
  ASSERT_GE(over["measurements"].size(), 2u) << over.dump();
  std::set<double> at;
  for (const auto& m : over["measurements"]) {
    EXPECT_GT(m["bandwidth"].get<double>(), 0);
    at.insert(m["at_s"].get<double>());
  }
  EXPECT_GT(over["spread"]["bandwidth"]["max"].get<double>(), 0);
  for (const auto& e : report["benchmarks"]) {
    ASSERT_TRUE(e.contains("ceilings_at_s")) << e["name"];
    EXPECT_EQ(at.count(e["ceilings_at_s"].get<double>()), 1u) << e["name"];
  }
  EXPECT_NE(run_binary("--backend=cpu --ceilings-every=-1 --list", &out), 0);
  EXPECT_NE(out.find("--ceilings-every"), std::string::npos) << out;
}

// One group measurement serves both entries: the baseline's speedup over fused and fused's over
// split come from the same rounds (reciprocal ratios, reciprocal interval ends).
TEST(TimingReport, BothEntriesOfAGroupComeFromOneInterleavedMeasurement) {
  std::string out;
  const auto report = run_report(
      "--backend=cpu --ops=gate_up --tokens=2 --dtypes=fp32 --timing-max-time=0.1", "pair", &out);
  ASSERT_EQ(report["benchmarks"].size(), 2u);
  const auto& split = report["benchmarks"][0];
  const auto& fused = report["benchmarks"][1];
  ASSERT_EQ(split["variant"], "split");
  ASSERT_EQ(fused["variant"], "fused");
  const auto& over = split["speedup_over"]["fused"];
  EXPECT_EQ(over["pairs"], fused["speedup_pairs"]);
  EXPECT_EQ(split["timing_rounds"], fused["timing_rounds"]);
  // The interval where the pairs reach it (not at every count of 6 or more: a contended group's
  // pairs may not), on both sides or on neither.
  EXPECT_EQ(over.contains("ci_low"), fused.contains("speedup_ci_low")) << fused.dump();
  if (fused.contains("speedup_ci_low")) {
    EXPECT_GE(fused["speedup_pairs"].get<double>(), 6);
    EXPECT_NEAR(over["ci_low"].get<double>() * fused["speedup_ci_high"].get<double>(), 1, 1e-9);
    EXPECT_NEAR(over["ci_high"].get<double>() * fused["speedup_ci_low"].get<double>(), 1, 1e-9);
  } else {  // a loaded machine left too few pairs: neither side has an interval
    EXPECT_FALSE(over.contains("ci_low"));
    EXPECT_FALSE(fused.contains("speedup_ci_low"));
  }
  EXPECT_NEAR(over["speedup"].get<double>() * fused["speedup"].get<double>(), 1, 1e-9);
  EXPECT_NE(out.find("1 interleaved group measurement(s)"), std::string::npos) << out;
}

// --benchmark_repetitions=N: each repetition is a fresh measurement of the whole group.
TEST(TimingReport, RepetitionsMeasureTheGroupAgain) {
  std::string out;
  const auto report = run_report(
      "--backend=cpu --ops=qkv --tokens=1 --dtypes=fp32 --timing-max-time=0.05 "
      "--benchmark_repetitions=3",
      "reps", &out);
  int fused_iterations = 0;
  for (const auto& b : report["benchmarks"]) {
    if (b["run_type"] != "iteration" || b["variant"] != "fused") continue;
    ++fused_iterations;
    EXPECT_TRUE(b.contains("speedup")) << b.dump();
    // 0.05 s may leave fewer than 6 pairs on a loaded machine: then no interval, and a note.
    EXPECT_TRUE(b.contains("speedup_ci_low") || b.contains("speedup_ci_note")) << b.dump();
    // Its fields are its own repetition's, as its counters are (issue 36: every repetition
    // carried the last one's speedup_over, beside its own speedup_pairs).
    ASSERT_TRUE(b["speedup_over"].contains("split")) << b.dump();
    EXPECT_EQ(b["speedup_over"]["split"]["pairs"], b["speedup_pairs"]) << b.dump();
    EXPECT_NE(b.contains("speedup_ci_low"), b.contains("speedup_ci_note")) << b.dump();
  }
  EXPECT_EQ(fused_iterations, 3);
  EXPECT_NE(out.find("3 interleaved group measurement(s)"), std::string::npos) << out;
}

// A filter that leaves the baseline out: the entry is measured alone, says why it has no
// speedup, and its stopping rule targets its own median.
TEST(TimingReport, FilterWithoutTheBaselineGivesNoSpeedupAndSaysWhy) {
  std::string out;
  const auto report = run_report(
      "--backend=cpu --ops=qkv --tokens=1 --dtypes=fp32 --timing-max-time=0.05 "
      "--benchmark_filter=qkv/fused",
      "filter", &out);
  ASSERT_EQ(report["benchmarks"].size(), 1u);
  const auto& b = report["benchmarks"][0];
  EXPECT_EQ(b["variant"], "fused");
  EXPECT_FALSE(b.contains("speedup"));
  EXPECT_NE(b["speedup_unavailable"].get<std::string>().find("--benchmark_filter"),
            std::string::npos)
      << b["speedup_unavailable"];
  EXPECT_EQ(b["interleaved_with"], nlohmann::json::array({"fused"}));
  EXPECT_EQ(b["timing_target"], "time_median_ci_half_width <= 0.03");
  // An interval, or (a loaded machine leaving too few samples in 0.05 s) the note saying why not.
  EXPECT_TRUE(b.contains("time_median_ci_low") || b.contains("time_median_ci_note")) << b.dump();
}

// Issue 19: no interval without evidence. A run forced to a few samples reports values alone:
// no *_ci_low/high anywhere (not even [min, max]), and each entry says why.
TEST(TimingReport, FewerThanSixValuesGiveNoInterval) {
  std::string out;
  const auto report = run_report(
      "--backend=cpu --ops=qkv,gate_up --tokens=16 --dtypes=fp32 --timing-min-time=0 "
      "--timing-max-time=0.001",
      "few", &out);
  int with_speedup = 0;
  for (const auto& b : report["benchmarks"]) {
    if (b.value("error_occurred", false)) continue;
    const double samples = b["samples"].get<double>();
    ASSERT_LT(samples, 6) << "the run was meant to stop after a few samples: " << b.dump();
    for (const char* key :
         {"time_median_ci_low", "time_median_ci_high", "speedup_ci_low", "speedup_ci_high"})
      EXPECT_FALSE(b.contains(key)) << key << " in " << b["name"];
    for (const auto& [other, e] : b["speedup_over"].items()) {
      EXPECT_FALSE(e.contains("ci_low")) << other;
      EXPECT_FALSE(e.contains("ci_high")) << other;
    }
    if (samples > 0) {
      ASSERT_TRUE(b.contains("time_median_ci_note")) << b["name"];
      EXPECT_NE(b["time_median_ci_note"].get<std::string>().find("no 95% interval"),
                std::string::npos);
    }
    if (b.contains("speedup")) {
      ++with_speedup;
      ASSERT_TRUE(b.contains("speedup_ci_note"));
      EXPECT_NE(b["speedup_ci_note"].get<std::string>().find("at least 6"), std::string::npos);
    } else if (b["variant"] != "split") {
      // Beside a busy neighbour every sample may be preempted: then no pair at all, said so.
      EXPECT_TRUE(b.contains("speedup_unavailable")) << b.dump();
    }
  }
  // Beside a quiet neighbour fused has its value alone; under load it may have no pair at all.
  std::cerr << "entries with a speedup (and no interval): " << with_speedup << "\n";
}

TEST(TimingReport, RetiredCvTargetIsRefusedWithTheReplacement) {
  std::string out;
  EXPECT_EQ(run_binary("--backend=cpu --timing-target-cv=0.01 --list", &out), 2) << out;
  EXPECT_NE(out.find("--timing-target-ci"), std::string::npos) << out;
  out.clear();
  EXPECT_NE(run_binary("--backend=cpu --timing-target-ci=0 --list", &out), 0) << out;
}

TEST(TimingReport, GpuRegimesOnCpuFailAtStartup) {
  std::string out;
  EXPECT_EQ(run_binary("--backend=cpu --ops=qkv --tokens=1 --timing=batch --list", &out), 2) << out;
  EXPECT_NE(out.find("needs a GPU"), std::string::npos) << out;
  out.clear();
  EXPECT_NE(run_binary("--backend=cpu --ops=qkv --tokens=1 --variants=grouped --list", &out), 0)
      << out;
  EXPECT_NE(out.find("grouped is not timed here"), std::string::npos) << out;
  EXPECT_NE(out.find("not one kernel"), std::string::npos) << out;
}
