// Quantized qkv and gate_up (issue 29, part 2): their plans and launch counts, each variant
// verified on the CPU against its exact dequantized reference, and the accuracy the fusions cost.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "backends/cpu_gemm.hpp"
#include "error_of.hpp"
#include "fusebench/cost_model.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/verify.hpp"
#include "fusebench/workspace.hpp"
#include "quantize_check.hpp"

namespace fusebench {
namespace {

// q 256, k and v 128 wide over K 256; gate and up 384: every shard a multiple of 128.
ShardShape tiny() {
  ShardShape s;
  s.hidden = 256;
  s.head_dim = 64;
  s.q_heads = 4;
  s.kv_heads = 2;
  s.intermediate = 384;
  return s;
}

Cost cost(const std::string& op, const std::string& variant, const std::string& spec,
          std::int64_t tokens = 16) {
  return cost_of(build_plan(op, variant, tiny(), tokens, DType::bf16, parse_quant_spec(spec)));
}

TEST(QuantPlans, SplitQuantizesPerLayerFusedOnce) {
  // Dynamic activations: each split layer quantizes its own input (3 + 3), fused once (1 + 1).
  const Cost split = cost("qkv", "split", "fp8"), fused = cost("qkv", "fused", "fp8");
  EXPECT_EQ(split.quantize_launches, 3);
  EXPECT_EQ(split.gemm_launches, 3);
  EXPECT_EQ(split.launches, 6);
  EXPECT_EQ(fused.quantize_launches, 1);
  EXPECT_EQ(fused.gemm_launches, 1);
  EXPECT_EQ(fused.launches, 2);
  // gate_up: 2 + 2, or 1 + 1, then the activation.
  EXPECT_EQ(cost("gate_up", "split", "fp8:channel").launches, 5);
  EXPECT_EQ(cost("gate_up", "fused", "fp8:block").launches, 3);
  // The same FLOPs as the float plan; fewer bytes (one per weight element).
  const Cost bf16 = cost_of(build_plan("qkv", "fused", tiny(), 16, DType::bf16));
  EXPECT_EQ(fused.flops, bf16.flops);
  EXPECT_LT(fused.bytes, bf16.bytes);
}

// int8's scaled GEMM is two launches on every backend (cost_model.hpp, scaled_gemm_launches):
// cuBLASLt's s8 GEMM into int32, then the dequantize kernel (the CPU: its host scaling loop).
TEST(QuantPlans, Int8CountsItsDequantizeLaunch) {
  EXPECT_EQ(scaled_gemm_launches(QuantDType::fp8_e4m3fn), 1);
  EXPECT_EQ(scaled_gemm_launches(QuantDType::int8), 2);
  const Cost split = cost("qkv", "split", "int8"), fused = cost("qkv", "fused", "int8:channel");
  EXPECT_EQ(split.quantize_launches, 3);
  EXPECT_EQ(split.gemm_launches, 3);
  EXPECT_EQ(split.elementwise_launches, 6);  // 3 quantize + 3 dequantize
  EXPECT_EQ(split.launches, 9);
  EXPECT_EQ(fused.gemm_launches, 1);
  EXPECT_EQ(fused.launches, 3);
  EXPECT_EQ(cost("qkv", "fused_channelwise", "int8").launches, 3);
  EXPECT_EQ(cost("gate_up", "split", "int8:channel").launches, 2 * 3 + 1);
  // Its int32 accumulator is written and read once more than fp8's output path: 8 bytes per
  // output element beside the same codes and scales.
  const Cost fp8 = cost("qkv", "fused", "fp8:channel");
  const double mn = 16.0 * (256 + 128 + 128);
  EXPECT_DOUBLE_EQ(fused.bytes - fp8.bytes, 8 * mn);
  EXPECT_EQ(fused.flops, fp8.flops);
}

// The CPU backend counts what the model counts: an int8 scaled GEMM is two library calls, an fp8
// one, so launches == model_launches on the CPU as on the GPU.
TEST(QuantPlans, CpuLibraryCallsEqualTheModelsLaunches) {
  auto backend = make_cpu_backend();
  for (const char* spec : {"fp8", "int8", "int8:channel", "fp8:block"}) {
    for (const char* variant : {"split", "fused"}) {
      const Plan plan = build_plan("qkv", variant, tiny(), 4, DType::bf16, parse_quant_spec(spec));
      Workspace ws(*backend, plan, 3);
      const std::int64_t before = backend->library_calls();
      ws.run();
      EXPECT_EQ(backend->library_calls() - before, cost_of(plan).launches)
          << spec << " " << variant;
    }
  }
}

TEST(QuantPlans, VariantsPerGranularityAndRefusals) {
  const OpInfo& qkv = find_op("qkv");
  EXPECT_EQ(qkv.quant_variants(parse_quant_spec("fp8")),
            (std::vector<std::string>{"split", "fused", "fused_channelwise"}));
  EXPECT_EQ(qkv.quant_variants(parse_quant_spec("fp8:block")),
            (std::vector<std::string>{"split", "fused"}));
  // Channelwise exists only where the weight scales are per tensor.
  EXPECT_NE(error_of([&] {
              cost("qkv", "fused_channelwise", "fp8:channel");
            }).find("unknown variant 'fused_channelwise'"),
            std::string::npos);
  // Ops without quantized variants (the collectives) are refused by name.
  ShardShape tp2 = tiny();
  tp2.tp = 2;
  EXPECT_NE(error_of([&] {
              build_plan("allreduce", "sum", tp2, 1, DType::bf16, parse_quant_spec("fp8"));
            }).find("op allreduce has no quantized"),
            std::string::npos);
  // Block scales: a 64-wide k shard cannot be merged (vLLM's validate_fp8_block_shape).
  ShardShape s = tiny();
  s.kv_heads = 1;
  const std::string why = error_of(
      [&] { build_plan("qkv", "fused", s, 1, DType::bf16, parse_quant_spec("fp8:block")); });
  EXPECT_NE(why.find("refused as vLLM refuses it"), std::string::npos) << why;
  EXPECT_NE(why.find("not divisible by weight quantization block_n = 128"), std::string::npos);
  // A bias is not added by the quantized variants yet: refused, not silently dropped.
  s = tiny();
  s.qkv_bias = true;
  EXPECT_NE(error_of([&] {
              build_plan("qkv", "split", s, 1, DType::bf16, parse_quant_spec("fp8"));
            }).find("add no bias"),
            std::string::npos);
}

class QuantVerify : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(QuantVerify, EveryVariantMatchesItsDequantizedReference) {
  const auto& [op, spec] = GetParam();
  auto backend = make_cpu_backend();
  const auto results =
      verify_quant_op(*backend, op, tiny(), 5, DType::bf16, parse_quant_spec(spec), 7);
  ASSERT_FALSE(results.empty());
  for (const auto& r : results) {
    EXPECT_TRUE(r.checked() && r.ok()) << r.summary();
    for (const auto& c : r.comparisons) EXPECT_EQ(c.against, "float64_dequantized");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Specs, QuantVerify,
    ::testing::Combine(::testing::Values("qkv", "gate_up"),
                       ::testing::Values("fp8", "int8", "fp8:channel", "int8:channel", "fp8:block",
                                         "fp8:tensor:static", "fp8:tensor:token")));

TEST(QuantVerify, CatchesAWrongScale) {
  // The reference is not the kernel's own output: a plan whose weight scales the host would
  // compute differently (here: per channel on the device, per tensor in the reference) fails.
  auto backend = make_cpu_backend();
  Plan plan = build_plan("qkv", "split", tiny(), 3, DType::bf16, parse_quant_spec("fp8:channel"));
  const auto in = logical_inputs(plan, 7, nullptr, true);
  Plan wrong = plan;
  for (auto& b : wrong.buffers)
    if (b.quantized && b.store == BufferSpec::Store::codes) b.quantized->kind = ScaleKind::tensor;
  for (auto& b : wrong.buffers)
    if (b.store == BufferSpec::Store::scales && b.role == BufferRole::weight) b.rows = b.cols = 1;
  const ReferenceOutputs want = dequantized_reference(wrong, in, 3);
  Workspace ws(*backend, plan, 7);
  ws.run();
  const auto got = ws.read(plan.outputs.at("q"));
  EXPECT_FALSE(compare_outputs("q", "x", got, want.at("q"), tolerance_for(DType::bf16)).ok);
}

// The CPU backend's threaded quantize step gives the reference's codes and scales, bit for bit.
TEST(QuantCpu, QuantizeMatchesTheHostBitForBit) {
  auto backend = make_cpu_backend();
  expect_quantize_matches_host(*backend, false);
}

TEST(QuantCpu, NativeInt8IsExactWhereOffered) {
  cpu::CpuGemm gemm;
  if (gemm.int8_kernel().empty()) GTEST_SKIP() << gemm.int8_unavailable();
  // Full-range codes (-128 too), where int16 pair sums (vpmaddubsw) would saturate; strided
  // operands (a 128-wide K block of a wider row, as block scales run it); odd K; M and N that
  // are not multiples of the kernel's 6 rows and 16 columns; more than one packed K block; one
  // thread and two.
  struct Case {
    std::int64_t m, n, k, ld;
    int threads;
  };
  // 12 x 32 x 1100: whole 6 x 16 tiles, written in place, over three K blocks.
  for (const Case c : {Case{3, 5, 700, 700, 1}, Case{13, 37, 129, 300, 2}, Case{1, 16, 1, 1, 1},
                       Case{7, 33, 1031, 1031, 2}, Case{12, 32, 1100, 1104, 2}}) {
    std::vector<std::int8_t> x(c.m * c.ld), w(c.n * c.ld);
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<std::int8_t>(i % 3 == 0 ? -128 : (i % 2 ? 127 : -127));
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i] = static_cast<std::int8_t>(static_cast<int>((i * 37) % 256) - 128);
    std::vector<std::int32_t> y(c.m * c.n, 12345);
    gemm.set_threads(c.threads);
    ASSERT_TRUE(gemm.int8_gemm(x.data(), c.ld, w.data(), c.ld, y.data(), c.m, c.n, c.k));
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < c.n; ++j) {
        std::int64_t want = 0;
        for (std::int64_t p = 0; p < c.k; ++p) want += x[i * c.ld + p] * w[j * c.ld + p];
        ASSERT_EQ(y[i * c.n + j], want)
            << c.m << "x" << c.n << "x" << c.k << " at " << i << "," << j;
      }
    // The scales applied by the kernel's epilogue: out (+)= y * row scale * column scale.
    std::vector<float> rs(c.m), cs(c.n), out(c.m * c.n, 0.5f);
    for (std::int64_t i = 0; i < c.m; ++i) rs[i] = 0.25f + static_cast<float>(i);
    for (std::int64_t j = 0; j < c.n; ++j) cs[j] = 1.0f / static_cast<float>(j + 3);
    for (const bool accumulate : {false, true}) {
      const std::vector<float> before = out;
      const cpu::Int8Epilogue e{rs.data(), cs.data(), out.data(), accumulate};
      ASSERT_TRUE(gemm.int8_gemm(x.data(), c.ld, w.data(), c.ld, y.data(), c.m, c.n, c.k, &e));
      for (std::int64_t i = 0; i < c.m * c.n; ++i) {
        const float v = static_cast<float>(y[i]) * (rs[i / c.n] * cs[i % c.n]);
        ASSERT_EQ(out[i], accumulate ? before[i] + v : v) << i;
      }
    }
    // Or rounded to bf16 straight into a strided output (as scaled_gemm's bf16 y).
    const std::int64_t ld = c.n + 3;
    std::vector<std::uint16_t> out16(c.m * ld, 7);
    cpu::Int8Epilogue e{rs.data(), cs.data()};
    e.out_bf16 = out16.data(), e.ld_bf16 = ld;
    ASSERT_TRUE(gemm.int8_gemm(x.data(), c.ld, w.data(), c.ld, y.data(), c.m, c.n, c.k, &e));
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < ld; ++j) {
        const std::uint16_t want =
            j < c.n ? float_to_bf16(static_cast<float>(y[i * c.n + j]) * (rs[i] * cs[j])) : 7;
        ASSERT_EQ(out16[i * ld + j], want) << i << "," << j;
      }
  }
}

// Random weights whose k and v are `shrink` times smaller than q (not a power of two, so the
// max-scale requantization rounds them again), as shards of a real layer differ.
class SkewedWeights : public TensorSource {
 public:
  explicit SkewedWeights(double shrink) : random_(11), shrink_(shrink) {}
  bool has(const std::string&) const override { return true; }
  std::vector<float> window(const WindowRequest& r) const override {
    auto v = random_.window(r);
    if (r.name == "w_k" || r.name == "w_v")
      for (float& x : v) x = static_cast<float>(x * shrink_);
    return v;
  }
  std::string describe() const override { return "skewed"; }

 private:
  RandomTensors random_;
  double shrink_;
};

std::map<std::string, std::vector<double>> outputs_of(const std::string& variant,
                                                      const TensorSource& w) {
  auto backend = make_cpu_backend();
  Workspace ws(*backend,
               build_plan("qkv", variant, tiny(), 32, DType::f32, parse_quant_spec("fp8")), 3, &w);
  ws.run();
  std::map<std::string, std::vector<double>> out;
  for (const auto& name : ws.plan().quant_outputs) {
    const auto got = ws.read(ws.plan().outputs.at(name));
    out[name] = {got.begin(), got.end()};
  }
  return out;
}

TEST(QuantAccuracy, ChannelwiseIsSplitMaxScaleCostsTheSmallerShards) {
  const SkewedWeights w(0.37);
  const Plan plan = build_plan("qkv", "split", tiny(), 32, DType::f32, parse_quant_spec("fp8"));
  const ReferenceOutputs exact = find_op("qkv").reference(plan, logical_inputs(plan, 3, &w, true));
  const auto split = outputs_of("split", w), fused = outputs_of("fused", w),
             channelwise = outputs_of("fused_channelwise", w);
  for (const char* shard : {"q", "k", "v"}) {
    const std::int64_t cols = static_cast<std::int64_t>(exact.at(shard).size()) / 32;
    const auto err = [&](const auto& y) {
      return quant_error(y.at(shard), exact.at(shard), 32, {cols})[0];
    };
    const double e_split = err(split), e_fused = err(fused), e_cw = err(channelwise);
    EXPECT_GT(e_split, 1e-3) << shard;  // fp8 does cost something
    // Channelwise: split's codes and scales, so split's error up to fp32 accumulation order.
    EXPECT_NEAR(e_cw, e_split, 1e-5 * e_split + 1e-7) << shard;
    EXPECT_LT(quant_error_vs_split(channelwise.at(shard), split.at(shard), 32, {cols})[0], 1e-5);
    if (std::string(shard) == "q") {  // the max-scale shard keeps its codes
      EXPECT_NEAR(e_fused, e_split, 1e-5 * e_split) << shard;
    } else {  // rounded twice
      EXPECT_GT(e_fused, 1.05 * e_split) << shard;
      EXPECT_GT(quant_error_vs_split(fused.at(shard), split.at(shard), 32, {cols})[0], 1e-3);
    }
  }
}

}  // namespace

// Issue 36: a quantized entry's accuracy reference and its shards' fusion are the op's to say
// (OpInfo::quant_reference, quant_shard_fusion), not the runner's: a TP pipeline's reference is
// its unsharded paired plan, unquantized, on the whole logical tensors.
TEST(QuantPlans, TheOpNamesItsAccuracyReference) {
  EXPECT_FALSE(find_op("qkv").quant_reference);  // its variant at the rows compared
  EXPECT_FALSE(find_op("gate_up").quant_shard_fusion);
  EXPECT_TRUE(find_op("moe").quant_reference);  // the measured routing, first rows
  const ShardShape s = shard(find_model("qwen3-0.6b"), 2);
  const Plan measured = build_plan("tp_mlp", "sp", s, 16, DType::bf16, parse_quant_spec("int8"));
  const AccuracyReference ref = find_op("tp_mlp").quant_reference(measured, 4);
  EXPECT_TRUE(ref.whole_tensors);
  EXPECT_EQ(ref.plan.op, "tp_mlp");
  EXPECT_EQ(ref.plan.variant, "paired");
  EXPECT_EQ(ref.plan.tokens, 4);
  EXPECT_FALSE(ref.plan.quant.has_value());
  EXPECT_EQ(find_op("tp_attn").quant_shard_fusion(parse_quant_spec("int8"), "naive"),
            "column layer: channelwise (exact; vLLM's INT8 w8a8)");
  EXPECT_EQ(find_op("tp_mlp").quant_shard_fusion(parse_quant_spec("fp8"), "sp"),
            "column layer: max-scale requantization (vLLM's fused FP8; lossy)");
  EXPECT_EQ(find_op("tp_mlp").quant_shard_fusion(parse_quant_spec("fp8:channel"), "overlap"),
            "column layer: stacked (exact)");
}

}  // namespace fusebench
