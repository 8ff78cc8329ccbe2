// Stored checkpoint values as the run's floats: which dtypes convert, exactly or by rounding.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include "fusebench/checkpoint.hpp"

namespace fusebench {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// The multi-dimensional index of row-major element `flat` of `shape`: "[1, 5]".
std::string index_text(const std::vector<std::int64_t>& shape, std::uint64_t flat) {
  std::vector<std::uint64_t> index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    const auto extent = static_cast<std::uint64_t>(shape[d]);
    index[d] = extent == 0 ? 0 : flat % extent;
    flat = extent == 0 ? 0 : flat / extent;
  }
  std::string out = "[";
  for (std::size_t d = 0; d < index.size(); ++d) out += (d ? ", " : "") + std::to_string(index[d]);
  return out + "]";
}

std::string shortest(float v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(v));
  return text;
}

[[noreturn]] void fail(const std::string& label, const TensorInfo& info, const std::string& what) {
  throw CheckpointError(label + ": tensor " + quote_name(info.name) + ": " + what);
}

// Decodes n stored elements; the dtype is branched on once per row, not per element.
void load_row(const std::byte* src, std::int64_t n, TensorDtype stored, float* dst) {
  if (stored == TensorDtype::F32) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * 4);
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = stored == TensorDtype::BF16 ? bf16_to_float(h) : f16_to_float(h);
  }
}

// Finite in the stored dtype, infinite once encode() rounds it to `run`.
bool overflows(float v, DType run) {
  if (!std::isfinite(v) || run == DType::f32) return false;
  const float rounded =
      run == DType::bf16 ? bf16_to_float(float_to_bf16(v)) : f16_to_float(float_to_f16(v));
  return std::isinf(rounded);
}

}  // namespace

std::optional<DType> exact_run_dtype(TensorDtype stored) {
  switch (stored) {
    case TensorDtype::BF16:
      return DType::bf16;
    case TensorDtype::F16:
      return DType::f16;
    case TensorDtype::F32:
      return DType::f32;
    default:
      return std::nullopt;
  }
}

std::string unrunnable_reason(TensorDtype stored) {
  const std::string name(to_string(stored));
  switch (stored) {
    case TensorDtype::BF16:
    case TensorDtype::F16:
    case TensorDtype::F32:
      return "";
    case TensorDtype::F64:
      return "F64 weights: the suite runs bf16, fp16 or fp32 GEMMs; convert the checkpoint first";
    case TensorDtype::F8_E4M3:
    case TensorDtype::F8_E5M2:
    case TensorDtype::F8_E8M0:
      return name +
             " weights: fp8 checkpoints come with scales (weight_scale, weight_scale_inv) that "
             "only config.json's quantization_config says how to apply; without one (quant_method "
             "fp8 or compressed-tensors, docs/checkpoints.md) the suite does not guess";
    case TensorDtype::F4:
    case TensorDtype::F6_E2M3:
    case TensorDtype::F6_E3M2:
      return name +
             " weights: microscaling formats are packed with block scales, which the suite does "
             "not run";
    case TensorDtype::BOOL:
    case TensorDtype::C64:
      return name + " is not a weight dtype";
    default:  // the integer types
      return name +
             " weights: integer checkpoints (GPTQ, AWQ, int8) need their quantization scales and "
             "zero points; the suite applies them only for 8-bit symmetric compressed-tensors "
             "checkpoints whose config.json's quantization_config says so";
  }
}

// bf16 and fp32 share their exponent range; fp16's ends at 65504.
bool conversion_may_overflow(TensorDtype stored, DType run) {
  return (run == DType::f16 && stored != TensorDtype::F16) ||
         (run == DType::bf16 && stored == TensorDtype::F32);
}

bool converts_exactly(TensorDtype stored, DType run) {
  const auto own = exact_run_dtype(stored);
  return own && (*own == run || run == DType::f32);
}

MatrixShape matrix_shape(const SafetensorsFile& file, const TensorInfo& info) {
  return matrix_shape(file.path(), info);
}

MatrixShape matrix_shape(const std::string& label, const TensorInfo& info) {
  if (info.shape.size() == 2) return {info.shape[0], info.shape[1]};
  if (info.shape.size() == 1) return {info.shape[0], 1};
  // A stack of matrices (a layer's routed experts as transformers 5 stores them, [experts, rows,
  // cols]) reads as their rows one after another.
  if (info.shape.size() == 3) return {info.shape[0] * info.shape[1], info.shape[2]};
  fail(label, info,
       "shape " + shape_text(info.shape) + " has " + std::to_string(info.shape.size()) +
           " dimensions; a weight is 2-D (3-D: a stack of experts) and a bias 1-D");
}

std::vector<float> read_window(const SafetensorsFile& file, const TensorInfo& info,
                               std::int64_t row0, std::int64_t col0, std::int64_t rows,
                               std::int64_t cols, DType run) {
  return read_window(file.path(), file.bytes(info), info, row0, col0, rows, cols, run);
}

std::vector<float> read_window(const std::string& label, std::span<const std::byte> bytes,
                               const TensorInfo& info, std::int64_t row0, std::int64_t col0,
                               std::int64_t rows, std::int64_t cols, DType run) {
  if (const auto why = unrunnable_reason(info.dtype); !why.empty()) fail(label, info, why);
  const MatrixShape m = matrix_shape(label, info);
  if (row0 < 0 || col0 < 0 || rows < 0 || cols < 0 || row0 > m.rows - rows ||
      col0 > m.cols - cols) {
    fail(label, info,
         "window of " + std::to_string(rows) + "x" + std::to_string(cols) + " at (" +
             std::to_string(row0) + ", " + std::to_string(col0) + ") is outside its shape " +
             shape_text(info.shape));
  }
  const std::size_t elem = static_cast<std::size_t>(dtype_bits(info.dtype) / 8);
  if (bytes.size() != info.end - info.begin) {
    fail(label, info,
         "given " + std::to_string(bytes.size()) + " bytes, not its " +
             std::to_string(info.end - info.begin));
  }
  const std::byte* data = bytes.data();
  // An empty window reads nothing (and its buffer may be null, which memcpy must not see).
  if (rows == 0 || cols == 0) return {};
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  // Rows are independent: big windows (a 70B model's MLP weights) decode on several threads,
  // each remembering the first value that is not finite or does not fit the run dtype.
  struct Overflow {
    std::int64_t row = -1, col = -1;
    float value = 0;
  };
  const bool check = conversion_may_overflow(info.dtype, run);
  const auto decode_rows = [&](std::int64_t first, std::int64_t last, Overflow& bad) {
    for (std::int64_t r = first; r < last; ++r) {
      const std::byte* src = data + static_cast<std::size_t>((row0 + r) * m.cols + col0) * elem;
      float* dst = out.data() + r * cols;
      load_row(src, cols, info.dtype, dst);
      for (std::int64_t c = 0; bad.row < 0 && c < cols; ++c) {
        if (!std::isfinite(dst[c]) || (check && overflows(dst[c], run)))
          bad = {row0 + r, col0 + c, dst[c]};
      }
    }
  };
  const auto threads =
      static_cast<std::int64_t>(rows * cols < (std::int64_t{1} << 22)
                                    ? 1
                                    : std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
  std::vector<Overflow> bad(static_cast<std::size_t>(threads));
  std::vector<std::thread> workers;
  for (std::int64_t t = 1; t < threads; ++t) {
    workers.emplace_back(decode_rows, rows * t / threads, rows * (t + 1) / threads,
                         std::ref(bad[static_cast<std::size_t>(t)]));
  }
  decode_rows(0, rows / threads, bad[0]);
  for (auto& w : workers) w.join();
  for (const auto& b : bad) {  // in row order: the first bad value of the window
    if (b.row >= 0 && !std::isfinite(b.value)) {
      const auto flat = static_cast<std::uint64_t>(b.row * m.cols + b.col);
      fail(label, info,
           "value " + shortest(b.value) + " at element " + std::to_string(flat) + " (index " +
               index_text(info.shape, flat) + " of shape " + shape_text(info.shape) +
               ") is not finite: a weight that is NaN or Inf makes every output it touches "
               "NaN or Inf, so the checkpoint is refused (is it corrupt?)");
    }
    if (b.row >= 0) {
      fail(label, info,
           "value " + shortest(b.value) + " at (" + std::to_string(b.row) + ", " +
               std::to_string(b.col) + ") overflows " + std::string(to_string(run)) +
               " (stored as " + std::string(to_string(info.dtype)) +
               "); run this checkpoint in its own dtype or fp32");
    }
  }
  return out;
}

}  // namespace fusebench
