#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "fusebench/backend.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/shapes.hpp"
#include "fusebench/verify.hpp"
#include "gpu_test_backend.hpp"
#include "quantize_check.hpp"

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
// The quantize kernels against the host's quantize(): tests/quantize_check.hpp.
TEST(GpuQuant, QuantizeKernelsMatchTheHostBitForBit) {
  std::string why;
  auto backend = testing::gpu_test_backend(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  expect_quantize_matches_host(*backend, backend->name() == "cuda");
}

// Every variant of `spec` on one op and token count against its exact dequantized reference; a
// throw (a cuBLASLt call refused: its message names the call, M, N, K and the scale modes) is
// recorded as a failure of this case and the next case still runs, so one GPU run reports them
// all. `variants`: how many variants the spec has (each must be checked, none left out).
std::size_t quant_variant_count(const char* spec) {
  return find_op("qkv").quant_variants(parse_quant_spec(spec)).size();
}

void expect_quant_variants(Backend& backend, const char* spec, const char* op, std::int64_t tokens,
                           std::size_t variants, std::int64_t rows) {
  const ShardShape real = shard(find_model("qwen3-0.6b"), 1);
  const std::string where =
      std::string(spec) + " " + op + " tokens=" + std::to_string(tokens) + ": ";
  try {
    const auto results =
        verify_quant_op(backend, op, real, tokens, DType::bf16, parse_quant_spec(spec), 11, rows);
    EXPECT_EQ(results.size(), variants) << where << "variants verified";
    for (const auto& r : results) EXPECT_TRUE(r.checked() && r.ok()) << where << r.summary();
  } catch (const std::exception& e) {
    ADD_FAILURE() << where << e.what();
  }
}

// fp8 per tensor, per channel/token and static (cuBLASLt's e4m3 matmul; a per-tensor scale
// meeting a per-row one sent as OUTER_VEC_32F on both with the scalar as alpha): every variant
// against its exact dequantized reference, each case guarded so one failure reports and the
// next case runs.
TEST(GpuQuant, Fp8VariantsMatchTheirDequantizedReference) {
  std::string why;
  auto backend = testing::gpu_test_backend(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  // qkv at decode, an odd M and a prefill; gate_up (the same calls on other shapes) at the odd M:
  // the host's share (random weights, their quantization, the references) is most of this
  // test's time, which the device check's cap is sized from.
  for (const char* spec : {"fp8", "fp8:channel", "fp8:tensor:static", "fp8:tensor:token"}) {
    const std::size_t variants = quant_variant_count(spec);
    for (std::int64_t tokens : {1, 37, 512})
      expect_quant_variants(*backend, spec, "qkv", tokens, variants, 16);
    expect_quant_variants(*backend, spec, "gate_up", 37, variants, 16);
  }
  // fp8:block and int8 run too (the tests below); int8 with 128x128 blocks is refused.
  if (backend->name() == "cuda") {
    EXPECT_EQ(backend->quant_unsupported_reason(parse_quant_spec("fp8:block")), "");
    EXPECT_EQ(backend->quant_unsupported_reason(parse_quant_spec("int8")), "");
    EXPECT_NE(backend->quant_unsupported_reason(parse_quant_spec("int8:block")), "");
  }
}

// fp8 with 128x128 weight blocks (cuBLASLt BLK128x128_32F x VEC128_32F, the 1x128 activation
// scales group-major) and int8 (cuBLASLt's s8 GEMM into int32, then our dequantize kernel): every
// variant against its exact dequantized reference at qwen3-0.6b's shapes (K 1024: 8 blocks, a
// multiple of 4), at decode, an odd M and a prefill (fp8 blocks at 4 and 36). 16 reference rows
// keep the host's float64 product short.
TEST(GpuQuant, BlockFp8AndInt8VariantsMatchTheirDequantizedReference) {
  std::string why;
  auto backend = testing::gpu_test_backend(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  // Block scaling needs M (and N) multiples of 4 (cuda_scaled_gemm.hpp): 4 and 36 stand in for
  // decode and the odd M; decode itself is refused naming the rule. qkv at three token counts,
  // gate_up at the odd M (as the fp8 test above).
  for (std::int64_t tokens : {4, 36, 512})
    expect_quant_variants(*backend, "fp8:block", "qkv", tokens, 2, 16);
  expect_quant_variants(*backend, "fp8:block", "gate_up", 36, 2, 16);
  if (backend->name() == "cuda") {  // not in a timed CPU run (gpu_test_backend.hpp)
    const std::string refused = [&] {
      try {
        verify_quant_op(*backend, "qkv", shard(find_model("qwen3-0.6b"), 1), 1, DType::bf16,
                        parse_quant_spec("fp8:block"), 11, 16);
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
      return std::string("(ran)");
    }();
    EXPECT_NE(refused.find("M and N multiples of 4"), std::string::npos) << refused;
  }
  for (std::int64_t tokens : {1, 37, 512})
    expect_quant_variants(*backend, "int8", "qkv", tokens, 3, 16);
  expect_quant_variants(*backend, "int8", "gate_up", 37, 3, 16);
  // The other int8 scale pairs run the same s8 GEMM (only the dequantize kernel's scales and the
  // quantize kernel differ, which QuantizeKernelsMatchTheHostBitForBit checks alone): at the odd
  // M only.
  for (const char* op : {"qkv", "gate_up"})
    expect_quant_variants(*backend, "int8:channel", op, 37, 2, 16);
  expect_quant_variants(*backend, "int8:tensor:static", "qkv", 37, 3, 16);
  expect_quant_variants(*backend, "int8:tensor:token", "qkv", 37, 3, 16);
}

}  // namespace
}  // namespace fusebench
