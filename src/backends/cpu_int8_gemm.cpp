#include "cpu_int8_gemm.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define FUSEBENCH_X86 1
#endif

namespace fusebench::cpu {

namespace {

constexpr int kPanel = 16;        // columns of a packed weight panel: two ymm of 8 int32 sums
constexpr int kRows = 6;          // rows of x per micro-kernel call: 12 accumulators in registers
constexpr int kBlockPairs = 256;  // K pairs per packed block: 16 KiB of panel, in L1
constexpr int kGroup = 4;         // panels packed together, each x tile reused across them

#ifdef FUSEBENCH_X86

// The panel's block for K pairs [p0, p0 + pairs): for each pair, 16 columns of two int16 codes
// (the column's k = 2p and 2p + 1), columns past n and codes past k zero.
void pack_panel(const std::int8_t* w, std::int64_t ldw, std::int64_t n0, std::int64_t n,
                std::int64_t k, std::int64_t p0, int pairs, std::int16_t* out) {
  const int cols = static_cast<int>(std::min<std::int64_t>(kPanel, n - n0));
  // Whole pairs of this block (the last pair of an odd K has one code, the other zero).
  const int whole = static_cast<int>(std::clamp<std::int64_t>(k / 2 - p0, 0, pairs));
  for (int c = 0; c < kPanel; ++c) {
    std::int16_t* dst = out + 2 * c;
    if (c >= cols) {
      for (int p = 0; p < pairs; ++p) dst[p * 2 * kPanel] = dst[p * 2 * kPanel + 1] = 0;
      continue;
    }
    // One column (a row of w) at a time: its codes are read in order.
    const std::int8_t* row = w + (n0 + c) * ldw + 2 * p0;
    for (int p = 0; p < whole; ++p) {
      dst[p * 2 * kPanel] = row[2 * p];
      dst[p * 2 * kPanel + 1] = row[2 * p + 1];
    }
    for (int p = whole; p < pairs; ++p) {
      dst[p * 2 * kPanel] = 2 * (p0 + p) < k ? row[2 * p] : 0;
      dst[p * 2 * kPanel + 1] = 0;
    }
  }
}

// A 6 x 16 tile of y (+)= 6 rows of x16 . panel: acc += (x pair broadcast) vpmaddwd (16
// columns' pairs), every product and pair sum exact in int32. Twelve named accumulators, so
// that they stay in registers (an array of them was spilled on every step).
// (Macros, not lambdas: a lambda does not inherit the function's target("avx2").)
#define FB_LOAD(r, half)                                                                       \
  (accumulate ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + (r)*ldy + 8 * (half))) \
              : _mm256_setzero_si256())
#define FB_ROW(r, lo, hi)                                \
  do {                                                   \
    std::int32_t v;                                      \
    std::memcpy(&v, x0 + (r)*ldx16, sizeof(v));          \
    const __m256i a = _mm256_set1_epi32(v);              \
    lo = _mm256_add_epi32(lo, _mm256_madd_epi16(a, b0)); \
    hi = _mm256_add_epi32(hi, _mm256_madd_epi16(a, b1)); \
  } while (0)
#define FB_STORE(r, half, v) \
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + (r)*ldy + 8 * (half)), v)

__attribute__((target("avx2"))) void micro_kernel(const std::int16_t* x16, std::int64_t ldx16,
                                                  const std::int16_t* panel, int pairs,
                                                  std::int32_t* y, std::int64_t ldy,
                                                  bool accumulate) {
  __m256i c00 = FB_LOAD(0, 0), c01 = FB_LOAD(0, 1), c10 = FB_LOAD(1, 0), c11 = FB_LOAD(1, 1);
  __m256i c20 = FB_LOAD(2, 0), c21 = FB_LOAD(2, 1), c30 = FB_LOAD(3, 0), c31 = FB_LOAD(3, 1);
  __m256i c40 = FB_LOAD(4, 0), c41 = FB_LOAD(4, 1), c50 = FB_LOAD(5, 0), c51 = FB_LOAD(5, 1);
  const std::int16_t* x0 = x16;
  for (int p = 0; p < pairs; ++p, x0 += 2) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + p * 32));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + p * 32 + 16));
    FB_ROW(0, c00, c01);
    FB_ROW(1, c10, c11);
    FB_ROW(2, c20, c21);
    FB_ROW(3, c30, c31);
    FB_ROW(4, c40, c41);
    FB_ROW(5, c50, c51);
  }
  FB_STORE(0, 0, c00), FB_STORE(0, 1, c01), FB_STORE(1, 0, c10), FB_STORE(1, 1, c11);
  FB_STORE(2, 0, c20), FB_STORE(2, 1, c21), FB_STORE(3, 0, c30), FB_STORE(3, 1, c31);
  FB_STORE(4, 0, c40), FB_STORE(4, 1, c41), FB_STORE(5, 0, c50), FB_STORE(5, 1, c51);
}
#undef FB_LOAD
#undef FB_ROW
#undef FB_STORE

// Rows [i, i + rows) x the panel's `cols` columns of y: a whole tile in place, a ragged one
// (fewer rows or columns) through a 6 x 16 copy (x16 has rows to a multiple of 6, zero past m).
void tile(int rows, int cols, const std::int16_t* x16, std::int64_t ldx16,
          const std::int16_t* panel, int pairs, std::int32_t* y, std::int64_t ldy,
          bool accumulate) {
  if (rows == kRows && cols == kPanel)
    return micro_kernel(x16, ldx16, panel, pairs, y, ldy, accumulate);
  alignas(32) std::int32_t edge[kRows * kPanel] = {};
  if (accumulate)
    for (int r = 0; r < rows; ++r)
      std::memcpy(edge + r * kPanel, y + r * ldy, static_cast<std::size_t>(cols) * 4);
  micro_kernel(x16, ldx16, panel, pairs, edge, kPanel, accumulate);
  for (int r = 0; r < rows; ++r)
    std::memcpy(y + r * ldy, edge + r * kPanel, static_cast<std::size_t>(cols) * 4);
}

#endif  // FUSEBENCH_X86

}  // namespace

void apply_int8_epilogue(const Int8Epilogue& e, const std::int32_t* y, std::int64_t n,
                         std::int64_t i0, std::int64_t rows, std::int64_t n0, std::int64_t cols) {
  for (std::int64_t i = i0; i < i0 + rows; ++i) {
    const std::int32_t* src = y + i * n + n0;
    float* dst = e.out + i * n + n0;
    const float* cs = e.col_scale + n0;
    const float rs = e.row_scale[i];
    if (e.accumulate) {
      for (std::int64_t j = 0; j < cols; ++j) dst[j] += static_cast<float>(src[j]) * (rs * cs[j]);
    } else {
      for (std::int64_t j = 0; j < cols; ++j) dst[j] = static_cast<float>(src[j]) * (rs * cs[j]);
    }
  }
}

bool int8_avx2_available() {
#ifdef FUSEBENCH_X86
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

void int8_gemm_avx2(const std::int8_t* x, std::int64_t ldx, const std::int8_t* w, std::int64_t ldw,
                    std::int32_t* y, std::int64_t m, std::int64_t n, std::int64_t k, int threads,
                    const Int8Epilogue* epilogue) {
  if (!int8_avx2_available()) throw std::invalid_argument("int8_gemm_avx2: this CPU has no AVX2");
  if (k > kInt8AvxMaxK)
    throw std::invalid_argument("int8_gemm_avx2: K = " + std::to_string(k) +
                                " is over the int32-exact limit " + std::to_string(kInt8AvxMaxK));
#ifdef FUSEBENCH_X86
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (std::int64_t i = 0; i < m; ++i) std::fill(y + i * n, y + (i + 1) * n, 0);
    return;
  }
  const std::int64_t pairs = (k + 1) / 2, ldx16 = 2 * pairs;
  const std::int64_t panels = (n + kPanel - 1) / kPanel;
  const std::int64_t groups = (panels + kGroup - 1) / kGroup;
  // x widened once per call (zero past k and in the rows past m), shared read-only by the
  // threads; sized here, filled by them.
  thread_local std::vector<std::int16_t> x16;
  const std::int64_t padded_rows = (m + kRows - 1) / kRows * kRows;
  x16.assign(static_cast<std::size_t>(padded_rows * ldx16), 0);
  std::int16_t* xs = x16.data();
  [[maybe_unused]] const int team = static_cast<int>(std::clamp<std::int64_t>(threads, 1, groups));
#ifdef _OPENMP  // without OpenMP (a build that lacks it) everything runs on the calling thread
#pragma omp parallel num_threads(team) if (team > 1)
#endif
  {
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t c = 0; c < k; ++c) xs[i * ldx16 + c] = x[i * ldx + c];
    // (the loop's implicit barrier: every row is widened before any is read)
    const std::size_t panel_size = static_cast<std::size_t>(kBlockPairs) * 2 * kPanel;
    std::vector<std::int16_t> packed(kGroup * panel_size);
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (std::int64_t g = 0; g < groups; ++g) {
      // kGroup panels a K block: each 6-row tile of x is read from L1 once per panel of the
      // group, the group's panels (64 KiB) from L2.
      const std::int64_t first = g * kGroup, count = std::min<std::int64_t>(kGroup, panels - first);
      for (std::int64_t p0 = 0; p0 < pairs; p0 += kBlockPairs) {
        const int block = static_cast<int>(std::min<std::int64_t>(kBlockPairs, pairs - p0));
        for (std::int64_t q = 0; q < count; ++q)
          pack_panel(w, ldw, (first + q) * kPanel, n, k, p0, block, packed.data() + q * panel_size);
        for (std::int64_t i = 0; i < m; i += kRows) {
          const int rows = static_cast<int>(std::min<std::int64_t>(kRows, m - i));
          for (std::int64_t q = 0; q < count; ++q) {
            const std::int64_t n0 = (first + q) * kPanel;
            const int cols = static_cast<int>(std::min<std::int64_t>(kPanel, n - n0));
            tile(rows, cols, xs + i * ldx16 + 2 * p0, ldx16, packed.data() + q * panel_size, block,
                 y + i * n + n0, n, p0 > 0);
            if (epilogue != nullptr && p0 + kBlockPairs >= pairs)
              apply_int8_epilogue(*epilogue, y, n, i, rows, n0, cols);  // done, and in L1
          }
        }
      }
    }
  }
#else
  (void)x, (void)ldx, (void)w, (void)ldw, (void)y, (void)m, (void)n, (void)threads, (void)epilogue;
#endif
}

std::string int8_avx2_description() {
  return "fusebench's AVX2 int8 kernel (codes widened to int16, vpmaddwd pair sums in int32: "
         "exact; weight panels of 16 columns packed on every call, columns split over the "
         "threads, each finished tile scaled by them)";
}

}  // namespace fusebench::cpu
