// The quantized TP pipelines (issue 29): tp_attn and tp_mlp at fp8 and int8, every GEMM a
// quantize of its input and a scaled GEMM, checked on two in-process ranks against the float64
// replay of both ranks' plans; and what vLLM refuses, refused.
#include <gtest/gtest.h>

#include "fusebench/cost_model.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/tp.hpp"
#include "fusebench/verify.hpp"

namespace fusebench {
namespace {

// Rank 0 of a tiny model at tp 2: 4 q heads and 2 kv heads of 64, hidden 256, intermediate 384.
ShardShape tiny_tp2() {
  ShardShape s;
  s.hidden = 256;
  s.head_dim = 64;
  s.q_heads = 2;
  s.kv_heads = 1;
  s.intermediate = 192;
  s.tp = 2;
  return s;
}

template <class T>
int count(const Plan& p) {
  int n = 0;
  for (const Step& s : p.steps) n += std::holds_alternative<T>(s);
  return n;
}

TEST(QuantTp, EveryGemmBecomesAQuantizeAndAScaledGemm) {
  for (const char* op : {"tp_attn", "tp_mlp"}) {
    for (const char* variant : {"naive", "paired", "sp", "overlap"}) {
      for (const char* spec : {"int8", "fp8", "fp8:channel"}) {
        const std::string what = std::string(op) + "/" + variant + " " + spec;
        const Plan plain = build_plan(op, variant, tiny_tp2(), 6, DType::bf16);
        const QuantSpec q = parse_quant_spec(spec);
        const Plan p = build_plan(op, variant, tiny_tp2(), 6, DType::bf16, q);
        const int gemms = count<GemmStep>(plain);
        ASSERT_GT(gemms, 1) << what;
        EXPECT_EQ(count<GemmStep>(p), 0) << what;
        EXPECT_EQ(count<QuantizeStep>(p), gemms) << what;
        EXPECT_EQ(count<ScaledGemmStep>(p), gemms) << what;
        EXPECT_EQ(p.steps.size(), plain.steps.size() + static_cast<std::size_t>(gemms)) << what;
        EXPECT_NO_THROW(p.check_order()) << what;
        EXPECT_EQ(p.quant_outputs, std::vector<std::string>{"out"}) << what;
        // Launches: one quantize more per GEMM, and int8's dequantize.
        EXPECT_EQ(cost_of(p).launches,
                  cost_of(plain).launches + gemms * (q.dtype == QuantDType::int8 ? 2 : 1))
            << what;
        // The column layer's merged weight in vLLM's form for the spec.
        for (const BufferSpec& b : p.buffers) {
          if (!b.quantized || b.parts.size() < 2) continue;
          const ShardFusion want = q.weights != WeightScales::tensor ? ShardFusion::stack
                                   : q.dtype == QuantDType::int8     ? ShardFusion::channelwise
                                                                     : ShardFusion::max_scale;
          EXPECT_EQ(b.quantized->fusion, want) << what << " " << b.name;
        }
      }
    }
  }
}

TEST(QuantTp, RefusesWhatItDoesNotModelAndWhatVllmRefuses) {
  const auto why = [](const std::string& op, ShardShape s, const std::string& spec) {
    try {
      build_plan(op, "paired", s, 4, DType::bf16, parse_quant_spec(spec));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(why("tp_mlp", tiny_tp2(), "fp8:tensor:static").find("static input scales"),
            std::string::npos);
  ShardShape biased = tiny_tp2();
  biased.qkv_bias = true;
  EXPECT_NE(why("tp_attn", biased, "int8").find("bias"), std::string::npos);
  // qwen3-0.6b's MLP at tp 16: gate's and up's shards are 3072/16 = 192 rows, not whole
  // 128-blocks (and down's input shard 192 columns).
  const std::string block = why("tp_mlp", shard(find_model("qwen3-0.6b"), 16), "fp8:block");
  EXPECT_NE(block.find("refused as vLLM refuses gate_up_proj"), std::string::npos) << block;
  EXPECT_NE(block.find("output_partition_size = 192"), std::string::npos) << block;
  EXPECT_EQ(why("tp_mlp", shard(find_model("qwen3-0.6b"), 8), "fp8:block"), "");
}

TEST(QuantTp, EveryRankMatchesTheFloat64ReplayOfBothRanks) {
  for (const char* op : {"tp_attn", "tp_mlp"}) {
    for (const char* spec : {"int8", "fp8:channel"}) {
      const auto results =
          verify_quant_tp_inprocess(op, tiny_tp2(), 5, DType::bf16, parse_quant_spec(spec), 17);
      EXPECT_EQ(results.size(), 8u) << op << " " << spec;  // 4 variants x 2 ranks
      for (const auto& r : results) EXPECT_TRUE(r.ok()) << spec << " " << r.summary();
    }
  }
}

}  // namespace
}  // namespace fusebench
