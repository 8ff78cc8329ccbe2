// The model families on a real GPU (every test skips without a CUDA device): cuBLASLt's bias
// epilogue adds the bias inside the GEMM kernel (one kernel per GEMM, no extra launch) and gives
// what the separate bias kernel gives; every new plan (bias, experts, MLA, GeLU-tanh, swigluoai on
// interleaved w13, batched GEMM with a bias batch stride) equals split and float64.
#include <gtest/gtest.h>

#include "fusebench/cost_model.hpp"
#include "fusebench/counter_passes.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/verify.hpp"
#include "fusebench/workspace.hpp"

using namespace fusebench;

namespace {

std::unique_ptr<Backend> gpu(std::string* why) { return make_cuda_backend(why); }

ModelShape config(const std::string& file) {
  return load_hf_config(std::string(FUSEBENCH_TEST_CONFIGS) + "/" + file);
}

}  // namespace

// The epilogue adds no launch: each variant with the bias launches what the same variant without
// it launches (whatever cuBLASLt picks, split-K included), fused with the bias is one kernel at
// 1024 tokens (hundreds of output tiles: no reason for a split-K reduce; if cuBLASLt adds one
// anyway the message names the kernels), the separate add is exactly one kernel more, and the
// results agree.
TEST(GpuBiasEpilogue, OneKernelPerGemmAndEqualToTheSeparateAdd) {
  std::string why;
  auto backend = gpu(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  // cuBLASLt's first heuristic candidate, so the picks with and without the epilogue do not
  // differ by timing noise alone (the default "timed" policy could pick a split-K for one only).
  backend->set_gemm_algo_policy("heuristic");
  CounterPassOptions options;
  options.dram_counters = false;
  CounterPasses passes = make_counter_passes(*backend, options);
  if (passes.status.at("launches") != "available")
    GTEST_SKIP() << "launch counts unavailable here: " << passes.status.at("launches");
  const ShardShape biased = shard(find_model("qwen2.5-7b"), 1, LayerKind::attention);
  ShardShape plain = biased;
  plain.qkv_bias = false;
  std::map<std::string, std::vector<float>> q;
  const auto count = [&](const ShardShape& s, const std::string& variant, std::string* names) {
    Workspace ws(*backend, build_plan("qkv", variant, s, 1024, DType::bf16), 5);
    ws.run();  // warm-up: heuristics and module loading stay out of the counts
    backend->synchronize();
    RegionCounters c;
    for (auto& pass : passes.collectors)
      c.merge(pass->collect("qkv/" + variant, [&] { ws.run(); }));
    for (const auto& n : c.kernel_names) *names += "\n  " + n;
    if (s.qkv_bias) q[variant] = ws.read(ws.plan().outputs.at("q"));
    return c.values.count("launches") ? c.values.at("launches") : -1.0;
  };
  std::string names;
  for (const char* variant : {"split", "fused"}) {
    const double with = count(biased, variant, &names), without = count(plain, variant, &names);
    EXPECT_DOUBLE_EQ(with, without) << variant << " kernels:" << names;
  }
  names.clear();
  EXPECT_DOUBLE_EQ(count(biased, "fused", &names), 1) << "kernels:" << names;
  names.clear();
  const double separate = count(biased, "fused_bias_kernel", &names);
  EXPECT_DOUBLE_EQ(separate, count(plain, "fused", &names) + 1) << "kernels:" << names;
  EXPECT_DOUBLE_EQ(
      separate,
      cost_of(build_plan("qkv", "fused_bias_kernel", biased, 1024, DType::bf16)).launches);
  const Comparison same = compare_outputs("q", "fused_bias_kernel", q.at("fused"),
                                          q.at("fused_bias_kernel"), tolerance_for(DType::bf16));
  EXPECT_TRUE(same.ok) << "max_abs=" << same.max_abs_error << " mismatches=" << same.mismatches;
  EXPECT_GT(same.elements, 0);
}

TEST(GpuFamilies, EveryNewPlanEqualsSplitAndFloat64) {
  std::string why;
  auto backend = gpu(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  struct Case {
    ModelShape model;
    std::string op;
    LayerKind layer;
    int tp;
  };
  const std::vector<Case> cases = {
      {config("qwen2.5-1.5b.json"), "qkv", LayerKind::attention, 4},  // bias, kv replicated
      {config("gpt-oss-20b.json"), "qkv", LayerKind::attention, 1},   // bias, q_size != hidden
      {config("gpt-oss-20b.json"), "gate_up", LayerKind::expert, 8},  // swigluoai, interleaved
      {config("deepseek-v3.json"), "qkv", LayerKind::mla, 8},         // MLA, replicated
      {config("deepseek-v3.json"), "gate_up", LayerKind::shared_expert, 8},
      {config("qwen3-30b-a3b.json"), "gate_up", LayerKind::expert, 4},  // one expert
      {config("gemma-2-9b.json"), "gate_up", LayerKind::dense, 16},     // GeLU-tanh
  };
  for (const auto& c : cases) {
    const ShardShape s = shard(c.model, c.tp, c.layer);
    for (DType dtype : {DType::bf16, DType::f32}) {
      for (std::int64_t tokens : {1, 37}) {
        for (const auto& r : verify_op(*backend, c.op, s, tokens, dtype, 71 + tokens, true)) {
          EXPECT_TRUE(r.ok()) << c.model.name << " " << to_string(c.layer) << " tp=" << c.tp
                              << " tokens=" << tokens << " " << r.summary();
        }
      }
    }
  }
  // A bias on a strided-batched GEMM: the epilogue's bias batch stride.
  const ModelShape biased = parse_hf_config(
      R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8,
          "intermediate_size": 1024, "attention_bias": true, "mlp_bias": true})",
      "biased.json");
  for (const auto& r : verify_op(*backend, "gate_up", shard(biased, 1), 33, DType::bf16, 3, true))
    EXPECT_TRUE(r.ok()) << r.summary();
  for (const auto& r : verify_op(*backend, "qkv", shard(biased, 1), 33, DType::bf16, 4, true))
    EXPECT_TRUE(r.ok()) << r.summary();  // grouped: the three biases in one kernel
}
