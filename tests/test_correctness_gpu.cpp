#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

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

// The quantize kernels against the host's quantize(), code for code and scale for scale: fp8 and
// int8, per tensor (dynamic and static), per token and per 1x128 group (the cuda backend's
// group-major layout), on 37 rows of 1000 columns (a partial last group) of bf16 values spanning
// magnitudes, with exact ties for int8's round-half-even and values past the static scale's
// range (saturation).
TEST(GpuQuant, QuantizeKernelsMatchTheHostBitForBit) {
  std::string why;
  auto backend = make_cuda_backend(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  const std::int64_t rows = 37, cols = 1000, groups = (cols + 127) / 128;
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  std::uint64_t state = 12345;
  for (std::size_t i = 0; i < x.size(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(state >> 11) / 9007199254740992.0 - 0.5;  // [-0.5, 0.5)
    const auto r = static_cast<int>(i / static_cast<std::size_t>(cols));
    x[i] = static_cast<float>(u * std::ldexp(1.0, r % 9 - 4));  // 2^-5 .. 2^3 by row
  }
  // Exact ties of x / 0.5 (the static scale below): 0.25 -> 0.5, 0.75 -> 1.5, -1.25 -> -2.5.
  x[3] = 0.25f, x[4] = 0.75f, x[5] = -1.25f, x[6] = 100.0f, x[7] = -100.0f;  // and saturation
  const std::vector<std::byte> bytes = encode(x, DType::bf16);
  x = decode(bytes.data(), x.size(), DType::bf16);  // the values the device reads
  void* dx = backend->allocate(bytes.size());
  auto* codes = static_cast<std::uint8_t*>(backend->allocate(x.size()));
  auto* scales = static_cast<float*>(backend->allocate(sizeof(float) * rows * groups));
  backend->upload(dx, bytes.data(), bytes.size());
  const MatRef xr{dx, DType::bf16, rows, cols, cols};
  for (QuantDType dtype : {QuantDType::fp8_e4m3fn, QuantDType::int8}) {
    for (ScaleKind kind : {ScaleKind::tensor, ScaleKind::row, ScaleKind::group}) {
      for (bool is_static : {false, true}) {
        if (is_static && kind != ScaleKind::tensor) continue;
        const std::string what = std::string(to_string(dtype)) + " kind " +
                                 std::to_string(static_cast<int>(kind)) +
                                 (is_static ? " static" : " dynamic");
        const QuantMat want = is_static
                                  ? quantize_with_scales(x.data(), rows, cols, dtype, kind, {0.5f})
                                  : quantize(x.data(), rows, cols, dtype, kind);
        if (is_static) {
          const float half = 0.5f;
          backend->upload(scales, &half, sizeof(half));
        }
        try {
          backend->quantize({xr, {codes, rows, cols, cols, scales, kind, dtype}, is_static});
          backend->synchronize();
        } catch (const std::exception& e) {
          ADD_FAILURE() << what << ": " << e.what();
          continue;
        }
        std::vector<std::uint8_t> got(x.size());
        backend->download(got.data(), codes, got.size());
        std::vector<float> got_scales(want.scales.size());
        backend->download(got_scales.data(), scales, got_scales.size() * sizeof(float));
        std::size_t wrong = 0, first = got.size();
        for (std::size_t i = 0; i < got.size(); ++i) {
          if (got[i] != want.codes[i]) {
            if (wrong++ == 0) first = i;
          }
        }
        EXPECT_EQ(wrong, 0u) << what << ": first at " << first << " (x " << x[first % x.size()]
                             << ", device code " << int(got[first % got.size()]) << ", host "
                             << int(want.codes[first % got.size()]) << ")";
        for (std::int64_t r = 0; r < want.scale_rows(); ++r) {
          for (std::int64_t g = 0; g < want.scale_cols(); ++g) {
            // The device's group scales are group-major (cuda_scaled_gemm.hpp).
            const std::int64_t at =
                kind == ScaleKind::group ? g * rows + r : r * want.scale_cols() + g;
            EXPECT_EQ(got_scales[static_cast<std::size_t>(at)],
                      want.scales[static_cast<std::size_t>(r * want.scale_cols() + g)])
                << what << " scale (" << r << ", " << g << ")";
          }
        }
      }
    }
  }
  backend->release(dx);
  backend->release(codes);
  backend->release(scales);
}

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
  // fp8:block and int8 run too (the tests below); int8 with 128x128 blocks is refused.
  EXPECT_EQ(backend->quant_unsupported_reason(parse_quant_spec("fp8:block")), "");
  EXPECT_EQ(backend->quant_unsupported_reason(parse_quant_spec("int8")), "");
  EXPECT_NE(backend->quant_unsupported_reason(parse_quant_spec("int8:block")), "");
}

// Every variant of `spec` on one op and token count against its exact dequantized reference; a
// throw (a cuBLASLt call refused: its message names the call, M, N, K and the scale modes) is
// recorded as a failure of this case and the next case still runs, so one GPU run reports them
// all. `variants`: how many variants the spec has (each must be checked, none left out).
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

// fp8 with 128x128 weight blocks (cuBLASLt BLK128x128_32F x VEC128_32F, the 1x128 activation
// scales group-major) and int8 (cuBLASLt's s8 GEMM into int32, then our dequantize kernel): every
// variant against its exact dequantized reference at qwen3-0.6b's shapes (K 1024: 8 blocks, a
// multiple of 4), at decode, an odd M and a prefill. 16 reference rows keep the host's float64
// product short.
TEST(GpuQuant, BlockFp8AndInt8VariantsMatchTheirDequantizedReference) {
  std::string why;
  auto backend = make_cuda_backend(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  for (const char* op : {"qkv", "gate_up"}) {
    for (std::int64_t tokens : {1, 37, 512}) {
      expect_quant_variants(*backend, "fp8:block", op, tokens, 2, 16);
      expect_quant_variants(*backend, "int8", op, tokens, 3, 16);
    }
    // The other int8 scale pairs run the same s8 GEMM (only the dequantize kernel's scales and
    // the quantize kernel differ, which QuantizeKernelsMatchTheHostBitForBit checks alone): at
    // the odd M only, to keep the host's share of this test short.
    expect_quant_variants(*backend, "int8:channel", op, 37, 2, 16);
  }
  expect_quant_variants(*backend, "int8:tensor:static", "qkv", 37, 3, 16);
  expect_quant_variants(*backend, "int8:tensor:token", "qkv", 37, 3, 16);
}

}  // namespace
}  // namespace fusebench
