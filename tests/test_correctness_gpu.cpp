#include <gtest/gtest.h>

#include "fusebench/verify.hpp"

using namespace fusebench;

namespace {
std::string CaseName(
    const ::testing::TestParamInfo<std::tuple<std::string, DType, std::int64_t>>& info) {
  return std::get<0>(info.param) + "_" + std::string(to_string(std::get<1>(info.param))) + "_m" +
         std::to_string(std::get<2>(info.param));
}
}  // namespace

class GpuCorrectness
    : public ::testing::TestWithParam<std::tuple<std::string, DType, std::int64_t>> {};

TEST_P(GpuCorrectness, FusedEqualsSplitAndFloat64Reference) {
  std::string why;
  auto backend = make_cuda_backend(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  const auto [op, dtype, tokens] = GetParam();
  for (int tp : {1, 16}) {
    const ShardShape s = shard(find_model("qwen3-0.6b"), tp);
    for (const auto& r : verify_op(*backend, op, s, tokens, dtype, 4321 + tokens, true)) {
      EXPECT_TRUE(r.ok()) << "tp=" << tp << " " << r.summary();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, GpuCorrectness,
                         ::testing::Combine(::testing::Values("qkv", "gate_up"),
                                            ::testing::Values(DType::bf16, DType::f16, DType::f32),
                                            ::testing::Values(1, 5, 128)),
                         CaseName);

TEST(GpuCorrectness, LargeShapeFusedEqualsSplit) {
  std::string why;
  auto backend = make_cuda_backend(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  const ShardShape s = shard(find_model("llama3-8b"), 1);
  for (const char* op : {"qkv", "gate_up"}) {
    for (const auto& r : verify_op(*backend, op, s, 512, DType::bf16, 77, false)) {
      EXPECT_TRUE(r.ok()) << r.summary();
    }
  }
}
