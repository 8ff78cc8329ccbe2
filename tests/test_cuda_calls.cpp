// The cuda backend's scaled GEMM as data (backends/cuda_scaled_gemm.hpp), checked here where no
// GPU runs it (issue 38): the scale-mode pair each spec's plans send cuBLASLt (never SCALAR_32F
// beside OUTER_VEC_32F), the shape rules refused before the call (fp8's K % 16 and 16-byte
// leading dimensions, block scaling's M and N multiples of 4, int8's multiples of 4), and the
// alignments a quantized plan tells the heuristic and keys its cache by.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda_scaled_gemm.hpp"
#include "fusebench/backend.hpp"
#include "fusebench/cost_model.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/shapes.hpp"

namespace fusebench {
namespace {

using cuda::AlphaScale;
using cuda::LtScaleMode;
using Sent = std::tuple<LtScaleMode, LtScaleMode, AlphaScale>;  // A (w), B (x), alpha's source

// q 512, k and v 256 over K 512: every shard a multiple of 128, ceil(K/128) = 4 (so 128x128
// blocks meet BLK128x128_32F's row stride).
ShardShape shape512() {
  ShardShape s;
  s.hidden = 512;
  s.head_dim = 128;
  s.q_heads = 4;
  s.kv_heads = 2;
  s.intermediate = 512;
  return s;
}

// The calls a plan's scaled GEMMs make, as the cuda backend asks for them
// (cuda::plan_scaled_gemm_calls), and their refusals.
std::set<Sent> calls_of(const Plan& plan, std::vector<std::string>* refusals) {
  std::set<Sent> sent;
  for (const auto& [label, call] : cuda::plan_scaled_gemm_calls(plan)) {
    if (!call.refusal.empty()) refusals->push_back(label + ": " + call.refusal);
    sent.insert({call.a, call.b, call.alpha});
  }
  return sent;
}

// The table: per spec and variant of qkv, the pair sent. A per-tensor scale meeting a per-row one
// (fused_channelwise's per-row weights with a per-tensor input; per-tensor weights with per-token
// inputs) goes as OUTER_VEC_32F on both, the per-tensor operand's vector the ones and its scale
// alpha; int8's scales are our dequantize kernel's (none to cuBLASLt).
TEST(QuantCudaCalls, ScaleModePairsSentPerSpec) {
  const Sent scalar{LtScaleMode::scalar_32f, LtScaleMode::scalar_32f, AlphaScale::none};
  const Sent rowwise{LtScaleMode::outer_vec_32f, LtScaleMode::outer_vec_32f, AlphaScale::none};
  const Sent w_alpha{LtScaleMode::outer_vec_32f, LtScaleMode::outer_vec_32f, AlphaScale::w};
  const Sent x_alpha{LtScaleMode::outer_vec_32f, LtScaleMode::outer_vec_32f, AlphaScale::x};
  const Sent block{LtScaleMode::blk128x128_32f, LtScaleMode::vec128_32f, AlphaScale::none};
  const Sent int8{LtScaleMode::none, LtScaleMode::none, AlphaScale::none};
  const std::map<std::pair<std::string, std::string>, Sent> table{
      {{"fp8", "split"}, scalar},
      {{"fp8", "fused"}, scalar},
      {{"fp8", "fused_channelwise"}, x_alpha},
      {{"fp8:tensor:static", "split"}, scalar},
      {{"fp8:tensor:static", "fused"}, scalar},
      {{"fp8:tensor:static", "fused_channelwise"}, x_alpha},
      {{"fp8:tensor:token", "split"}, w_alpha},
      {{"fp8:tensor:token", "fused"}, w_alpha},
      {{"fp8:tensor:token", "fused_channelwise"}, rowwise},
      {{"fp8:channel", "split"}, rowwise},
      {{"fp8:channel", "fused"}, rowwise},
      {{"fp8:block", "split"}, block},
      {{"fp8:block", "fused"}, block},
      {{"int8", "split"}, int8},
      {{"int8", "fused"}, int8},
      {{"int8", "fused_channelwise"}, int8},
      {{"int8:channel", "split"}, int8},
      {{"int8:channel", "fused"}, int8},
      {{"int8:tensor:token", "split"}, int8},
      {{"int8:tensor:static", "fused_channelwise"}, int8},
  };
  for (const auto& [which, want] : table) {
    const auto& [spec, variant] = which;
    const Plan plan =
        build_plan("qkv", variant, shape512(), 16, DType::bf16, parse_quant_spec(spec));
    std::vector<std::string> refusals;
    const std::set<Sent> sent = calls_of(plan, &refusals);
    EXPECT_EQ(sent, std::set<Sent>{want}) << spec << " " << variant;
    EXPECT_TRUE(refusals.empty()) << spec << " " << variant << ": " << refusals.front();
  }
  // Every fp8 spec and variant of both projections: never SCALAR_32F beside OUTER_VEC_32F.
  for (const char* op : {"qkv", "gate_up"}) {
    for (const char* spec : {"fp8", "fp8:tensor:static", "fp8:tensor:token", "fp8:channel"}) {
      for (const std::string& variant : find_op(op).quant_variants(parse_quant_spec(spec))) {
        std::vector<std::string> refusals;
        const Plan plan =
            build_plan(op, variant, shape512(), 16, DType::bf16, parse_quant_spec(spec));
        for (const auto& [a, b, alpha] : calls_of(plan, &refusals)) {
          EXPECT_EQ(a, b) << op << " " << spec << " " << variant << ": a mixed pair";
          EXPECT_TRUE(alpha == AlphaScale::none || a == LtScaleMode::outer_vec_32f);
        }
        EXPECT_TRUE(refusals.empty()) << op << " " << spec << " " << variant;
      }
    }
  }
  EXPECT_EQ(cuda::to_string(LtScaleMode::blk128x128_32f), "BLK128x128_32F");
  EXPECT_EQ(cuda::to_string(LtScaleMode::vec128_32f), "VEC128_32F");
  EXPECT_EQ(cuda::to_string(AlphaScale::w), "w");
}

TEST(QuantCudaCalls, PairsWithoutAModeAndInt8BlocksAreRefused) {
  const cuda::ScaledGemmShape s{37, 2048, 1024, 1024, 1024, 2048, 2};
  const QuantDType fp8 = QuantDType::fp8_e4m3fn, int8 = QuantDType::int8;
  EXPECT_NE(cuda::scaled_gemm_call(fp8, ScaleKind::tensor, ScaleKind::block, s).refusal, "");
  const cuda::ScaledGemmCall c = cuda::scaled_gemm_call(int8, ScaleKind::row, ScaleKind::tensor, s);
  EXPECT_EQ(c.launches, 2);
  EXPECT_EQ(c.launches, scaled_gemm_launches(int8));
  EXPECT_EQ(c.refusal, "");
  EXPECT_NE(cuda::scaled_gemm_call(int8, ScaleKind::group, ScaleKind::block, s)
                .refusal.find("K-blocked int8 GEMM"),
            std::string::npos);
}

TEST(QuantCudaCalls, ShapeRulesAreRefusedNamingTheNumbers) {
  const QuantDType fp8 = QuantDType::fp8_e4m3fn, int8 = QuantDType::int8;
  const auto block = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
    return cuda::scaled_gemm_call(fp8, ScaleKind::group, ScaleKind::block, {m, n, k, k, k, n, 2})
        .refusal;
  };
  // BLK128x128_32F pads each block row's scales to a multiple of 4: our unpadded grid matches it
  // when ceil(K/128) % 4 == 0 (qwen3-0.6b's 1024: 8; llama3-8b's 4096: 32) or N <= 128.
  EXPECT_EQ(block(4, 3072, 1024), "");
  EXPECT_EQ(block(512, 128, 256), "");
  std::string why = block(8, 256, 768);
  EXPECT_NE(why.find("M=8 N=256 K=768"), std::string::npos) << why;
  EXPECT_NE(why.find("(8), our scale grid has 6 per row"), std::string::npos) << why;
  // Block scaling needs M and N multiples of 4: decode's 1 token and 37 are refused, naming it.
  for (const std::int64_t m : {1, 37, 5}) {
    why = block(m, 3072, 1024);
    EXPECT_NE(why.find("M and N multiples of 4"), std::string::npos) << m << ": " << why;
    EXPECT_NE(why.find("M=" + std::to_string(m) + " "), std::string::npos) << why;
  }
  why = cuda::scaled_gemm_call(fp8, ScaleKind::group, ScaleKind::block,
                               {4, 3070, 1024, 1024, 1024, 3072, 2})
            .refusal;  // N 3070 in a 3072-wide y
  EXPECT_NE(why.find("M and N multiples of 4"), std::string::npos) << why;
  EXPECT_EQ(block(36, 3072, 1024), "");
  // fp8's tensor-core rules: K % 16 and 16-byte leading dimensions, for every pair of kinds.
  const auto fp8_call = [&](std::int64_t k, std::int64_t ld_x, std::int64_t ld_w, std::int64_t ld_y,
                            std::int64_t y_bytes) {
    return cuda::scaled_gemm_call(fp8, ScaleKind::row, ScaleKind::row,
                                  {37, 2048, k, ld_x, ld_w, ld_y, y_bytes})
        .refusal;
  };
  EXPECT_EQ(fp8_call(1024, 1024, 1024, 2048, 2), "");
  EXPECT_EQ(fp8_call(1024, 1024, 1024, 2052, 4), "");  // 8208 bytes a row of fp32 y
  for (const auto& [k, ld_x, ld_w, ld_y, y_bytes] :
       {std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t>{
            1000, 1000, 1000, 2048, 2},  // an odd TP shard's K
        {1024, 1032, 1024, 2048, 2},
        {1024, 1024, 1036, 2048, 2},
        {1024, 1024, 1024, 2052, 2}}) {
    why = fp8_call(k, ld_x, ld_w, ld_y, y_bytes);
    EXPECT_NE(why.find("K a multiple of 16 and every leading dimension a multiple of 16 bytes"),
              std::string::npos)
        << k << " " << ld_x << " " << ld_w << " " << ld_y << ": " << why;
    EXPECT_NE(why.find("K=" + std::to_string(k)), std::string::npos) << why;
  }
  EXPECT_NE(cuda::scaled_gemm_call(fp8, ScaleKind::tensor, ScaleKind::tensor,
                                   {1, 2048, 1000, 1000, 1000, 2048, 2})
                .refusal,
            "");
  // int8 IMMA: N, K and the leading dimensions multiples of 4.
  EXPECT_EQ(cuda::scaled_gemm_call(int8, ScaleKind::row, ScaleKind::row,
                                   {37, 2048, 1024, 1024, 1024, 4096, 2})
                .refusal,
            "");
  for (const auto& [n, k, ld_y] :
       {std::tuple<std::int64_t, std::int64_t, std::int64_t>{2046, 1024, 2046},
        {2048, 1022, 2048},
        {2048, 1024, 2050}}) {
    const std::string int8_why =
        cuda::scaled_gemm_call(int8, ScaleKind::row, ScaleKind::row, {37, n, k, k, k, ld_y, 2})
            .refusal;
    EXPECT_NE(int8_why.find("multiple of 4"), std::string::npos) << n << " " << k << " " << ld_y;
    EXPECT_NE(int8_why.find("M=37 N=" + std::to_string(n)), std::string::npos) << int8_why;
  }
}

// A GPU sweep leaves out what the cuda backend would refuse, up front and naming the rule
// (runner/sweep.cpp asks cuda::plan_refusal of every quantized entry): fp8 blocks at decode.
TEST(QuantCudaCalls, PlanRefusalNamesTheStepAndTheRule) {
  const ShardShape qwen = shard(find_model("qwen3-0.6b"), 1);
  const QuantSpec block = parse_quant_spec("fp8:block");
  const std::string why =
      cuda::plan_refusal(build_plan("qkv", "fused", qwen, 1, DType::bf16, block));
  EXPECT_NE(why.find("M and N multiples of 4"), std::string::npos) << why;
  EXPECT_NE(why.find("M=1 N=4096 K=1024"), std::string::npos) << why;
  EXPECT_EQ(cuda::plan_refusal(build_plan("qkv", "fused", qwen, 4, DType::bf16, block)), "");
  EXPECT_EQ(cuda::plan_refusal(build_plan("qkv", "split", qwen, 1, DType::bf16,
                                          parse_quant_spec("fp8:tensor:token"))),
            "");
  // One call per scaled GEMM step: fused gate_up is one.
  EXPECT_EQ(cuda::plan_scaled_gemm_calls(
                build_plan("gate_up", "fused", qwen, 4, DType::bf16, parse_quant_spec("fp8")))
                .size(),
            1u);
}

// cuBLASLt's heuristic assumes 256-byte aligned operands unless told: a quantized plan tells it
// each operand's alignment (A w codes, B x codes, C = D y) with the workspace, and keys its cache
// by them, so a less aligned view of a cached shape gets a plan of its own.
TEST(QuantCudaCalls, AlignmentsAreInThePreferenceAndThePlanKey) {
  auto* base = reinterpret_cast<std::byte*>(std::uintptr_t{1} << 20);
  EXPECT_EQ(cuda::lt_alignment(base, 0, 1), 256u);
  EXPECT_EQ(cuda::lt_alignment(base + 16, 0, 1), 16u);
  EXPECT_EQ(cuda::lt_alignment(base + 1, 0, 1), 1u);
  EXPECT_EQ(cuda::lt_alignment(base, 3, 2), 2u);  // a batch stride of 3 bf16 elements
  // y a column view of a fused bf16 output 2 elements in: 4 bytes.
  const cuda::LtAlignments align = cuda::quant_alignments(base + 64, base + 16, base + 4, 2);
  EXPECT_EQ(align, (cuda::LtAlignments{64, 16, 4, 4}));
  const auto prefs = cuda::quant_preferences(align, 32u << 20);
  using P = cuda::LtPreference;
  const std::vector<std::pair<P, std::uint64_t>> want{{P::max_workspace_bytes, 32u << 20},
                                                      {P::min_alignment_a, 64},
                                                      {P::min_alignment_b, 16},
                                                      {P::min_alignment_c, 4},
                                                      {P::min_alignment_d, 4}};
  EXPECT_EQ(prefs, want);
  // cublasLt.h's values (the CUDA build static_asserts them too).
  EXPECT_EQ(static_cast<int>(P::min_alignment_a), 5);
  EXPECT_EQ(static_cast<int>(P::min_alignment_d), 8);
  const cuda::ScaledGemmShape s{16, 512, 512, 512, 512, 512, 2};
  const cuda::QuantPlanKey aligned{s,
                                   0,
                                   0,
                                   LtScaleMode::scalar_32f,
                                   LtScaleMode::scalar_32f,
                                   AlphaScale::none,
                                   cuda::quant_alignments(base, base, base, 2)};
  cuda::QuantPlanKey view = aligned;
  view.align = align;
  EXPECT_NE(aligned, view);
  std::map<cuda::QuantPlanKey, int> cache{{aligned, 1}};
  EXPECT_EQ(cache.count(view), 0u);
  cache.emplace(view, 2);
  EXPECT_EQ(cache.size(), 2u);
  cuda::QuantPlanKey other_alpha = aligned;
  other_alpha.alpha = AlphaScale::x;
  EXPECT_EQ(cache.count(other_alpha), 0u);
}

// The cuda backend's 1x128 activation scales lie group-major (cuBLASLt's VEC128_32F: stride 1
// along M, M along K); one group (per-token) is the plain [M] vector.
TEST(QuantCudaCalls, GroupScalesAreGroupMajor) {
  EXPECT_EQ(cuda::group_scale_index(0, 0, 37), 0);
  EXPECT_EQ(cuda::group_scale_index(5, 0, 37), 5);
  EXPECT_EQ(cuda::group_scale_index(0, 1, 37), 37);
  EXPECT_EQ(cuda::group_scale_index(36, 7, 37), 7 * 37 + 36);
  // Every (row, group) of a [37, 8] grid lands once in the 37 * 8 scales.
  std::vector<int> hits(37 * 8, 0);
  for (std::int64_t r = 0; r < 37; ++r)
    for (std::int64_t g = 0; g < 8; ++g)
      ++hits[static_cast<std::size_t>(cuda::group_scale_index(r, g, 37))];
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 37 * 8);
}

// What --list-for=cuda and the cuda backend refuse: int8 with block scales only (in a build whose
// toolkit has the fp8 scale modes; cmake/CudaFeatures.cmake).
TEST(QuantCudaCalls, TheCudaBackendRefusesOnlyInt8Blocks) {
#if defined(FUSEBENCH_HAVE_CUDA) && !defined(FUSEBENCH_CUDA_FP8_GEMM)
  EXPECT_NE(cuda_quant_refusal(parse_quant_spec("fp8")).find("older than 12.9"), std::string::npos);
  GTEST_SKIP() << "this build's CUDA toolkit is below the fp8 floor (12.9)";
#endif
  for (const char* spec :
       {"fp8", "fp8:channel", "fp8:block", "fp8:tensor:static", "fp8:tensor:token", "int8",
        "int8:channel", "int8:tensor:static", "int8:tensor:token", "int8:channel:tensor"})
    EXPECT_EQ(cuda_quant_refusal(parse_quant_spec(spec)), "") << spec;
  EXPECT_NE(cuda_quant_refusal(parse_quant_spec("int8:block")).find("K-blocked int8 GEMM"),
            std::string::npos);
}

}  // namespace
}  // namespace fusebench
