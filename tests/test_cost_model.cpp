#include <gtest/gtest.h>

#include "fusebench/cost_model.hpp"
#include "fusebench/ops.hpp"

using namespace fusebench;

TEST(CostModel, QkvSplitAndFusedSameFlopsDifferentLaunchesAndBytes) {
  const ShardShape s = shard(find_model("qwen3-0.6b"), 1);
  const std::int64_t m = 64, h = 1024, n = 2048 + 2 * 1024;
  const Cost split = cost_of(build_plan("qkv", "split", s, m, DType::bf16));
  const Cost fused = cost_of(build_plan("qkv", "fused", s, m, DType::bf16));
  EXPECT_EQ(split.launches, 3);
  EXPECT_EQ(fused.launches, 1);
  EXPECT_DOUBLE_EQ(split.flops, 2.0 * m * n * h);
  EXPECT_DOUBLE_EQ(fused.flops, split.flops);
  // Fused reads X once instead of three times; weights and outputs move the same.
  EXPECT_DOUBLE_EQ(split.bytes - fused.bytes, 2.0 * m * h * 2);
  EXPECT_DOUBLE_EQ(fused.bytes, (m * h + n * h + m * n) * 2.0);
}

TEST(CostModel, GateUpLaunchesAndActivationBytes) {
  const ShardShape s = shard(find_model("llama3-8b"), 2);
  const std::int64_t m = 16, inter = 7168, h = 4096;
  const Cost split = cost_of(build_plan("gate_up", "split", s, m, DType::f32));
  const Cost fused = cost_of(build_plan("gate_up", "fused", s, m, DType::f32));
  EXPECT_EQ(split.gemm_launches, 2);
  EXPECT_EQ(split.elementwise_launches, 1);
  EXPECT_EQ(fused.gemm_launches, 1);
  EXPECT_EQ(fused.elementwise_launches, 1);
  EXPECT_DOUBLE_EQ(fused.flops, 2.0 * m * (2 * inter) * h);
  EXPECT_DOUBLE_EQ(split.bytes - fused.bytes, 1.0 * m * h * 4);
}

TEST(CostModel, ConfigWithQSizeNotHiddenGivesFlopsFromHeads) {
  const ModelShape model = parse_hf_config(
      R"({"model_type": "llama",
          "hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 8,
          "head_dim": 128, "intermediate_size": 3072})",
      "qwen-like");
  const Cost c = cost_of(build_plan("qkv", "fused", shard(model, 1), 10, DType::bf16));
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 10 * (16 * 128 + 2 * 8 * 128) * 1024);
}

TEST(CostModel, ComputeBoundCrossoverMatchesRoofline) {
  const ShardShape s = shard(find_model("llama3-8b"), 1);
  const Ceilings h200{990e12, 4.8e12, "nominal"};
  const auto m = predicted_compute_bound_tokens(
      [&](std::int64_t t) { return build_plan("qkv", "fused", s, t, DType::bf16); }, h200);
  ASSERT_GT(m, 1);
  const auto ai = [&](std::int64_t t) {
    return cost_of(build_plan("qkv", "fused", s, t, DType::bf16)).arithmetic_intensity();
  };
  EXPECT_GE(ai(m), h200.ridge());
  EXPECT_LT(ai(m - 1), h200.ridge());
  EXPECT_GT(m, 100);  // DESIGN: projections turn compute-bound around a few hundred tokens
  EXPECT_LT(m, 1000);
}

TEST(CostModel, RooflineSecondsAddsLaunchOverhead) {
  const ShardShape s = shard(find_model("qwen3-0.6b"), 1);
  const Plan split = build_plan("qkv", "split", s, 1, DType::bf16);
  const Ceilings c{1e15, 4e12, "test"};
  EXPECT_NEAR(roofline_seconds(split, c, 2e-6) - roofline_seconds(split, c, 0), 6e-6, 1e-12);
}

TEST(Ops, UnknownOpAndVariantAreNamed) {
  const ShardShape s = shard(find_model("qwen3-0.6b"), 1);
  EXPECT_THROW(build_plan("mlp", "split", s, 1, DType::bf16), std::invalid_argument);
  try {
    build_plan("qkv", "fast", s, 1, DType::bf16);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("fast"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("split, fused"), std::string::npos);
  }
  EXPECT_THROW(build_plan("qkv", "split", s, 0, DType::bf16), std::invalid_argument);
}
