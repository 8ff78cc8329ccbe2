#pragma once
// A backend's quantize against the host's quantize() (the verifier's reference), code for code
// and scale for scale: the cuda kernels (test_correctness_gpu.cpp) and the CPU's threaded loop
// (test_quant_plans.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "fusebench/backend.hpp"
#include "fusebench/dtype.hpp"
#include "fusebench/quant.hpp"

namespace fusebench {

// fp8 and int8, per tensor (dynamic and static), per token and per 1x128 group, on 37 rows of 1000
// columns (a partial last group) of bf16 values spanning magnitudes, with exact ties for int8's
// round-half-even and values past the static scale's range (saturation). `group_major_scales`: the
// backend writes 1x128 group scales group-major (cuda), not row-major.
inline void expect_quantize_matches_host(Backend& backend, bool group_major_scales) {
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
  void* dx = backend.allocate(bytes.size());
  auto* codes = static_cast<std::uint8_t*>(backend.allocate(x.size()));
  auto* scales = static_cast<float*>(backend.allocate(sizeof(float) * rows * groups));
  backend.upload(dx, bytes.data(), bytes.size());
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
          backend.upload(scales, &half, sizeof(half));
        }
        try {
          backend.quantize({xr, {codes, rows, cols, cols, scales, kind, dtype}, is_static});
          backend.synchronize();
        } catch (const std::exception& e) {
          ADD_FAILURE() << what << ": " << e.what();
          continue;
        }
        std::vector<std::uint8_t> got(x.size());
        backend.download(got.data(), codes, got.size());
        std::vector<float> got_scales(want.scales.size());
        backend.download(got_scales.data(), scales, got_scales.size() * sizeof(float));
        std::size_t wrong = 0, first = got.size();
        for (std::size_t i = 0; i < got.size(); ++i) {
          if (got[i] != want.codes[i]) {
            if (wrong++ == 0) first = i;
          }
        }
        EXPECT_EQ(wrong, 0u) << what << ": first at " << first << " (x " << x[first % x.size()]
                             << ", backend code " << int(got[first % got.size()]) << ", host "
                             << int(want.codes[first % got.size()]) << ")";
        for (std::int64_t r = 0; r < want.scale_rows(); ++r) {
          for (std::int64_t g = 0; g < want.scale_cols(); ++g) {
            // The cuda backend's group scales are group-major (cuda_scaled_gemm.hpp).
            const std::int64_t at = kind == ScaleKind::group && group_major_scales
                                        ? g * rows + r
                                        : r * want.scale_cols() + g;
            EXPECT_EQ(got_scales[static_cast<std::size_t>(at)],
                      want.scales[static_cast<std::size_t>(r * want.scale_cols() + g)])
                << what << " scale (" << r << ", " << g << ")";
          }
        }
      }
    }
  }
  backend.release(dx);
  backend.release(codes);
  backend.release(scales);
}

}  // namespace fusebench
