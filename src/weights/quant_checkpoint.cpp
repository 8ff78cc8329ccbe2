// A quantized checkpoint's scale tensors and stored codes (quant_checkpoint.hpp).
#include "fusebench/quant_checkpoint.hpp"

#include <algorithm>
#include <cstdio>

namespace fusebench {

namespace {

std::string shape_of(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::vector<float> read_scale_values(const Checkpoint& checkpoint, const std::string& name) {
  const auto t = checkpoint.tensor(name);
  const auto fail = [&](const std::string& what) {
    throw CheckpointError(t.file.path() + ": tensor " + quote_name(name) + ": " + what);
  };
  if (t.info.dtype != TensorDtype::F32 && t.info.dtype != TensorDtype::BF16 &&
      t.info.dtype != TensorDtype::F16)
    fail("a scale stored as " + std::string(to_string(t.info.dtype)) + " (valid: F32, BF16, F16)");
  TensorInfo flat = t.info;  // every element, one column
  flat.shape = {static_cast<std::int64_t>(t.info.elements())};
  auto values =
      read_window(t.file.path(), t.file.bytes(t.info), flat, 0, 0, flat.shape[0], 1, DType::f32);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!(values[i] > 0))
      fail("scale " + std::to_string(values[i]) + " at element " + std::to_string(i) +
           " is not > 0 (a scale multiplies every code of its tile)");
    // A finite positive scale can still overflow or underflow what it multiplies: 3e38 times a
    // code is inf, 1e-45 zeroes it. The range keeps a dequantized value (at most 448 x scale)
    // and the product of two of them (an activation times a weight, summed over K) normal
    // float32 numbers.
    if (values[i] < kMinQuantScale || values[i] > kMaxQuantScale) {
      char text[256];
      std::snprintf(text, sizeof(text),
                    "scale %g at element %zu is outside %g..%g (2^-56..2^47): its products with "
                    "the codes would overflow or underflow float32",
                    static_cast<double>(values[i]), i, static_cast<double>(kMinQuantScale),
                    static_cast<double>(kMaxQuantScale));
      fail(text);
    }
  }
  return values;
}

QuantScaleNames check_quant_scales(const Checkpoint& checkpoint, const CheckpointQuant& quant,
                                   const std::string& weight) {
  const auto w = checkpoint.tensor(weight);
  const std::int64_t rows = w.info.shape.at(0),
                     cols = w.info.shape.size() > 1 ? w.info.shape[1] : 1;
  QuantScaleNames out{quant.scale_of(weight), ""};
  if (!checkpoint.has(out.scale))
    throw CheckpointError(checkpoint.lookup_description() + ": no tensor " + quote_name(out.scale) +
                          " (the " + quant.method + " quantization_config stores the scales of " +
                          quote_name(weight) + " there)");
  const auto s = checkpoint.tensor(out.scale);
  const std::vector<std::int64_t>& shape = s.info.shape;
  bool ok = false;
  std::string want;
  switch (quant.spec.weights) {
    case WeightScales::tensor:
      ok = s.info.elements() == 1 && shape.size() <= 1;
      want = "[] or [1] (one scale per tensor)";
      break;
    case WeightScales::channel:
      ok = (shape.size() == 2 && shape[0] == rows && shape[1] == 1) ||
           (shape.size() == 1 && shape[0] == rows);
      want = std::string("[") + std::to_string(rows) + ", 1] (one scale per output row)";
      break;
    case WeightScales::block:
      ok = shape ==
           std::vector<std::int64_t>{ceil_div(rows, kQuantBlock), ceil_div(cols, kQuantBlock)};
      want = std::string("[") + std::to_string(ceil_div(rows, kQuantBlock)) + ", " +
             std::to_string(ceil_div(cols, kQuantBlock)) + "] (ceil(" + std::to_string(rows) +
             "/128), ceil(" + std::to_string(cols) + "/128): one per 128x128 block)";
      break;
  }
  if (!ok)
    throw CheckpointError(s.file.path() + ": tensor " + quote_name(out.scale) + ": shape " +
                          shape_of(shape) + " does not fit " + quote_name(weight) + " " +
                          shape_of(w.info.shape) + " at " + quant.spec.name() + ": expected " +
                          want);
  (void)read_scale_values(checkpoint, out.scale);
  if (quant.spec.scheme == ActScheme::static_scale) {
    out.input_scale = quant.input_scale_of(weight);
    if (!checkpoint.has(out.input_scale))
      throw CheckpointError(checkpoint.lookup_description() + ": no tensor " +
                            quote_name(out.input_scale) +
                            " (static activations: the quantization_config gives each layer "
                            "one input scale)");
    const auto in = checkpoint.tensor(out.input_scale);
    if (in.info.elements() != 1 || in.info.shape.size() > 1)
      throw CheckpointError(in.file.path() + ": tensor " + quote_name(out.input_scale) +
                            ": shape " + shape_of(in.info.shape) +
                            ": a static input scale is one value ([] or [1])");
    (void)read_scale_values(checkpoint, out.input_scale);
  }
  return out;
}

QuantMat read_quantized_window(const Checkpoint& checkpoint, const CheckpointQuant& quant,
                               const std::string& weight, const std::string& scale,
                               std::int64_t row0, std::int64_t col0, std::int64_t rows,
                               std::int64_t cols) {
  const auto t = checkpoint.tensor(weight);
  const std::int64_t all_rows = t.info.shape.at(0), all_cols = t.info.shape.at(1);
  const auto fail = [&](const std::string& what) {
    throw CheckpointError(t.file.path() + ": tensor " + quote_name(weight) + ": " + what);
  };
  if (t.info.dtype != quant.stored)
    fail("stored as " + std::string(to_string(t.info.dtype)) + ", but its quantization_config (" +
         quant.read_as + ") stores weights as " + std::string(to_string(quant.stored)));
  if (row0 < 0 || col0 < 0 || rows < 0 || cols < 0 || row0 + rows > all_rows ||
      col0 + cols > all_cols)
    fail("window " + std::to_string(rows) + "x" + std::to_string(cols) + " at (" +
         std::to_string(row0) + ", " + std::to_string(col0) + ") is outside its shape " +
         shape_of(t.info.shape));
  QuantMat m;
  m.dtype = quant.spec.dtype;
  m.kind = scale_kind(quant.spec.weights);
  m.rows = rows;
  m.cols = cols;
  const auto bytes = t.file.bytes(t.info);
  m.codes.resize(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto* src =
        reinterpret_cast<const std::uint8_t*>(bytes.data()) + (row0 + r) * all_cols + col0;
    std::copy(src, src + cols, m.codes.begin() + r * cols);
  }
  if (m.dtype == QuantDType::fp8_e4m3fn) {
    for (std::size_t i = 0; i < m.codes.size(); ++i) {
      if ((m.codes[i] & 0x7F) == 0x7F) {
        const auto r = row0 + static_cast<std::int64_t>(i) / std::max<std::int64_t>(cols, 1);
        const auto c = col0 + static_cast<std::int64_t>(i) % std::max<std::int64_t>(cols, 1);
        char code[8];
        std::snprintf(code, sizeof code, "0x%02x", static_cast<unsigned>(m.codes[i]));
        std::string what = "code ";
        what += code;
        what += " at (" + std::to_string(r) + ", " + std::to_string(c) + ")";
        fail(what +
             " is an e4m3fn NaN: it would make every output it touches NaN (is it corrupt?)");
      }
    }
  }
  const auto all = read_scale_values(checkpoint, scale);
  switch (m.kind) {
    case ScaleKind::tensor:
      m.scales = {all.at(0)};
      break;
    case ScaleKind::row:
      m.scales.assign(all.begin() + row0, all.begin() + row0 + rows);
      break;
    case ScaleKind::block: {
      if (row0 % kQuantBlock != 0 || col0 % kQuantBlock != 0)
        fail("a window at (" + std::to_string(row0) + ", " + std::to_string(col0) +
             ") does not start on a 128x128 scale block of " + quote_name(scale));
      const std::int64_t grid_cols = ceil_div(all_cols, kQuantBlock);
      for (std::int64_t br = row0 / kQuantBlock; br < ceil_div(row0 + rows, kQuantBlock); ++br)
        for (std::int64_t bc = col0 / kQuantBlock; bc < ceil_div(col0 + cols, kQuantBlock); ++bc)
          m.scales.push_back(all.at(static_cast<std::size_t>(br * grid_cols + bc)));
      break;
    }
    case ScaleKind::group:
      fail("group scales are not weight scales");
  }
  return m;
}

}  // namespace fusebench
