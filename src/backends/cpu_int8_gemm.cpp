#include "cpu_int8_gemm.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "backends/cpu_vector.hpp"
#include "fusebench/dtype.hpp"

#if defined(__x86_64__)  // the kernel names ymm8-15: 64-bit mode only
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

// A 6 x 16 tile of y (+)= 6 rows of x16 . panel: for each K pair, acc += (x pair broadcast)
// vpmaddwd (16 columns' pairs), every product and pair sum exact in int32. In inline assembly
// because the register allocation is the kernel: 12 accumulators, 2 weight vectors, the
// broadcast and one product fill the 16 ymm registers exactly. GCC's intrinsics version kept
// half the accumulators on the stack, at 0.55x this speed (46 against 80 G multiply-adds a
// second a core in L1, measured on the AMD EPYC of reports/2026-12-03-cpu-int8).
// clang-format off
#define FB_ROW(addr, lo, hi)                   \
  "vpbroadcastd " addr ", %%ymm14\n\t"         \
  "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"     \
  "vpaddd %%ymm15, %%" lo ", %%" lo "\n\t"     \
  "vpmaddwd %%ymm13, %%ymm14, %%ymm15\n\t"     \
  "vpaddd %%ymm15, %%" hi ", %%" hi "\n\t"
#define FB_LOAD(addr, lo, hi)                  \
  "vmovdqu " addr ", %%" lo "\n\t"             \
  "vmovdqu 32" addr ", %%" hi "\n\t"
#define FB_STORE(addr, lo, hi)                 \
  "vmovdqu %%" lo ", " addr "\n\t"             \
  "vmovdqu %%" hi ", 32" addr "\n\t"
// clang-format on

__attribute__((target("avx2"))) void micro_kernel(const std::int16_t* x16, std::int64_t ldx16,
                                                  const std::int16_t* panel, int pairs,
                                                  std::int32_t* y, std::int64_t ldy,
                                                  bool accumulate) {
  if (pairs <= 0) return;
  const std::int16_t* x3 = x16 + 3 * ldx16;  // rows 3..5 off a second base: scales go to 2
  std::int32_t* y3 = y + 3 * ldy;
  const std::int64_t x_bytes = ldx16 * 2, y_bytes = ldy * 4;
  std::int64_t left = pairs;
  const std::int64_t load = accumulate ? 1 : 0;
  asm volatile(
      "test %[load], %[load]\n\t"
      "jz 2f\n\t"                                    //
      FB_LOAD("(%[y0])", "ymm0", "ymm1")             //
      FB_LOAD("(%[y0],%[ly],1)", "ymm2", "ymm3")     //
      FB_LOAD("(%[y0],%[ly],2)", "ymm4", "ymm5")     //
      FB_LOAD("(%[y3])", "ymm6", "ymm7")             //
      FB_LOAD("(%[y3],%[ly],1)", "ymm8", "ymm9")     //
      FB_LOAD("(%[y3],%[ly],2)", "ymm10", "ymm11")   //
      "jmp 3f\n"                                     //
      "2:\n\t"                                       //
      "vpxor %%ymm0, %%ymm0, %%ymm0\n\t"             //
      "vpxor %%ymm1, %%ymm1, %%ymm1\n\t"             //
      "vpxor %%ymm2, %%ymm2, %%ymm2\n\t"             //
      "vpxor %%ymm3, %%ymm3, %%ymm3\n\t"             //
      "vpxor %%ymm4, %%ymm4, %%ymm4\n\t"             //
      "vpxor %%ymm5, %%ymm5, %%ymm5\n\t"             //
      "vpxor %%ymm6, %%ymm6, %%ymm6\n\t"             //
      "vpxor %%ymm7, %%ymm7, %%ymm7\n\t"             //
      "vpxor %%ymm8, %%ymm8, %%ymm8\n\t"             //
      "vpxor %%ymm9, %%ymm9, %%ymm9\n\t"             //
      "vpxor %%ymm10, %%ymm10, %%ymm10\n\t"          //
      "vpxor %%ymm11, %%ymm11, %%ymm11\n"            //
      "3:\n\t"                                       //
      "vmovdqu (%[w]), %%ymm12\n\t"                  //
      "vmovdqu 32(%[w]), %%ymm13\n\t"                //
      FB_ROW("(%[x0])", "ymm0", "ymm1")              //
      FB_ROW("(%[x0],%[lx],1)", "ymm2", "ymm3")      //
      FB_ROW("(%[x0],%[lx],2)", "ymm4", "ymm5")      //
      FB_ROW("(%[x3])", "ymm6", "ymm7")              //
      FB_ROW("(%[x3],%[lx],1)", "ymm8", "ymm9")      //
      FB_ROW("(%[x3],%[lx],2)", "ymm10", "ymm11")    //
      "add $4, %[x0]\n\t"                            //
      "add $4, %[x3]\n\t"                            //
      "add $64, %[w]\n\t"                            //
      "dec %[left]\n\t"                              //
      "jnz 3b\n\t"                                   //
      FB_STORE("(%[y0])", "ymm0", "ymm1")            //
      FB_STORE("(%[y0],%[ly],1)", "ymm2", "ymm3")    //
      FB_STORE("(%[y0],%[ly],2)", "ymm4", "ymm5")    //
      FB_STORE("(%[y3])", "ymm6", "ymm7")            //
      FB_STORE("(%[y3],%[ly],1)", "ymm8", "ymm9")    //
      FB_STORE("(%[y3],%[ly],2)", "ymm10", "ymm11")  //
      "vzeroupper\n\t"
      : [x0] "+r"(x16), [x3] "+r"(x3), [w] "+r"(panel), [left] "+r"(left)
      : [lx] "r"(x_bytes), [y0] "r"(y), [y3] "r"(y3), [ly] "r"(y_bytes), [load] "r"(load)
      : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
        "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}
#undef FB_ROW
#undef FB_LOAD
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

namespace {

// out (+)= y * (row scale * column scale) in fp32, for int32 or fp32 products.
template <class Product>
void apply_scales(const Int8Epilogue& e, const Product* y, std::int64_t n, std::int64_t i0,
                  std::int64_t rows, std::int64_t n0, std::int64_t cols) {
  for (std::int64_t i = i0; i < i0 + rows; ++i) {
    const Product* src = y + i * n + n0;
    const float* cs = e.col_scale + n0;
    const float rs = e.row_scale[i];
    if (e.out_bf16 != nullptr) {
      std::uint16_t* dst = e.out_bf16 + i * e.ld_bf16 + n0;
      for (std::int64_t j = 0; j < cols; ++j)
        dst[j] = bf16_bits(static_cast<float>(src[j]) * (rs * cs[j]));  // inline: vectorizes
      continue;
    }
    float* dst = e.out + i * n + n0;
    if (e.accumulate) {
      for (std::int64_t j = 0; j < cols; ++j) dst[j] += static_cast<float>(src[j]) * (rs * cs[j]);
    } else {
      for (std::int64_t j = 0; j < cols; ++j) dst[j] = static_cast<float>(src[j]) * (rs * cs[j]);
    }
  }
}

}  // namespace

void apply_int8_epilogue(const Int8Epilogue& e, const std::int32_t* y, std::int64_t n,
                         std::int64_t i0, std::int64_t rows, std::int64_t n0, std::int64_t cols) {
  apply_scales(e, y, n, i0, rows, n0, cols);
}

void apply_int8_epilogue(const Int8Epilogue& e, const float* y, std::int64_t n, std::int64_t i0,
                         std::int64_t rows, std::int64_t n0, std::int64_t cols) {
  apply_scales(e, y, n, i0, rows, n0, cols);
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
  x16.resize(static_cast<std::size_t>(padded_rows * ldx16));
  std::int16_t* xs = x16.data();
  // The zeros the threads do not write: the rows past m, and the code past an odd k.
  std::fill(xs + m * ldx16, xs + padded_rows * ldx16, std::int16_t{0});
  [[maybe_unused]] const int team = static_cast<int>(std::clamp<std::int64_t>(threads, 1, groups));
#ifdef _OPENMP  // without OpenMP (a build that lacks it) everything runs on the calling thread
#pragma omp parallel num_threads(team) if (team > 1)
#endif
  {
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t c = 0; c < k; ++c) xs[i * ldx16 + c] = x[i * ldx + c];
      if (k < ldx16) xs[i * ldx16 + k] = 0;
    }
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
