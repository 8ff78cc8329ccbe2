// The CPU GEMM paths and the rule that picks one (src/backends/cpu_gemm.hpp): every path this
// build has agrees with a float64 reference on odd and strided shapes, with and without a bias,
// and the rule sends what it says where it says (one-row fp32 products to sgemv).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>

#include "backends/cpu_gemm.hpp"
#include "backends/cpu_memory.hpp"
#include "backends/host_mat.hpp"
#include "fusebench/verify.hpp"

using namespace fusebench;
using cpu::GemmPath;

namespace {

// A row-major matrix with a leading dimension wider than its columns (views of fused buffers).
struct HostMatrix {
  std::vector<std::byte> bytes;
  MatRef ref;
  HostMatrix(DType dtype, std::int64_t rows, std::int64_t cols, std::int64_t pad)
      : bytes(static_cast<std::size_t>(rows * (cols + pad)) * dtype_size(dtype)),
        ref{bytes.data(), dtype, rows, cols, cols + pad} {}
};

HostMatrix random_matrix(DType dtype, std::int64_t rows, std::int64_t cols, std::int64_t pad,
                         unsigned seed, float scale) {
  HostMatrix m(dtype, rows, cols, pad);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) store(m.ref, r, c, u(rng) * scale);
  }
  return m;
}

// float64 x w^T of the stored (already rounded) operands.
std::vector<double> reference(const MatRef& x, const MatRef& w) {
  std::vector<double> y(static_cast<std::size_t>(x.rows * w.rows));
  for (std::int64_t r = 0; r < x.rows; ++r) {
    for (std::int64_t n = 0; n < w.rows; ++n) {
      double acc = 0;
      for (std::int64_t k = 0; k < x.cols; ++k) acc += double(load(x, r, k)) * load(w, n, k);
      y[static_cast<std::size_t>(r * w.rows + n)] = acc;
    }
  }
  return y;
}

// Mismatches of y against the reference under the dtype's documented tolerance.
int mismatches(const MatRef& y, const std::vector<double>& want) {
  const Tolerance tol = tolerance_for(y.dtype);
  int bad = 0;
  for (std::int64_t r = 0; r < y.rows; ++r) {
    for (std::int64_t c = 0; c < y.cols; ++c) {
      const double w = want[static_cast<std::size_t>(r * y.cols + c)];
      if (std::abs(double(load(y, r, c)) - w) > tol.atol + tol.rtol * std::abs(w)) ++bad;
    }
  }
  return bad;
}

std::vector<GemmPath> paths_for(const cpu::CpuGemm& gemm, DType dtype, std::int64_t m) {
  std::vector<GemmPath> out;
  if (dtype == DType::f32) {
    if (m == 1) out.push_back(GemmPath::blas_gemv);
    out.push_back(GemmPath::blas_gemm);
  } else {
    out.push_back(GemmPath::widened_sgemm);
#ifdef FUSEBENCH_TEST_HAVE_SBGEMM
    out.push_back(GemmPath::blas_sbgemm);
#endif
  }
  if (gemm.dnnl_takes(dtype)) {
    if (dtype == DType::f32) out.push_back(GemmPath::dnnl_sgemm);
    out.push_back(GemmPath::dnnl_matmul);
  }
  return out;
}

}  // namespace

TEST(CpuGemmDispatch, OneRowFp32GoesToGemvFewRowsToOneDnnSgemmElseMatmul) {
  EXPECT_EQ(cpu::choose_path(DType::f32, 1, true), GemmPath::blas_gemv);
  EXPECT_EQ(cpu::choose_path(DType::f32, 1, false), GemmPath::blas_gemv);
  for (std::int64_t m : {2, 3})
    EXPECT_EQ(cpu::choose_path(DType::f32, m, true), GemmPath::dnnl_sgemm);
  for (std::int64_t m : {4, 64, 1024})
    EXPECT_EQ(cpu::choose_path(DType::f32, m, true), GemmPath::dnnl_matmul) << m;
  for (std::int64_t m : {2, 3, 4, 1024})
    EXPECT_EQ(cpu::choose_path(DType::f32, m, false), GemmPath::blas_gemm) << m;
  for (std::int64_t m : {1, 2, 64}) {
    EXPECT_EQ(cpu::choose_path(DType::bf16, m, true), GemmPath::dnnl_matmul) << m;
    const GemmPath fallback = cpu::choose_path(DType::bf16, m, false);
    EXPECT_TRUE(fallback == GemmPath::widened_sgemm || fallback == GemmPath::blas_sbgemm);
  }
}

TEST(CpuGemmDispatch, RunTakesTheRulesPathAndTheBackendLogsIt) {
  cpu::CpuGemm gemm;
  auto backend = make_cpu_backend();
  for (std::int64_t m : {1, 3, 5}) {
    HostMatrix x = random_matrix(DType::f32, m, 64, 0, 1, 1.0f);
    HostMatrix w = random_matrix(DType::f32, 40, 64, 0, 2, 0.125f);
    HostMatrix y(DType::f32, m, 40, 0);
    const GemmArgs args{x.ref, w.ref, y.ref};
    const GemmPath want = cpu::choose_path(DType::f32, m, gemm.dnnl_takes(DType::f32));
    EXPECT_EQ(gemm.run(args), want);
    backend->take_algorithm_log();
    backend->gemm(args);
    const auto log = backend->take_algorithm_log();
    ASSERT_EQ(log.size(), 1u);
    EXPECT_EQ(log[0].rfind(cpu::to_string(want), 0), 0u) << log[0];
  }
}

TEST(CpuGemmPaths, OneRowGemvEqualsGemmWithinFp32Tolerance) {
  cpu::CpuGemm gemm;
  // qwen3-0.6b's fused qkv shape, one token.
  HostMatrix x = random_matrix(DType::f32, 1, 1024, 0, 3, 1.0f);
  HostMatrix w = random_matrix(DType::f32, 4096, 1024, 0, 4, 1.0f / 32);
  HostMatrix by_gemv(DType::f32, 1, 4096, 0), by_gemm(DType::f32, 1, 4096, 0);
  gemm.run_path(GemmPath::blas_gemv, {x.ref, w.ref, by_gemv.ref});
  gemm.run_path(GemmPath::blas_gemm, {x.ref, w.ref, by_gemm.ref});
  std::vector<double> gemm_result(4096);
  for (std::int64_t c = 0; c < 4096; ++c)
    gemm_result[static_cast<std::size_t>(c)] = load(by_gemm.ref, 0, c);
  EXPECT_EQ(mismatches(by_gemv.ref, gemm_result), 0);
  EXPECT_EQ(mismatches(by_gemv.ref, reference(x.ref, w.ref)), 0);
}

TEST(CpuGemmPaths, EveryPathMatchesFloat64OnOddStridedShapes) {
  cpu::CpuGemm gemm;
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (std::int64_t m : {1, 2, 3, 7, 33}) {
      const std::int64_t n = 97, k = 131;
      HostMatrix x = random_matrix(dtype, m, k, 5, 10 + static_cast<unsigned>(m), 1.0f);
      HostMatrix w = random_matrix(dtype, n, k, 3, 20 + static_cast<unsigned>(m), 0.1f);
      const auto want = reference(x.ref, w.ref);
      for (GemmPath path : paths_for(gemm, dtype, m)) {
        HostMatrix y(dtype, m, n, 7);
        gemm.run_path(path, {x.ref, w.ref, y.ref});
        EXPECT_EQ(mismatches(y.ref, want), 0)
            << cpu::to_string(path) << " " << to_string(dtype) << " m=" << m;
      }
    }
  }
}

// A bias (an [N, 1] MatRef, as the plans hold it) is added inside every path's own call, once,
// onto each row: the output is first filled with a value the result would show.
TEST(CpuGemmPaths, EveryPathAddsTheBiasOnceMatchingFloat64) {
  cpu::CpuGemm gemm;
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (std::int64_t m : {1, 2, 3, 7, 33}) {
      const std::int64_t n = 97, k = 131;
      HostMatrix x = random_matrix(dtype, m, k, 5, 30 + static_cast<unsigned>(m), 1.0f);
      HostMatrix w = random_matrix(dtype, n, k, 3, 40 + static_cast<unsigned>(m), 0.1f);
      HostMatrix bias = random_matrix(dtype, n, 1, 0, 50 + static_cast<unsigned>(m), 1.0f);
      auto want = reference(x.ref, w.ref);
      for (std::int64_t r = 0; r < m; ++r) {
        for (std::int64_t c = 0; c < n; ++c)
          want[static_cast<std::size_t>(r * n + c)] += load(bias.ref, c, 0);
      }
      for (GemmPath path : paths_for(gemm, dtype, m)) {
        HostMatrix y(dtype, m, n, 7);
        for (std::int64_t r = 0; r < m; ++r) {
          for (std::int64_t c = 0; c < n; ++c) store(y.ref, r, c, 1e4f);  // not accumulated onto
        }
        gemm.run_path(path, {x.ref, w.ref, y.ref, bias.ref});
        EXPECT_EQ(mismatches(y.ref, want), 0)
            << cpu::to_string(path) << " " << to_string(dtype) << " m=" << m;
      }
    }
  }
  // A bias that does not fit the output is refused, not read out of bounds.
  HostMatrix x = random_matrix(DType::f32, 2, 8, 0, 1, 1.0f);
  HostMatrix w = random_matrix(DType::f32, 4, 8, 0, 2, 1.0f);
  HostMatrix short_bias = random_matrix(DType::f32, 3, 1, 0, 3, 1.0f);
  HostMatrix y(DType::f32, 2, 4, 0);
  EXPECT_THROW(gemm.run({x.ref, w.ref, y.ref, short_bias.ref}), std::invalid_argument);
}

// On the backend a GEMM with a bias is one library call (launches == model_launches on the CPU),
// and gemm_algorithms says the bias was in it.
TEST(CpuGemmPaths, ABiasedGemmIsOneLibraryCall) {
  auto backend = make_cpu_backend();
  for (std::int64_t m : {1, 3, 5}) {
    HostMatrix x = random_matrix(DType::f32, m, 64, 0, 1, 1.0f);
    HostMatrix w = random_matrix(DType::f32, 40, 64, 0, 2, 0.125f);
    HostMatrix bias = random_matrix(DType::f32, 40, 1, 0, 3, 1.0f);
    HostMatrix y(DType::f32, m, 40, 0);
    backend->take_algorithm_log();
    const std::int64_t before = backend->library_calls();
    backend->gemm({x.ref, w.ref, y.ref, bias.ref});
    EXPECT_EQ(backend->library_calls(), before + 1) << m;
    const auto log = backend->take_algorithm_log();
    ASSERT_EQ(log.size(), 1u);
    EXPECT_NE(log[0].find("+bias"), std::string::npos) << log[0];
  }
}

TEST(CpuGemmPaths, PathsRefuseWhatTheyCannotRun) {
  cpu::CpuGemm gemm;
  HostMatrix x = random_matrix(DType::f32, 2, 8, 0, 1, 1.0f);
  HostMatrix w = random_matrix(DType::f32, 4, 8, 0, 2, 1.0f);
  HostMatrix y(DType::f32, 2, 4, 0);
  EXPECT_THROW(gemm.run_path(GemmPath::blas_gemv, {x.ref, w.ref, y.ref}), std::invalid_argument);
  EXPECT_THROW(gemm.run_path(GemmPath::widened_sgemm, {x.ref, w.ref, y.ref}),
               std::invalid_argument);
  if (!cpu::dnnl_built()) {
    for (GemmPath p : {GemmPath::dnnl_sgemm, GemmPath::dnnl_matmul})
      EXPECT_THROW(gemm.run_path(p, {x.ref, w.ref, y.ref}), std::invalid_argument);
  }
}

TEST(CpuGemmContext, NamesTheLibrariesThreadsAndRule) {
  const nlohmann::json j = cpu::CpuGemm().context();
  EXPECT_TRUE(j["openblas"].contains("threading"));
  EXPECT_TRUE(j["openblas"].contains("threads"));
  EXPECT_EQ(j["dispatch"]["fp32_m1"], "openblas_sgemv");
  EXPECT_EQ(cpu::CpuGemm().dnnl_takes(DType::f32), cpu::dnnl_built());
  if (cpu::dnnl_built()) {
    EXPECT_TRUE(j["onednn"].contains("version"));
    EXPECT_EQ(j["dispatch"]["fp32_m2_m3"], "onednn_sgemm");
    EXPECT_EQ(j["dispatch"]["fp32_m_ge_4"], "onednn_matmul");
  } else {
    EXPECT_TRUE(j["onednn"].is_string());
  }
}

TEST(CpuMemory, LargeBuffersAreHugePageAlignedSmallOnesCacheLineAligned) {
  // The huge-page advice itself is the kernel's to honour; the alignment that lets it is ours.
  for (std::size_t bytes : {std::size_t{100}, std::size_t{4} << 20, (std::size_t{9} << 20) + 3}) {
    void* p = cpu::allocate_host(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    EXPECT_EQ(addr % (bytes >= cpu::kHugePageThreshold ? cpu::kHugePageBytes : 64), 0u) << bytes;
    std::memset(p, 1, bytes);  // the whole size is usable (ASan checks the bounds)
    std::free(p);
  }
}

// TP ranks sharing the machine split its cores (CpuGemm::set_threads): the libraries run with
// the count asked for from the next call on, give the defaults back at 0, and compute the same
// result either way (oneDNN primitives are cached per thread count).
TEST(CpuGemmThreads, SetThreadsAppliesOnTheNextCallAndZeroRestoresTheDefaults) {
  cpu::CpuGemm gemm;
  const int defaults = gemm.context()["openblas"]["threads"].get<int>();
  HostMatrix x = random_matrix(DType::f32, 8, 64, 0, 5, 1.0f);
  HostMatrix w = random_matrix(DType::f32, 48, 64, 0, 6, 0.125f);
  HostMatrix y_default(DType::f32, 8, 48, 0), y_one(DType::f32, 8, 48, 0);
  gemm.run({x.ref, w.ref, y_default.ref});
  gemm.set_threads(1);
  EXPECT_EQ(gemm.threads(), 1);
  gemm.run({x.ref, w.ref, y_one.ref});
  EXPECT_EQ(gemm.context()["openblas"]["threads"].get<int>(), 1);
  const float* a = static_cast<const float*>(y_default.ref.data);
  const float* b = static_cast<const float*>(y_one.ref.data);
  for (std::int64_t i = 0; i < 8 * 48; ++i) EXPECT_NEAR(a[i], b[i], 1e-5f * (1 + std::abs(a[i])));
  gemm.set_threads(0);
  gemm.run({x.ref, w.ref, y_one.ref});
  EXPECT_EQ(gemm.context()["openblas"]["threads"].get<int>(), defaults);
  EXPECT_THROW(gemm.set_threads(-1), std::invalid_argument);
}
