// The CPU backend's vectorized elementwise kernels (cpu_elementwise.hpp) against the scalar rules
// they replace: fp8 and int8 codes bit for bit, and each step against a per-element loop in
// float, in fp32 and bf16, with strides, odd sizes, one thread and two.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu_elementwise.hpp"
#include "backends/cpu_vector.hpp"
#include "backends/host_mat.hpp"
#include "fusebench/cost_model.hpp"
#include "fusebench/quant.hpp"

namespace fusebench {
namespace {

TEST(CpuElementwise, Fp8CodeIsTheHostsForEveryBf16AndSampledFloats) {
  std::size_t wrong = 0;
  std::uint32_t first = 0;
  const auto check = [&](std::uint32_t bits) {
    const float v = std::bit_cast<float>(bits);
    if (cpu::fp8_code(v) != fp8_e4m3fn_from_float(v) && wrong++ == 0) first = bits;
  };
  // Every bf16 value holds every fp8 tie (3 kept bits, then a 1 and zeros) and every binade.
  for (std::uint32_t b = 0; b < 0x10000u; ++b) check(b << 16);
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) check(rng());
  EXPECT_EQ(wrong, 0u) << "first at bits 0x" << std::hex << first;
}

TEST(CpuElementwise, DecodeIsTheHostsForEveryCode) {
  std::vector<std::uint8_t> codes(256 * 3);
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::uint8_t>(i % 256);
  for (QuantDType dtype : {QuantDType::fp8_e4m3fn, QuantDType::int8})
    for (int threads : {1, 2}) {
      // 3 rows of 200 codes, row stride 256: every code, strided.
      const QuantRef q{codes.data(), 3, 200, 256, nullptr, ScaleKind::tensor, dtype};
      std::vector<float> got(3 * 200);
      cpu::decode_codes(q, got.data(), threads);
      for (std::int64_t r = 0; r < 3; ++r)
        for (std::int64_t c = 0; c < 200; ++c) {
          const double want = decode_code(dtype, codes[static_cast<std::size_t>(r * 256 + c)]);
          const float g = got[static_cast<std::size_t>(r * 200 + c)];
          if (std::isnan(want))
            EXPECT_TRUE(std::isnan(g)) << "code " << r * 256 + c;
          else
            EXPECT_EQ(static_cast<double>(g), want) << "code " << (r * 256 + c) % 256;
        }
    }
}

TEST(CpuElementwise, Int8CodeIsTheHostsRounding) {
  std::vector<float> qs = {NAN, INFINITY, -INFINITY, 127.5f, -127.5f, 1e9f, -0.0f};
  for (int h = -300; h <= 300; ++h) qs.push_back(static_cast<float>(h) * 0.5f);  // the ties
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-140.0f, 140.0f);
  for (int i = 0; i < 100000; ++i) qs.push_back(u(rng));
  for (float q : qs)
    ASSERT_EQ(static_cast<std::int8_t>(cpu::int8_code(q)), int8_from_double(q)) << "q " << q;
}

// A [rows, cols] matrix of dtype with row stride ld >= cols, random values in [-4, 4).
struct Mat {
  std::vector<std::byte> bytes;
  MatRef ref;
  Mat(DType dtype, std::int64_t rows, std::int64_t cols, std::int64_t ld, std::uint32_t seed)
      : bytes(static_cast<std::size_t>(rows * ld) * dtype_size(dtype)),
        ref{bytes.data(), dtype, rows, cols, ld} {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-4.0f, 4.0f);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < ld; ++c)
        store({bytes.data(), dtype, rows, ld, ld}, r, c, u(rng));
  }
};

// got and want agree to fp32's rounding of the activations (1e-5 relative), or within `steps`
// rounding steps of bf16 where the outputs are bf16 (2 where a kernel chain rounds twice).
// `floor`, where given: a magnitude per element below which the error is absolute (an
// activation's approximations err by up to 1e-6 of |gate * up|, where 1 + erf cancels).
void expect_near(const MatRef& got, const MatRef& want, const std::string& what, int steps = 1,
                 const std::vector<float>* floor = nullptr) {
  const float tol = got.dtype == DType::bf16 ? static_cast<float>(steps) / 128 : 1e-5f;
  for (std::int64_t r = 0; r < got.rows; ++r)
    for (std::int64_t c = 0; c < got.cols; ++c) {
      const float g = load(got, r, c), w = load(want, r, c);
      const float f = floor ? 0.1f * (*floor)[static_cast<std::size_t>(r * got.cols + c)] : 0.0f;
      ASSERT_LE(std::fabs(g - w), tol * (std::fabs(w) + f + 1e-3f))
          << what << " at (" << r << ", " << c << "): " << g << " vs " << w;
    }
}

struct Shape {
  std::int64_t rows, cols;
};
constexpr Shape kShapes[] = {{1, 5000}, {3, 1000}, {40, 300}, {17, 2049}};

TEST(CpuElementwise, ActAndMulMatchesTheScalarRule) {
  for (DType dtype : {DType::f32, DType::bf16})
    for (Activation act :
         {Activation::silu, Activation::gelu_tanh, Activation::gelu, Activation::swigluoai})
      for (const Shape s : kShapes)
        for (std::int64_t stride : {1, 2})
          for (int threads : {1, 2}) {
            // Gate and up interleaved (stride 2, gpt-oss) or as two halves of one row.
            Mat gu(dtype, s.rows, 2 * s.cols * stride, 2 * s.cols * stride, 11);
            const std::int64_t up_at = stride == 2 ? 1 : s.cols;
            const MatRef gate{gu.ref.data, dtype, s.rows, s.cols, gu.ref.ld};
            const MatRef up{cpu::element(gu.ref, 0, up_at), dtype, s.rows, s.cols, gu.ref.ld};
            Mat got(dtype, s.rows, s.cols, s.cols + 3, 1), want(dtype, s.rows, s.cols, s.cols, 2);
            const ActAndMulArgs a{gate, up, got.ref, act, 7.0, stride};
            cpu::act_and_mul(a, threads);
            std::vector<float> floor(static_cast<std::size_t>(s.rows * s.cols));
            for (std::int64_t r = 0; r < s.rows; ++r)
              for (std::int64_t c = 0; c < s.cols; ++c) {
                const double g = load(gate, r, c * stride), u = load(up, r, c * stride);
                double v = 0;
                if (act == Activation::silu) v = g / (1 + std::exp(-g)) * u;
                if (act == Activation::gelu_tanh)
                  v = 0.5 * g * (1 + std::tanh(0.7978845608 * (g + 0.044715 * g * g * g))) * u;
                if (act == Activation::gelu) v = 0.5 * g * (1 + std::erf(g * 0.70710678)) * u;
                if (act == Activation::swigluoai) {
                  const double gc = std::min(g, 7.0), uc = std::clamp(u, -7.0, 7.0);
                  v = (uc + 1) * gc / (1 + std::exp(-kSwigluOaiAlpha * gc));
                }
                store(want.ref, r, c, static_cast<float>(v));
                floor[static_cast<std::size_t>(r * s.cols + c)] =
                    static_cast<float>(std::fabs(g * u));
              }
            expect_near(got.ref, want.ref,
                        std::string(to_string(dtype)) + " act " +
                            std::to_string(static_cast<int>(act)) + " " + std::to_string(s.rows) +
                            "x" + std::to_string(s.cols) + " stride " + std::to_string(stride) +
                            " threads " + std::to_string(threads),
                        1, &floor);
          }
}

TEST(CpuElementwise, GatherScatterBiasGateNormMatchTheScalarRules) {
  for (DType dtype : {DType::f32, DType::bf16})
    for (const Shape s : kShapes)
      for (int threads : {1, 2}) {
        const std::string what = std::string(to_string(dtype)) + " " + std::to_string(s.rows) +
                                 "x" + std::to_string(s.cols) + " threads " +
                                 std::to_string(threads);
        Mat src(dtype, s.rows, s.cols, s.cols + 5, 3);
        // Gather: rows in a shuffled order, one of them padding (-1), scaled.
        const std::int64_t n = s.rows + 1;
        std::vector<std::int64_t> rows(static_cast<std::size_t>(n));
        std::vector<float> scale(rows.size());
        for (std::int64_t i = 0; i < n; ++i) {
          rows[i] = i == 1 ? -1 : (i * 7) % s.rows;
          scale[i] = 0.25f + 0.5f * static_cast<float>(i % 3);
        }
        Mat got(dtype, n, s.cols, s.cols, 4), want(dtype, n, s.cols, s.cols, 5);
        cpu::gather_scaled(src.ref, got.ref, rows, scale, threads);
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t c = 0; c < s.cols; ++c)
            store(want.ref, i, c, rows[i] < 0 ? 0.0f : scale[i] * load(src.ref, rows[i], c));
        expect_near(got.ref, want.ref, "gather " + what);
        // Scatter-add back: two gathered rows land on one row (7i mod rows repeats).
        Mat dst(dtype, s.rows, s.cols, s.cols, 6), dst_want(dtype, s.rows, s.cols, s.cols, 6);
        cpu::scatter_add(got.ref, dst.ref, rows, scale, false, threads);
        // A sum that cancels is judged against its terms' size (the kernel may fuse w * s + d).
        std::vector<float> terms(static_cast<std::size_t>(s.rows * s.cols));
        for (std::int64_t r = 0; r < s.rows; ++r)
          for (std::int64_t c = 0; c < s.cols; ++c)
            terms[static_cast<std::size_t>(r * s.cols + c)] = 10 * std::fabs(load(dst.ref, r, c));
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t c = 0; c < s.cols; ++c)
            if (rows[i] >= 0) {
              store(dst_want.ref, rows[i], c,
                    load(dst_want.ref, rows[i], c) + scale[i] * load(got.ref, i, c));
              terms[static_cast<std::size_t>(rows[i] * s.cols + c)] +=
                  10 * std::fabs(scale[i] * load(got.ref, i, c));
            }
        expect_near(dst.ref, dst_want.ref, "scatter " + what, 2, &terms);
        // Bias, the sigmoid gate and RMSNorm on src.
        Mat bias(dtype, s.cols, 1, 2, 7), gate(dtype, s.rows, 1, 1, 8),
            weight(dtype, 1, s.cols, s.cols, 9);
        Mat y(dtype, s.rows, s.cols, s.cols + 5, 3), y_want(dtype, s.rows, s.cols, s.cols + 5, 3);
        cpu::add_bias(y.ref, bias.ref, threads);
        cpu::sigmoid_gate_rows(y.ref, gate.ref, threads);
        Mat norm(dtype, s.rows, s.cols, s.cols, 10), norm_want(dtype, s.rows, s.cols, s.cols, 10);
        cpu::rms_norm(y.ref, weight.ref, norm.ref, 1e-6f, threads);
        for (std::int64_t r = 0; r < s.rows; ++r) {
          const float g = 1.0f / (1.0f + std::exp(-load(gate.ref, r, 0)));
          for (std::int64_t c = 0; c < s.cols; ++c)
            store(y_want.ref, r, c, g * (load(y_want.ref, r, c) + load(bias.ref, c, 0)));
          double sum = 0;
          for (std::int64_t c = 0; c < s.cols; ++c)
            sum += static_cast<double>(load(y_want.ref, r, c)) * load(y_want.ref, r, c);
          const double inv = 1.0 / std::sqrt(sum / static_cast<double>(s.cols) + 1e-6);
          for (std::int64_t c = 0; c < s.cols; ++c)
            store(norm_want.ref, r, c,
                  static_cast<float>(load(y_want.ref, r, c) * inv * load(weight.ref, 0, c)));
        }
        expect_near(y.ref, y_want.ref, "bias and gate " + what, 2);
        expect_near(norm.ref, norm_want.ref, "rms_norm " + what, 3);
      }
}

TEST(CpuElementwise, SaysWhichInstructionSetRan) {
  const std::string isa = cpu::elementwise_isa();
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    EXPECT_EQ(isa, "avx512");
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    EXPECT_EQ(isa, "avx2");
  else
    EXPECT_EQ(isa, "x86-64");
}

}  // namespace
}  // namespace fusebench

namespace fusebench {
namespace {

// The threaded epilogue after a library's int32 products is the kernel's own per-tile epilogue
// (apply_int8_epilogue), bit for bit: into bf16, into fp32, accumulating into fp32.
TEST(CpuElementwise, Int8EpilogueIsTheKernelsEpilogue) {
  const std::int64_t m = 37, n = 2100;
  std::mt19937 rng(5);
  std::uniform_int_distribution<std::int32_t> acc(-2000000, 2000000);
  std::uniform_real_distribution<float> sc(1e-4f, 1e-2f);
  std::vector<std::int32_t> y(static_cast<std::size_t>(m * n));
  for (auto& v : y) v = acc(rng);
  std::vector<float> rs(static_cast<std::size_t>(m)), cs(static_cast<std::size_t>(n));
  for (auto& v : rs) v = sc(rng);
  for (auto& v : cs) v = sc(rng);
  for (int threads : {1, 2}) {
    std::vector<std::uint16_t> got16(static_cast<std::size_t>(m * (n + 4))), want16(got16.size());
    cpu::Int8Epilogue e{rs.data(), cs.data(), nullptr, false, got16.data(), n + 4};
    cpu::int8_epilogue(e, y.data(), m, n, threads);
    e.out_bf16 = want16.data();
    cpu::apply_int8_epilogue(e, y.data(), n, 0, m, 0, n);
    EXPECT_EQ(got16, want16) << "bf16, threads " << threads;
    for (bool accumulate : {false, true}) {
      std::vector<float> got(static_cast<std::size_t>(m * n), 1.5f), want(got);
      cpu::Int8Epilogue f{rs.data(), cs.data(), got.data(), accumulate};
      cpu::int8_epilogue(f, y.data(), m, n, threads);
      f.out = want.data();
      cpu::apply_int8_epilogue(f, y.data(), n, 0, m, 0, n);
      for (std::size_t i = 0; i < got.size(); ++i)  // an add may be fused (FMA) in one of them
        ASSERT_NEAR(got[i], want[i], 1e-6f * (std::fabs(want[i]) + 1.5f))
            << "accumulate " << accumulate << " threads " << threads << " at " << i;
    }
  }
}

}  // namespace
}  // namespace fusebench
