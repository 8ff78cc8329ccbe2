#include <gtest/gtest.h>

#include "fusebench/backend.hpp"
#include "fusebench/shapes.hpp"
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

namespace fusebench {
namespace {

// The cuda backend's fp8 (written and compiled, first run on a GPU here): our quantize kernels
// and cuBLASLt's e4m3 matmul, every variant against its exact dequantized reference, at decode
// and at a prefill over the real qwen3-0.6b shapes; what it refuses, refused naming why.
TEST(GpuQuant, Fp8VariantsMatchTheirDequantizedReference) {
  std::string why;
  auto backend = make_cuda_backend(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  const ShardShape real = shard(find_model("qwen3-0.6b"), 1);
  for (const char* spec : {"fp8", "fp8:channel", "fp8:tensor:static", "fp8:tensor:token"}) {
    for (const char* op : {"qkv", "gate_up"}) {
      for (std::int64_t tokens : {1, 37, 512}) {
        const auto results =
            verify_quant_op(*backend, op, real, tokens, DType::bf16, parse_quant_spec(spec), 7, 64);
        ASSERT_FALSE(results.empty()) << spec << " " << op;
        for (const auto& r : results)
          EXPECT_TRUE(r.checked() && r.ok())
              << spec << " " << op << " tokens=" << tokens << " " << r.summary();
      }
    }
  }
  EXPECT_NE(backend->quant_unsupported_reason(parse_quant_spec("fp8:block")), "");
  EXPECT_NE(backend->quant_unsupported_reason(parse_quant_spec("int8")), "");
}

}  // namespace
}  // namespace fusebench
