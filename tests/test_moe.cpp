// The moe op (issue 30, docs/moe.md): launches and bytes per variant from the plan, each
// variant's correctness against float64 at tiny shapes (routing rule, shared expert, biases and
// clamped activation included), the padding it reports, and a CLI run with the entry's fields.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli_run.hpp"
#include "fusebench/cost_model.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/routing.hpp"
#include "fusebench/shapes.hpp"
#include "fusebench/verify.hpp"
#include "fusebench/workspace.hpp"
#include "gpu_test_backend.hpp"

namespace {

using namespace fusebench;

std::string config_path(const std::string& file) {
  return std::string(FUSEBENCH_TEST_CONFIGS) + "/" + file;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The expert shard of a test config with the moe op's block (routing `routing`, seed 7).
ShardShape moe_shard(const std::string& file, const std::string& routing = "router") {
  const std::string path = config_path(file);
  const ModelShape model = load_hf_config(path);
  ShardShape s = shard(model, 1, LayerKind::expert);
  auto b = std::make_shared<MoeBlock>();
  b->rule = routing_rule_from_config(read(path), path);
  b->source = parse_routing(routing);
  b->seed = 7;
  for (const auto& l : model.mlp_layer_list())
    if (l.kind == LayerKind::shared_expert) b->shared_intermediate = l.intermediate;
  s.moe = std::move(b);
  return s;
}

std::int64_t active(const Plan& p) { return routing_stats(p.moe->assignment).active_experts; }

TEST(Moe, LaunchesPerVariant) {
  // tiny-qwen3-moe: 8 experts, top-2, no shared expert.
  const ShardShape s = moe_shard("tiny-qwen3-moe.json", "uniform");
  for (std::int64_t m : {1, 4, 64}) {
    const Plan loop = build_plan("moe", "per_expert", s, m, DType::bf16);
    const Plan split = build_plan("moe", "per_expert_split", s, m, DType::bf16);
    // Gather, w13, act, w2, scatter-add per active expert (split: gate and up apart).
    EXPECT_EQ(cost_of(loop).launches, 5 * active(loop)) << m;
    EXPECT_EQ(cost_of(loop).gemm_launches, 2 * active(loop)) << m;
    EXPECT_EQ(cost_of(split).launches, 6 * active(split)) << m;
    for (const char* v : {"grouped", "padded"}) {
      const Cost c = cost_of(build_plan("moe", v, s, m, DType::bf16));
      EXPECT_EQ(c.launches, 5) << v << " " << m;
      EXPECT_EQ(c.gemm_launches, 2) << v << " " << m;
    }
  }
  EXPECT_EQ(active(build_plan("moe", "per_expert", s, 1, DType::bf16)), 2);
  // The shared expert adds its GEMM, act and GEMM to every variant.
  const ShardShape ds = moe_shard("tiny-deepseek-v3.json", "uniform");
  const Plan loop = build_plan("moe", "per_expert", ds, 16, DType::bf16);
  EXPECT_EQ(cost_of(loop).launches, 5 * active(loop) + 3);
  EXPECT_EQ(cost_of(build_plan("moe", "grouped", ds, 16, DType::bf16)).launches, 8);
}

TEST(Moe, BytesCountActiveExpertsOnly) {
  const ShardShape s = moe_shard("tiny-qwen3-moe.json", "uniform");
  const double elem = 2, expert = 3.0 * static_cast<double>(s.intermediate * s.hidden) * elem;
  // One token reaches top_k = 2 of the 8 experts: their weights, not all eight.
  const Plan one = build_plan("moe", "grouped", s, 1, DType::bf16);
  ASSERT_EQ(active(one), 2);
  const double bytes = cost_of(one).bytes;
  EXPECT_GT(bytes, 2 * expert);
  EXPECT_LT(bytes, 3 * expert);
  // Every variant moves each active expert's weights once (padded's blocks of one expert share
  // them); padded moves the padding rows' activations besides: gather writes H, w13 reads H and
  // writes 2I, act-and-mul 3I, w2 reads I and writes H; the combine skips them.
  const Plan grouped = build_plan("moe", "grouped", s, 64, DType::bf16);
  const Plan padded = build_plan("moe", "padded", s, 64, DType::bf16);
  const Plan loop = build_plan("moe", "per_expert", s, 64, DType::bf16);
  EXPECT_DOUBLE_EQ(cost_of(loop).bytes, cost_of(grouped).bytes);
  ASSERT_GT(padded.moe->padded.wasted_rows(), 0);
  EXPECT_DOUBLE_EQ(
      cost_of(padded).bytes - cost_of(grouped).bytes,
      static_cast<double>(padded.moe->padded.wasted_rows() * (3 * s.hidden + 6 * s.intermediate)) *
          elem);
  EXPECT_EQ(cost_of(padded).flops, cost_of(grouped).flops + padded.moe->padding_flops);
}

TEST(Moe, PaddingReported) {
  const ShardShape s = moe_shard("tiny-qwen3-moe.json", "balanced");
  // 16 tokens, top-2 of 8 balanced: 4 rows per expert, padded to vLLM's block of 16 at M=16.
  const Plan p = build_plan("moe", "padded", s, 16, DType::bf16);
  EXPECT_EQ(p.moe->padded.block, 16);
  EXPECT_EQ(p.moe->padded.rows, 8 * 16);
  EXPECT_EQ(p.moe->padded.wasted_rows(), 8 * 12);
  const double per_row = 2.0 * (2 * s.intermediate * s.hidden + s.hidden * s.intermediate);
  EXPECT_DOUBLE_EQ(p.moe->padding_flops, 8 * 12 * per_row);
  const nlohmann::json j = moe_json(*p.moe);
  EXPECT_EQ(j["padding"]["wasted_rows"], 96);
  EXPECT_EQ(j["routing"]["active_experts"], 8);
  EXPECT_FALSE(moe_json(*build_plan("moe", "grouped", s, 16, DType::bf16).moe).contains("padding"));
}

// qwen3-30b-a3b's 128 experts, top-8 at 256 tokens: zipf:1.2 against uniform.
TEST(Moe, ZipfSkewsTheHistogram) {
  const RoutingRule rule = routing_rule_for_preset("qwen3-30b-a3b");
  const auto uniform = make_routing(parse_routing("uniform"), rule, 256, 2048, 1);
  const auto zipf = make_routing(parse_routing("zipf:1.2"), rule, 256, 2048, 1);
  EXPECT_NE(uniform.rows_per_expert(), zipf.rows_per_expert());
  EXPECT_GT(routing_stats(zipf).max_over_mean, 2 * routing_stats(uniform).max_over_mean);
  const std::int64_t block = vllm_block_size_m(256);
  EXPECT_EQ(block, 32);
  const PaddedRows u = align_block_rows(uniform.rows_per_expert(), block),
                   z = align_block_rows(zipf.rows_per_expert(), block);
  EXPECT_GT(u.wasted_rows(), 0);
  // Cold experts with a few rows each pad a whole block: more waste under skew (seed 1).
  EXPECT_GT(z.wasted_rows(), u.wasted_rows());
  // What the must-show compares: written to the test log.
  std::cout << "uniform: max/mean " << routing_stats(uniform).max_over_mean << ", wasted rows "
            << u.wasted_rows() << "; zipf:1.2: max/mean " << routing_stats(zipf).max_over_mean
            << ", wasted rows " << z.wasted_rows() << "\n";
}

// Every variant against the baseline and float64, for each rule and expert kind.
TEST(Moe, EveryVariantVerifies) {
  auto backend = make_cpu_backend();
  for (const char* file : {"tiny-qwen3-moe.json", "tiny-deepseek-v3.json", "tiny-gpt-oss.json"}) {
    for (const char* routing : {"router", "zipf:1.2"}) {
      const ShardShape s = moe_shard(file, routing);
      for (DType dtype : {DType::f32, DType::bf16}) {
        const auto results = verify_op(*backend, "moe", s, 24, dtype, 11, true);
        EXPECT_EQ(results.size(), s.interleaved_gate_up ? 3u : 4u) << file;
        for (const auto& r : results) {
          EXPECT_TRUE(r.checked() && r.ok()) << file << " " << routing << " " << r.summary();
          EXPECT_EQ(r.reference_rows, 24);
        }
      }
    }
  }
}

// The float64 reference on the first rows alone (the verifier's cap) reads the whole shape's
// routing: a source whose routing of 3 tokens differs from the first 3 of 24 still verifies.
TEST(Moe, CappedReferenceRowsUseTheShapesRouting) {
  auto backend = make_cpu_backend();
  const ShardShape s = moe_shard("tiny-qwen3-moe.json", "zipf:1.2");
  for (const auto& r : verify_op(*backend, "moe", s, 24, DType::f32, 5, true, 3)) {
    EXPECT_TRUE(r.checked() && r.ok()) << r.summary();
    EXPECT_EQ(r.reference_rows, 3);
  }
}

// qwen2_moe (Qwen1.5-MoE, Qwen2-57B-A14B): softmax top-k without renormalization
// (norm_topk_prob false), the shared expert scaled by sigmoid(x . shared_expert_gate): an [M, 1]
// GEMV and a sigmoid-scale launch in every variant, priced and verified against float64.
TEST(Moe, QwenTwoGatedSharedExpert) {
  const ShardShape s = moe_shard("tiny-qwen2-moe.json", "uniform");
  ASSERT_TRUE(s.moe->rule.shared_expert_gate);
  EXPECT_FALSE(s.moe->rule.renormalize);
  EXPECT_EQ(s.moe->shared_intermediate, 128);
  ShardShape ungated = s;
  auto block = std::make_shared<MoeBlock>(*s.moe);
  block->rule.shared_expert_gate = false;
  ungated.moe = block;
  const std::int64_t m = 16, h = s.hidden;
  const double elem = 2;
  for (const char* v : {"per_expert", "per_expert_split", "grouped", "padded"}) {
    const Plan p = build_plan("moe", v, s, m, DType::bf16);
    const Cost gated = cost_of(p), plain = cost_of(build_plan("moe", v, ungated, m, DType::bf16));
    // The shared expert's 3 launches, its gate GEMV and the sigmoid scale.
    EXPECT_EQ(gated.launches, plain.launches + 2) << v;
    EXPECT_EQ(gated.gemm_launches, plain.gemm_launches + 1) << v;
    EXPECT_DOUBLE_EQ(gated.flops - plain.flops, 2.0 * static_cast<double>(m * h)) << v;
    // GEMV: x [M, H], w [1, H], g [M, 1]; scale: reads y and g, writes y.
    EXPECT_DOUBLE_EQ(gated.bytes - plain.bytes,
                     static_cast<double>(m * h + h + m + 2 * m * h + m) * elem)
        << v;
    EXPECT_TRUE(std::any_of(p.steps.begin(), p.steps.end(), [](const Step& st) {
      return std::holds_alternative<SigmoidGateRowsStep>(st);
    })) << v;
  }
  const Plan loop = build_plan("moe", "per_expert", s, m, DType::bf16);
  EXPECT_EQ(cost_of(loop).launches, 5 * active(loop) + 5);
  EXPECT_EQ(cost_of(build_plan("moe", "grouped", s, m, DType::bf16)).launches, 10);
  // Not renormalized: the router's k softmax weights sum to less than 1.
  const Plan routed = build_plan("moe", "grouped", moe_shard("tiny-qwen2-moe.json"), 4, DType::f32);
  for (std::int64_t t = 0; t < 4; ++t) {
    double sum = 0;
    for (std::int64_t i = 0; i < 4; ++i)
      sum += routed.moe->assignment.weights[static_cast<std::size_t>(t * 4 + i)];
    EXPECT_LT(sum, 0.999) << t;
  }
  // The gate is in the float64 reference: it differs from the ungated block's.
  const LogicalTensors in = logical_inputs(loop, 3);
  const auto with = find_op("moe").reference(loop, in).at("y");
  const auto without = find_op("moe")
                           .reference(build_plan("moe", "per_expert", ungated, m, DType::bf16), in)
                           .at("y");
  double diff = 0;
  for (std::size_t i = 0; i < with.size(); ++i)
    diff = std::max(diff, std::abs(with[i] - without[i]));
  EXPECT_GT(diff, 1e-3);
  auto backend = make_cpu_backend();
  for (const char* routing : {"router", "zipf:1.2"}) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      const auto results = verify_op(*backend, "moe", moe_shard("tiny-qwen2-moe.json", routing), 24,
                                     dtype, 11, true);
      EXPECT_EQ(results.size(), 4u);
      for (const auto& r : results)
        EXPECT_TRUE(r.checked() && r.ok()) << routing << " " << r.summary();
    }
  }
}

// Llama-4 (model_type llama4, text_config nested): top-1 of the logits, sigmoid of the chosen
// logit, the weight multiplying the expert's input rows (apply_router_weight_on_input: the
// gather scales them, the combine adds unscaled), an ungated shared expert of intermediate_size.
TEST(Moe, LlamaFourWeightsTheExpertInput) {
  const ShardShape s = moe_shard("tiny-llama4.json");
  ASSERT_TRUE(s.moe->rule.weight_on_input);
  EXPECT_EQ(s.moe->rule.top_k, 1);
  EXPECT_EQ(s.moe->rule.scoring, RouterScoring::sigmoid);
  EXPECT_EQ(s.moe->shared_intermediate, 32);  // intermediate_size, not intermediate_size_mlp
  EXPECT_EQ(s.intermediate, 32);
  for (const char* v : {"per_expert", "per_expert_split", "grouped", "padded"}) {
    const Plan p = build_plan("moe", v, s, 16, DType::bf16);
    std::size_t gathers = 0;
    for (const Step& st : p.steps) {
      if (const auto* g = std::get_if<GatherRowsStep>(&st)) {
        ++gathers;
        ASSERT_EQ(g->scale.size(), g->rows.size()) << v;
        for (std::size_t i = 0; i < g->rows.size(); ++i) {
          if (g->rows[i] < 0) continue;
          // The token's one weight (top-1: slot = token): sigmoid of its logit, in (0, 1), not
          // renormalized to 1.
          EXPECT_EQ(g->scale[i], p.moe->assignment.weights[static_cast<std::size_t>(g->rows[i])]);
          EXPECT_GT(g->scale[i], 0.0f);
          EXPECT_LT(g->scale[i], 1.0f);
        }
      }
      if (const auto* c = std::get_if<ScatterAddStep>(&st)) {
        for (std::size_t i = 0; i < c->rows.size(); ++i) {
          if (c->rows[i] >= 0) {
            EXPECT_EQ(c->scale[i], 1.0f) << v;
          }
        }
      }
    }
    EXPECT_GT(gathers, 0u) << v;
  }
  const Plan loop = build_plan("moe", "per_expert", s, 16, DType::bf16);
  EXPECT_EQ(cost_of(loop).launches, 5 * active(loop) + 3);
  EXPECT_EQ(cost_of(build_plan("moe", "grouped", s, 16, DType::bf16)).launches, 8);
  // The weight on the input is not the weight on the output (SiLU is not linear): the reference
  // tells them apart.
  ShardShape on_output = s;
  auto block = std::make_shared<MoeBlock>(*s.moe);
  block->rule.weight_on_input = false;
  on_output.moe = block;
  const LogicalTensors in = logical_inputs(loop, 3);
  const auto a = find_op("moe").reference(loop, in).at("y");
  const auto b = find_op("moe")
                     .reference(build_plan("moe", "per_expert", on_output, 16, DType::bf16), in)
                     .at("y");
  double diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(a[i] - b[i]));
  EXPECT_GT(diff, 1e-3);
  auto backend = make_cpu_backend();
  for (DType dtype : {DType::f32, DType::bf16}) {
    const auto results = verify_op(*backend, "moe", s, 24, dtype, 11, true);
    EXPECT_EQ(results.size(), 4u);
    for (const auto& r : results) EXPECT_TRUE(r.checked() && r.ok()) << r.summary();
  }
}

// The cost model's uniform-routing figure: the smallest M where E * (1 - (1 - k/E)^M) >= E - 0.5.
TEST(Moe, TokensAllExpertsActive) {
  struct Case {
    std::int64_t experts, top_k, tokens;
  };
  // qwen3-30b-a3b: (15/16)^M <= 1/256 from M = 86; mixtral: (3/4)^M <= 1/16 from M = 10;
  // deepseek-v3: (31/32)^M <= 1/512 from M = 197.
  for (const Case c : {Case{128, 8, 86}, Case{8, 2, 10}, Case{256, 8, 197}, Case{8, 8, 1}}) {
    const std::int64_t m = tokens_all_experts_active(c.experts, c.top_k);
    EXPECT_EQ(m, c.tokens) << c.experts << " " << c.top_k;
    const double e = static_cast<double>(c.experts);
    EXPECT_GE(expected_active_experts(m, c.experts, c.top_k), e - 0.5);
    if (m > 1) {
      EXPECT_LT(expected_active_experts(m - 1, c.experts, c.top_k), e - 0.5);
    }
  }
  EXPECT_THROW(tokens_all_experts_active(8, 9), std::invalid_argument);
  EXPECT_THROW(tokens_all_experts_active(8, 0), std::invalid_argument);
  // In every moe entry (moe_json), with the expectation at the entry's M.
  const ShardShape s = moe_shard("tiny-qwen3-moe.json", "uniform");
  const nlohmann::json j = moe_json(*build_plan("moe", "grouped", s, 4, DType::bf16).moe);
  EXPECT_EQ(j["uniform"]["tokens_all_experts_active"], 10);  // 8 experts, top-2
  EXPECT_DOUBLE_EQ(j["uniform"]["expected_active_experts"].get<double>(),
                   expected_active_experts(4, 8, 2));
}

TEST(Moe, Refusals) {
  ShardShape s = moe_shard("tiny-qwen3-moe.json");
  s.tp = 2;
  EXPECT_THROW(build_plan("moe", "grouped", s, 4, DType::f32), std::invalid_argument);
  ShardShape gpt = moe_shard("tiny-gpt-oss.json");
  EXPECT_THROW(build_plan("moe", "per_expert_split", gpt, 4, DType::f32), std::invalid_argument);
  ShardShape dense = shard(find_model("qwen3-0.6b"), 1);
  EXPECT_THROW(build_plan("moe", "per_expert", dense, 4, DType::f32), std::invalid_argument);
}

TEST(MoeCli, RunsVerifiedWithRoutingFields) {
  const auto report = fusebench::testing::temp_path("moe", "report.json");
  const auto r = fusebench::testing::run_fusebench(
      "--backend=cpu --model-config=" + config_path("tiny-qwen3-moe.json") +
      " --ops=moe --tokens=1,16 --dtypes=bf16 --routing=zipf:1.2 --verify "
      "--timing-max-time=0.05 --cpu-threads=1 --report=" +
      report.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("moe/padded: OK"), std::string::npos) << r.output;
  const nlohmann::json j = fusebench::testing::load_json(report);
  int entries = 0;
  for (const auto& e : j["benchmarks"]) {
    const std::string name = e["name"];
    if (name.rfind("moe/", 0) != 0) continue;
    ++entries;
    ASSERT_TRUE(e.contains("moe")) << name;
    EXPECT_EQ(e["moe"]["routing"]["routing"], "zipf:1.2") << name;
    EXPECT_GE(e["moe"]["routing"]["active_experts"].get<int>(), 2) << name;
    EXPECT_TRUE(e["moe"]["routing"]["tokens_per_expert"].contains("max_over_mean")) << name;
    EXPECT_EQ(e["moe"].contains("padding"), name.rfind("moe/padded/", 0) == 0) << name;
    // Measured library calls equal the model's launches.
    EXPECT_EQ(e["launches"], e["model_launches"]) << name;
  }
  EXPECT_EQ(entries, 8);
  std::filesystem::remove(report);
}

// An engine's recorded expert loads (a tokens_per_expert file: 8 experts, top-2, 16 tokens)
// fix the token count: --verify (and --verify-only) checks every variant at it, and the entries'
// routing is the file's. One rank: the busiest expert (expert 0, 12 rows) is what a rank holding
// it would wait on.
TEST(MoeCli, CountFileVerifiesEveryVariant) {
  const auto file = fusebench::testing::temp_path("moe_counts", "tokens_per_expert.json");
  const std::vector<std::int64_t> loads = {12, 8, 4, 4, 2, 1, 1, 0};
  std::ofstream(file) << nlohmann::json{{"tokens_per_expert", loads}}.dump();
  const auto report = fusebench::testing::temp_path("moe_counts", "report.json");
  const std::string args =
      "--backend=cpu --model-config=" + config_path("tiny-qwen3-moe.json") +
      " --ops=moe --tokens=16 --dtypes=bf16 --cpu-threads=1 --routing=file:" + file.string() +
      " --report=" + report.string();
  const auto r = fusebench::testing::run_fusebench(args + " --verify --timing-max-time=0.05");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* v : {"per_expert", "per_expert_split", "grouped", "padded"})
    EXPECT_NE(r.output.find("moe/" + std::string(v) + ": OK"), std::string::npos) << v << r.output;
  const nlohmann::json j = fusebench::testing::load_json(report);
  ASSERT_EQ(j["context"]["verification"].size(), 4u) << j["context"]["verification"].dump();
  for (const auto& v : j["context"]["verification"]) EXPECT_TRUE(v["ok"].get<bool>()) << v.dump();
  int entries = 0;
  for (const auto& e : j["benchmarks"]) {
    if (e["name"].get<std::string>().rfind("moe/", 0) != 0) continue;
    ++entries;
    EXPECT_EQ(e["moe"]["routing"]["histogram"].get<std::vector<std::int64_t>>(), loads);
    EXPECT_EQ(e["moe"]["routing"]["tokens_per_expert"]["max"], 12);
  }
  EXPECT_EQ(entries, 4);
  const auto only = fusebench::testing::run_fusebench(args + " --verify-only");
  ASSERT_EQ(only.exit_code, 0) << only.output;
  EXPECT_NE(only.output.find("moe/grouped: OK"), std::string::npos) << only.output;
  std::filesystem::remove(report);
  std::filesystem::remove(file);
}

// A grouped step's region threads run beside the GEMM libraries' workers, which spin after a
// multi-threaded call: their waits for a CPU are the process's own, so the moe group's samples
// are not dropped as preempted (a quiet machine dropped every grouped sample before).
TEST(MoeCli, GroupedRegionWaitsAreTheProcessesOwn) {
  const auto report = fusebench::testing::temp_path("moe-region", "report.json");
  const auto r = fusebench::testing::run_fusebench(
      "--backend=cpu --model-config=" + config_path("tiny-qwen3-moe.json") +
      " --ops=moe --tokens=16 --dtypes=fp32 --timing-max-time=0.05 --cpu-threads=2 --report=" +
      report.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = fusebench::testing::load_json(report);
  int grouped = 0;
  for (const auto& e : j["benchmarks"]) {
    const std::string name = e["name"];
    if (name.rfind("moe/", 0) != 0) continue;
    ASSERT_TRUE(e.contains("preemption_unchecked")) << name;
    const std::string why = e["preemption_unchecked"];
    EXPECT_TRUE(why.find("grouped step's region") != std::string::npos ||
                why.find("unreadable") != std::string::npos)
        << name << ": " << why;
    EXPECT_FALSE(e.contains("samples_dropped_preempted")) << name;
    grouped += name.rfind("moe/grouped/", 0) == 0;
  }
  EXPECT_EQ(grouped, 1);
  std::filesystem::remove(report);
}

// ---- Quantized (issue 29: fp8, int8 on the CPU backend; docs/moe.md, docs/quant.md) ----------

// Quantize steps are counted launches: each GEMM's input quantized, per expert in the loops
// (split: per shard, as separate layers), once per stage in grouped and padded.
TEST(QuantMoe, LaunchesIncludeTheQuantizeSteps) {
  const ShardShape s = moe_shard("tiny-qwen3-moe.json", "uniform");
  for (const char* spec : {"fp8", "int8", "fp8:channel"}) {
    const QuantSpec q = parse_quant_spec(spec);
    for (std::int64_t m : {1, 16}) {
      const Plan loop = build_plan("moe", "per_expert", s, m, DType::bf16, q);
      const Plan split = build_plan("moe", "per_expert_split", s, m, DType::bf16, q);
      const std::int64_t n = active(loop);
      // A scaled GEMM is 1 launch, int8's 2 (its int32 GEMM and the dequantize).
      const std::int64_t g = scaled_gemm_launches(q.dtype);
      // Gather, quantize, w13, act, quantize, w2, scatter-add per active expert.
      EXPECT_EQ(cost_of(loop).launches, (5 + 2 * g) * n) << spec << " " << m;
      EXPECT_EQ(cost_of(loop).quantize_launches, 2 * n) << spec << " " << m;
      EXPECT_EQ(cost_of(loop).gemm_launches, 2 * n) << spec << " " << m;
      // Gate and up each quantize their input and run their own GEMM.
      EXPECT_EQ(cost_of(split).launches, (6 + 3 * g) * n) << spec << " " << m;
      EXPECT_EQ(cost_of(split).quantize_launches, 3 * n) << spec << " " << m;
      for (const char* v : {"grouped", "padded"}) {
        const Cost c = cost_of(build_plan("moe", v, s, m, DType::bf16, q));
        EXPECT_EQ(c.launches, 5 + 2 * g) << spec << " " << v << " " << m;
        EXPECT_EQ(c.quantize_launches, 2) << spec << " " << v << " " << m;
        EXPECT_EQ(c.gemm_launches, 2) << spec << " " << v << " " << m;
      }
    }
  }
  // A weight byte a code: the quantized grouped block moves fewer bytes than bf16's.
  EXPECT_LT(
      cost_of(build_plan("moe", "grouped", s, 16, DType::bf16, parse_quant_spec("fp8"))).bytes,
      cost_of(build_plan("moe", "grouped", s, 16, DType::bf16)).bytes);
}

// The shared expert quantized as vLLM's linear methods quantize a dense MLP: its quantize, GEMM,
// act, quantize and GEMM in every variant (qwen2_moe's sigmoid gate GEMV and scale stay in bf16),
// and every variant verified against the float64 replay.
TEST(QuantMoe, SharedExpertIsQuantizedAndVerified) {
  auto backend = make_cpu_backend();
  for (const char* file : {"tiny-deepseek-v3.json", "tiny-qwen2-moe.json"}) {
    const ShardShape s = moe_shard(file, "uniform");
    ASSERT_GT(s.moe->shared_intermediate, 0) << file;
    ShardShape routed_only = s;
    auto block = std::make_shared<MoeBlock>(*s.moe);
    block->shared_intermediate = 0;
    block->rule.shared_expert_gate = false;
    routed_only.moe = block;
    const std::int64_t gate = s.moe->rule.shared_expert_gate ? 2 : 0;  // GEMV and scale
    for (const char* spec : {"int8", "fp8"}) {
      const QuantSpec q = parse_quant_spec(spec);
      const std::int64_t g = scaled_gemm_launches(q.dtype);
      for (const char* v : {"per_expert", "grouped"}) {
        const Cost with = cost_of(build_plan("moe", v, s, 8, DType::bf16, q));
        const Cost without = cost_of(build_plan("moe", v, routed_only, 8, DType::bf16, q));
        EXPECT_EQ(with.launches, without.launches + 3 + 2 * g + gate) << file << " " << spec;
        EXPECT_EQ(with.quantize_launches, without.quantize_launches + 2) << file << " " << spec;
      }
      const auto results = verify_quant_op(*backend, "moe", s, 6, DType::bf16, q, 5);
      EXPECT_EQ(results.size(), 4u) << file << " " << spec;
      for (const auto& r : results)
        EXPECT_TRUE(r.checked() && r.ok()) << file << " " << spec << " " << r.summary();
      // The replay checks the kernels against the plan; the plan against the block's meaning:
      // its output near the unquantized block's (the shared expert's share is O(1)).
      const Plan p = build_plan("moe", "per_expert", s, 6, DType::bf16, q);
      Workspace ws(*backend, p, 5);
      ws.run();
      const std::vector<float> got = ws.read(p.outputs.at("y"));
      const auto want = find_op("moe").reference(p, logical_inputs(p, 5, nullptr, true));
      const double error = quant_error({got.begin(), got.end()}, want.at("y"), 6, {s.hidden})[0];
      EXPECT_LT(error, q.dtype == QuantDType::int8 ? 0.02 : 0.08) << file << " " << spec;
    }
  }
}

// tiny-qwen3-moe's experts widened to 128 (vLLM's block rule) for fp8:block.
ShardShape block_moe_shard() {
  ShardShape s = moe_shard("tiny-qwen3-moe.json", "zipf:1.2");
  s.intermediate = 128;
  return s;
}

// Every variant of every spec against its own exact dequantized reference (float64 replay of the
// plan's codes and scales), at a decode and a prefill shape, the latter with the reference capped.
TEST(QuantMoe, EverySpecVerifies) {
  auto backend = make_cpu_backend();
  for (const char* spec :
       {"fp8", "fp8:channel", "fp8:tensor:token", "int8", "int8:channel", "fp8:block"}) {
    const QuantSpec q = parse_quant_spec(spec);
    const ShardShape s =
        q.weights == WeightScales::block ? block_moe_shard() : moe_shard("tiny-qwen3-moe.json");
    for (const auto& [tokens, cap] : {std::pair<std::int64_t, std::int64_t>{1, 0}, {24, 5}}) {
      const auto results = verify_quant_op(*backend, "moe", s, tokens, DType::bf16, q, 11, cap);
      EXPECT_EQ(results.size(), 4u) << spec;
      for (const auto& r : results) {
        EXPECT_TRUE(r.checked() && r.ok()) << spec << " tokens=" << tokens << " " << r.summary();
        EXPECT_EQ(r.reference_rows, cap > 0 ? cap : tokens);
      }
    }
  }
}

// The replay reads the plan's own routing weights: a reference from the plan with every combine
// weight doubled fails against the backend's run (the check is not the kernel against itself).
TEST(QuantMoe, ReplayCatchesAWrongRoutingWeight) {
  auto backend = make_cpu_backend();
  const ShardShape s = moe_shard("tiny-qwen3-moe.json");
  for (const char* variant : {"per_expert", "grouped"}) {
    const Plan plan = build_plan("moe", variant, s, 8, DType::bf16, parse_quant_spec("fp8"));
    Plan wrong = plan;
    for (Step& step : wrong.steps)
      if (auto* c = std::get_if<ScatterAddStep>(&step))
        for (float& w : c->scale) w *= 2;
    Workspace ws(*backend, plan, 11);
    ws.run();
    const auto got = ws.read(plan.outputs.at("y"));
    const auto in = logical_inputs(plan, 11, nullptr, true);
    const Tolerance tol = tolerance_for(DType::bf16);
    EXPECT_TRUE(
        compare_outputs("y", "float64", got, dequantized_reference(plan, in, 8).at("y"), tol).ok)
        << variant;
    EXPECT_FALSE(
        compare_outputs("y", "float64", got, dequantized_reference(wrong, in, 8).at("y"), tol).ok)
        << variant;
  }
}

// vLLM's block rule (Fp8MoEMethod) in its words, at tp 1 and at Qwen3-30B-A3B's tp 8; what the
// quantized block does not build yet, by name.
TEST(QuantMoe, RefusalsNameWhy) {
  const QuantSpec block = parse_quant_spec("fp8:block");
  // 32-wide experts: vLLM's Fp8MoEMethod refuses 128x128 blocks.
  try {
    build_plan("moe", "grouped", moe_shard("tiny-qwen3-moe.json"), 4, DType::bf16, block);
    ADD_FAILURE() << "fp8:block on 32-wide experts was not refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("The output_size of gate's and up's weight = 32 is not "
                                         "divisible by weight quantization block_n = 128."),
              std::string::npos)
        << e.what();
  }
  // Qwen3-30B-A3B's 768-wide experts at tp 8: 96 per rank, refused naming the block rule; at tp
  // 2 (384) the rule passes and the block's own tp refusal speaks.
  ShardShape tp8 = moe_shard("qwen3-30b-a3b.json");
  tp8.intermediate = 768 / 8;
  tp8.tp = 8;
  try {
    build_plan("moe", "per_expert", tp8, 1, DType::bf16, block);
    ADD_FAILURE() << "fp8:block at tp 8 was not refused";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("weight = 96 is not divisible by weight quantization block_n = 128"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("768/tp 8"), std::string::npos) << what;
  }
  ShardShape tp2 = tp8;
  tp2.intermediate = 768 / 2;
  tp2.tp = 2;
  try {
    build_plan("moe", "per_expert", tp2, 1, DType::bf16, block);
    ADD_FAILURE() << "moe at tp 2 was not refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("moe: tp=2"), std::string::npos) << e.what();
  }
  // Not built yet, said by name.
  EXPECT_THROW(build_plan("moe", "per_expert", moe_shard("tiny-gpt-oss.json"), 4, DType::bf16,
                          parse_quant_spec("fp8")),
               std::invalid_argument);  // biases, interleaved w13
  EXPECT_THROW(build_plan("moe", "per_expert", moe_shard("tiny-qwen3-moe.json"), 4, DType::bf16,
                          parse_quant_spec("fp8:tensor:static")),
               std::invalid_argument);
}

// Random expert weights whose up shard (w3) is `shrink` times smaller than gate (w1), not a power
// of two apart, as a real checkpoint's shards differ: the max-scale w13 rounds up twice.
class SkewedExperts : public TensorSource {
 public:
  explicit SkewedExperts(double shrink) : random_(11), shrink_(shrink) {}
  bool has(const std::string&) const override { return true; }
  std::vector<float> window(const WindowRequest& r) const override {
    auto v = random_.window(r);
    if (r.name.size() > 3 && r.name.compare(r.name.size() - 3, 3, "_up") == 0)
      for (float& x : v) x = static_cast<float>(x * shrink_);
    return v;
  }
  std::string describe() const override { return "skewed experts"; }

 private:
  RandomTensors random_;
  double shrink_;
};

struct MoeRun {
  std::vector<double> gate, up, y;  // gate/up: [routed rows, I] in expert order
};

MoeRun run_moe(const ShardShape& s, const std::string& variant, const QuantSpec& q,
               const TensorSource& w, std::int64_t m) {
  auto backend = make_cpu_backend();
  Workspace ws(*backend, build_plan("moe", variant, s, m, DType::f32, q), 3, &w);
  ws.run();
  const Plan& p = ws.plan();
  const auto find = [&](const std::string& name) {
    for (int i = 0; i < static_cast<int>(p.buffers.size()); ++i)
      if (const BufferSpec& b = p.buffers[static_cast<std::size_t>(i)]; b.name == name)
        return View{i, 0, 0, b.rows, b.cols};
    throw std::logic_error("no buffer " + name);
  };
  const auto read = [&](View v) {
    const auto got = ws.read(v);
    return std::vector<double>(got.begin(), got.end());
  };
  MoeRun out;
  if (variant == "per_expert_split") {
    out.gate = read(find("expert_gate"));
    out.up = read(find("expert_up"));
  } else {
    View g = find("expert_gate_up"), u = g;
    g.cols = u.cols = s.intermediate;
    u.col0 = s.intermediate;
    out.gate = read(g);
    out.up = read(u);
  }
  out.y = read(p.outputs.at("y"));
  return out;
}

// Per-tensor FP8: per_expert's w13 takes max(w1 scale, w3 scale) per expert, so the smaller up
// shard is rounded twice and its error grows over per_expert_split's, gate's does not; channel
// scales stack exactly (per_expert is per_expert_split up to accumulation order).
TEST(QuantMoe, MaxScaleW13CostsTheSmallerShard) {
  const ShardShape s = moe_shard("tiny-qwen3-moe.json", "uniform");
  const std::int64_t m = 32, inter = s.intermediate, h = s.hidden;
  const SkewedExperts w(0.37);
  const QuantSpec fp8 = parse_quant_spec("fp8");
  const Plan plan = build_plan("moe", "per_expert_split", s, m, DType::f32, fp8);
  const LogicalTensors in = logical_inputs(plan, 3, &w, true);
  // The unquantized float64 gate and up of every routed row, in the expert buffers' order.
  const RoutingAssignment& a = plan.moe->assignment;
  std::vector<double> gate_ref, up_ref;
  for (std::int64_t e = 0; e < a.experts; ++e) {
    for (std::int64_t j = 0; j < a.rows(e); ++j) {
      const std::int64_t t =
          a.expert_slots[static_cast<std::size_t>(a.expert_offset[e] + j)] / a.top_k;
      for (const auto& [ref, what] : {std::pair{&gate_ref, "gate"}, std::pair{&up_ref, "up"}}) {
        const auto& wt = in.at("w_expert" + std::to_string(e) + "_" + what);
        for (std::int64_t c = 0; c < inter; ++c) {
          double acc = 0;
          for (std::int64_t k = 0; k < h; ++k)
            acc += static_cast<double>(wt[static_cast<std::size_t>(c * h + k)]) *
                   in.at("x")[static_cast<std::size_t>(t * h + k)];
          ref->push_back(acc);
        }
      }
    }
  }
  const std::int64_t rows = static_cast<std::int64_t>(gate_ref.size()) / inter;
  const auto err = [&](const std::vector<double>& got, const std::vector<double>& ref) {
    return quant_error(got, ref, rows, {inter})[0];
  };
  const MoeRun split = run_moe(s, "per_expert_split", fp8, w, m),
               fused = run_moe(s, "per_expert", fp8, w, m),
               grouped = run_moe(s, "grouped", fp8, w, m);
  EXPECT_GT(err(split.up, up_ref), 1e-3);  // fp8 does cost something
  EXPECT_NEAR(err(fused.gate, gate_ref), err(split.gate, gate_ref),
              1e-5 * err(split.gate, gate_ref));
  EXPECT_GT(err(fused.up, up_ref), 1.05 * err(split.up, up_ref));
  EXPECT_GT(err(grouped.up, up_ref), 1.05 * err(split.up, up_ref));
  // ... and in the block's output, against the split baseline.
  EXPECT_GT(quant_error_vs_split(fused.y, split.y, m, {h})[0], 1e-3);
  std::cout << "up shard quant_error: per_expert_split " << err(split.up, up_ref)
            << ", per_expert (max-scale w13) " << err(fused.up, up_ref)
            << "; gate: " << err(split.gate, gate_ref) << " vs " << err(fused.gate, gate_ref)
            << "; y vs split: " << quant_error_vs_split(fused.y, split.y, m, {h})[0] << "\n";
  // Per-channel weights stack exactly: per_expert is split's arithmetic.
  const QuantSpec channel = parse_quant_spec("fp8:channel");
  const MoeRun csplit = run_moe(s, "per_expert_split", channel, w, m),
               cfused = run_moe(s, "per_expert", channel, w, m);
  EXPECT_LT(quant_error_vs_split(cfused.up, csplit.up, rows, {inter})[0], 1e-5);
  EXPECT_LT(quant_error_vs_split(cfused.y, csplit.y, m, {h})[0], 1e-5);
}

TEST(QuantMoeCli, Fp8AndInt8RunVerifiedWithAccuracy) {
  const auto report = fusebench::testing::temp_path("quant_moe", "report.json");
  const auto r = fusebench::testing::run_fusebench(
      "--backend=cpu --model-config=" + config_path("tiny-qwen3-moe.json") +
      " --ops=moe --dtypes=fp8,int8 --tokens=1,16 --verify --timing-max-time=0.02 "
      "--timing-min-time=0.005 --timing-blocks=1 "
      "--cpu-threads=1 --report=" +
      report.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("moe/padded: OK (vs float64_dequantized"), std::string::npos) << r.output;
  const nlohmann::json j = fusebench::testing::load_json(report);
  int entries = 0;
  for (const auto& e : j["benchmarks"]) {
    const std::string name = e["name"];
    if (name.rfind("moe/", 0) != 0) continue;
    ++entries;
    const std::string dtype = e["dtype"];
    EXPECT_TRUE(dtype == "fp8:tensor" || dtype == "int8:tensor") << name;
    EXPECT_EQ(e["quant"]["spec"], dtype) << name;
    ASSERT_TRUE(e.contains("quant_error")) << name;
    EXPECT_GT(e["quant_error"]["y"].get<double>(), 0) << name;
    EXPECT_LT(e["quant_error"]["y"].get<double>(), 0.1) << name;
    EXPECT_EQ(e.contains("quant_error_vs_split"), e["variant"] != "per_expert_split") << name;
    EXPECT_TRUE(e.contains("moe")) << name;
    EXPECT_EQ(e["launches"], e["model_launches"]) << name;  // the quantize steps are calls
  }
  EXPECT_EQ(entries, 2 * 2 * 4);  // two specs, two token counts, four variants
  std::filesystem::remove(report);
}

// vLLM's block rule in the sweep at tp 8 (Qwen3-30B-A3B: 768/8 = 96), and the quantized block
// left out of a cuda sweep naming why.
TEST(QuantMoeCli, RefusalsInTheSweepNameWhy) {
  const auto tp8 = fusebench::testing::run_fusebench(
      "--backend=cpu --models=qwen3-30b-a3b --ops=moe --dtypes=fp8:block --tp=8 --tokens=1 "
      "--list");
  EXPECT_NE(tp8.exit_code, 0);
  EXPECT_NE(tp8.output.find("moe dtype:fp8:block left out for qwen3-30b-a3b: moe/per_expert at "
                            "fp8:block is refused as vLLM refuses it"),
            std::string::npos)
      << tp8.output;
  EXPECT_NE(tp8.output.find("The output_size of gate's and up's weight = 96 is not divisible by "
                            "weight quantization block_n = 128."),
            std::string::npos)
      << tp8.output;
  const auto cuda = fusebench::testing::run_fusebench(
      "--list --list-for=cuda --ops=moe --dtypes=fp8 --tokens=1 --timing=eager --model-config=" +
      config_path("tiny-qwen3-moe.json"));
  EXPECT_NE(cuda.output.find("the quantized moe block runs on the CPU backend only so far"),
            std::string::npos)
      << cuda.output;
}

}  // namespace

// qwen2_moe's gated shared expert and Llama-4's weight on the input through the binary: every
// variant verified, the library calls equal to the model's launches, the cost model's figure.
TEST(MoeCli, GatedSharedExpertAndWeightOnInputRunVerified) {
  const auto report = fusebench::testing::temp_path("moe_families", "report.json");
  const auto r = fusebench::testing::run_fusebench(
      "--backend=cpu --model-config=" + config_path("tiny-qwen2-moe.json") +
      " --model-config=" + config_path("tiny-llama4.json") +
      " --ops=moe --tokens=1,16 --dtypes=bf16 --verify --timing-max-time=0.05 --cpu-threads=1 "
      "--report=" +
      report.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("FAILED"), std::string::npos) << r.output;
  const nlohmann::json j = fusebench::testing::load_json(report);
  int entries = 0;
  for (const auto& e : j["benchmarks"]) {
    const std::string name = e["name"];
    if (name.rfind("moe/", 0) != 0) continue;
    ++entries;
    EXPECT_EQ(e["launches"], e["model_launches"]) << name;
    EXPECT_TRUE(e["moe"]["uniform"].contains("tokens_all_experts_active")) << name;
  }
  EXPECT_EQ(entries, 16);
  std::filesystem::remove(report);
}

// The CUDA backend's moe: gather and combine kernels, cuBLAS's grouped GEMM and the padded
// blocks' pointer-array batched GEMM, each variant against split and float64 (no expert biases:
// those variants are refused on cuda, see sweep.cpp), at decode and at a prefill where every
// expert of the real qwen3-30b-a3b shape is hit.
// Each case guarded: a throw (a cuBLAS call refused, naming itself) is recorded as that case's
// failure and the next case runs, so one GPU run reports them all.
TEST(GpuMoe, EveryVariantVerifiesOnTheDevice) {
  std::string why;
  auto backend = fusebench::testing::gpu_test_backend(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  const auto guarded = [](const std::string& where, const auto& run) {
    try {
      run();
    } catch (const std::exception& e) {
      ADD_FAILURE() << where << ": " << e.what();
    }
  };
  for (const char* file : {"tiny-qwen3-moe.json", "tiny-deepseek-v3.json", "tiny-qwen2-moe.json",
                           "tiny-llama4.json"}) {
    for (const char* routing : {"router", "zipf:1.2"}) {
      const ShardShape s = moe_shard(file, routing);
      for (DType dtype : {DType::f32, DType::bf16}) {
        for (std::int64_t tokens : {1, 37}) {
          const std::string where = std::string(file) + " " + routing + " " +
                                    std::string(to_string(dtype)) +
                                    " tokens=" + std::to_string(tokens);
          guarded(where, [&] {
            const auto results = verify_op(*backend, "moe", s, tokens, dtype, 11, true);
            EXPECT_EQ(results.size(), 4u) << where;
            for (const auto& r : results)
              EXPECT_TRUE(r.checked() && r.ok()) << where << " " << r.summary();
          });
        }
      }
    }
  }
  // A mid-sized qwen3_moe (32 experts, top-8): at 256 tokens every expert is hit, and tiles of
  // cuBLAS's real kernels are exercised (the tiny configs fit in one tile).
  const std::string text =
      R"({"model_type": "qwen3_moe", "hidden_size": 1024, "num_attention_heads": 16,
          "num_key_value_heads": 4, "head_dim": 64, "intermediate_size": 3072,
          "moe_intermediate_size": 384, "num_experts": 32, "num_experts_per_tok": 8,
          "norm_topk_prob": true, "hidden_act": "silu", "num_hidden_layers": 1})";
  ShardShape real = shard(parse_hf_config(text, "mid-qwen3-moe.json"), 1, LayerKind::expert);
  auto block = std::make_shared<MoeBlock>();
  block->rule = routing_rule_from_config(text, "mid-qwen3-moe.json");
  block->source = parse_routing("uniform");
  block->seed = 7;
  real.moe = std::move(block);
  for (std::int64_t tokens : {1, 256}) {
    const std::string where = "mid-qwen3-moe tokens=" + std::to_string(tokens);
    guarded(where, [&] {
      for (const auto& r : verify_op(*backend, "moe", real, tokens, DType::bf16, 3, true, 16))
        EXPECT_TRUE(r.checked() && r.ok()) << where << " " << r.summary();
    });
  }
}

// What a GPU sweep of the moe op would run, listed here: every variant of a model without expert
// biases; with them (gpt-oss) grouped and padded left out naming why, refused when asked for.
TEST(MoeCli, CudaListingRunsTheBlockAndLeavesOutBiasedOneLaunchVariants) {
  const auto plain = fusebench::testing::run_fusebench(
      "--list --list-for=cuda --ops=moe --tokens=1 --dtypes=bf16 --timing=eager --model-config=" +
      config_path("tiny-qwen3-moe.json"));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  for (const char* v : {"per_expert/", "per_expert_split/", "grouped/", "padded/"})
    EXPECT_NE(plain.output.find(std::string("moe/") + v), std::string::npos) << v;
  const auto biased = fusebench::testing::run_fusebench(
      "--list --list-for=cuda --ops=moe --tokens=1 --dtypes=bf16 --timing=eager --model-config=" +
      config_path("tiny-gpt-oss.json"));
  ASSERT_EQ(biased.exit_code, 0) << biased.output;
  EXPECT_NE(biased.output.find("moe/per_expert/"), std::string::npos) << biased.output;
  EXPECT_EQ(biased.output.find("moe/grouped/model"), std::string::npos) << biased.output;
  EXPECT_NE(biased.output.find("moe/grouped left out for tiny-gpt-oss: expert biases on cuda"),
            std::string::npos)
      << biased.output;
  const auto asked = fusebench::testing::run_fusebench(
      "--list --list-for=cuda --ops=moe --variants=padded --tokens=1 --model-config=" +
      config_path("tiny-gpt-oss.json"));
  EXPECT_EQ(asked.exit_code, 2) << asked.output;
  EXPECT_NE(asked.output.find("--variants: moe/padded: expert biases on cuda"), std::string::npos)
      << asked.output;
}
