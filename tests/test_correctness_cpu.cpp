#include <gtest/gtest.h>

#include "fusebench/verify.hpp"
#include "fusebench/workspace.hpp"

using namespace fusebench;

namespace {

void expect_all_ok(const std::vector<VerifyResult>& results) {
  ASSERT_FALSE(results.empty());
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << r.summary();
}

}  // namespace

namespace {
std::string CaseName(
    const ::testing::TestParamInfo<std::tuple<std::string, DType, int, std::int64_t>>& info) {
  return std::get<0>(info.param) + "_" + std::string(to_string(std::get<1>(info.param))) + "_tp" +
         std::to_string(std::get<2>(info.param)) + "_m" + std::to_string(std::get<3>(info.param));
}
}  // namespace

class CpuCorrectness
    : public ::testing::TestWithParam<std::tuple<std::string, DType, int, std::int64_t>> {};

TEST_P(CpuCorrectness, FusedEqualsSplitAndFloat64Reference) {
  const auto [op, dtype, tp, tokens] = GetParam();
  auto backend = make_cpu_backend();
  if (auto why = backend->unsupported_reason(dtype); !why.empty()) GTEST_SKIP() << why;
  const ShardShape s = shard(find_model("qwen3-0.6b"), tp);
  const auto results = verify_op(*backend, op, s, tokens, dtype, /*seed=*/1234 + tokens, true);
  expect_all_ok(results);
  // Every non-baseline variant was compared with split and float64 on all its outputs.
  for (const auto& r : results) EXPECT_GE(r.comparisons.size(), r.variant == "split" ? 1u : 2u);
}

INSTANTIATE_TEST_SUITE_P(Ops, CpuCorrectness,
                         ::testing::Combine(::testing::Values("qkv", "gate_up"),
                                            ::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Values(1, 16), ::testing::Values(1, 7)),
                         CaseName);

TEST(CpuCorrectness, VerifierCatchesAWrongResult) {
  // A verifier that cannot fail proves nothing: corrupt the fused weight and expect failure.
  auto backend = make_cpu_backend();
  const ShardShape s = shard(find_model("qwen3-0.6b"), 1);
  Plan fused = build_plan("qkv", "fused", s, 3, DType::f32);
  Workspace ws(*backend, fused, 99);
  // Overwrite one weight row of w_k inside the fused weight.
  const View w = {1, fused.shard.q_size(), 0, 1, fused.shard.hidden};
  std::vector<float> junk(static_cast<std::size_t>(fused.shard.hidden), 3.0f);
  const auto bytes = encode(junk, DType::f32);
  backend->upload(ws.ref(w).data, bytes.data(), bytes.size());
  ws.run();
  const auto got = ws.read(ws.plan().outputs.at("k"));
  const auto ref = find_op("qkv").reference(fused, logical_inputs(fused, 99));
  const Tolerance tol = tolerance_for(DType::f32);
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::abs(got[i] - ref.at("k")[i]) > tol.atol + tol.rtol * std::abs(ref.at("k")[i])) ++bad;
  }
  EXPECT_GT(bad, 0);
}

TEST(CpuCorrectness, InputsAreFreshAndNeverZero) {
  const auto a = logical_tensor("x", 4, 64, BufferRole::input, DType::bf16, 1);
  const auto b = logical_tensor("x", 4, 64, BufferRole::input, DType::bf16, 2);
  EXPECT_NE(a, b);
  for (float v : a) EXPECT_NE(v, 0.0f);
}

TEST(CpuCorrectness, Fp16IsRejectedWithReason) {
  auto backend = make_cpu_backend();
  const auto why = backend->unsupported_reason(DType::f16);
  EXPECT_NE(why.find("fp16"), std::string::npos);
  const ShardShape s = shard(find_model("qwen3-0.6b"), 1);
  EXPECT_THROW(Workspace(*backend, build_plan("qkv", "split", s, 1, DType::f16), 1),
               std::invalid_argument);
}

// Issue 23: a passing comparison says which tolerance passed it. An element near zero passes by
// atol alone, and its relative error (the comparison's max_rel_error) exceeds rtol.
TEST(CpuCorrectness, ComparisonCountsElementsPassedByAtolAlone) {
  const fusebench::Tolerance tol{1e-4, 1e-4};
  const std::vector<double> want = {1.0, -2.0, 1e-6};
  const auto near =
      fusebench::compare_outputs("y", "float64", std::vector<float>{1.0f, -2.0f, 5e-5f}, want, tol);
  EXPECT_TRUE(near.ok);
  EXPECT_EQ(near.within_atol_only, 1);
  EXPECT_GT(near.max_rel_error, tol.rtol);
  EXPECT_EQ(near.tolerance.atol, tol.atol);
  EXPECT_EQ(near.tolerance.rtol, tol.rtol);
  const auto relative = fusebench::compare_outputs(
      "y", "float64", std::vector<float>{1.00005f, -2.0f, 1e-6f}, want, tol);
  EXPECT_TRUE(relative.ok);
  EXPECT_EQ(relative.within_atol_only, 0);
  const auto wrong =
      fusebench::compare_outputs("y", "float64", std::vector<float>{1.1f, -2.0f, 1e-6f}, want, tol);
  EXPECT_EQ(wrong.mismatches, 1);
  EXPECT_EQ(wrong.within_atol_only, 0);
}
