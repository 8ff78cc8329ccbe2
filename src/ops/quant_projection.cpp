#include "quant_projection.hpp"

namespace fusebench::ops {

int add_scales(Plan& p, const std::string& name, ScaleKind kind, std::int64_t rows,
               std::int64_t cols, BufferRole role) {
  const QuantMat grid{QuantDType::fp8_e4m3fn, kind, rows, cols, {}, {}};
  BufferSpec b{name, grid.scale_rows(), grid.scale_cols(), role, {}, {}, {}};
  b.store = BufferSpec::Store::scales;
  return p.add_buffer(std::move(b));
}

// A weight's codes (quantized at load from `parts`, merged by `fusion`) and its scales.
QuantView add_quant_weight(Plan& p, const std::string& name,
                           const std::vector<tp::WindowPart>& parts, std::int64_t k,
                           QuantDType dtype, ScaleKind kind, ShardFusion fusion) {
  return quantize_weight_buffer(p, tp::add_windowed(p, name, BufferRole::weight, parts, k), dtype,
                                kind, fusion);
}

QuantView quantize_weight_buffer(Plan& p, int buffer, QuantDType dtype, ScaleKind kind,
                                 ShardFusion fusion) {
  const ScaleKind stored = fusion == ShardFusion::channelwise ? ScaleKind::row : kind;
  const BufferSpec& w = p.buffers[static_cast<std::size_t>(buffer)];
  const int scales = add_scales(p, w.name + "_scale", stored, w.rows, w.cols, BufferRole::weight);
  BufferSpec& b = p.buffers[static_cast<std::size_t>(buffer)];
  b.store = BufferSpec::Store::codes;
  b.quantized = BufferSpec::Quantized{dtype, kind, fusion, scales};
  return {View{buffer, 0, 0, b.rows, b.cols}, scales, stored};
}

QuantizeStep make_quantize(Plan& p, const std::string& name, const View& x, QuantDType dtype,
                           ScaleKind kind, const std::string& label) {
  BufferSpec codes{name + "_q", x.rows, x.cols, BufferRole::output, {}, {}, {}};
  codes.store = BufferSpec::Store::codes;
  const int c = p.add_buffer(std::move(codes));
  const int s = add_scales(p, name + "_scale", kind, x.rows, x.cols, BufferRole::output);
  return QuantizeStep{label, x, QuantView{View{c, 0, 0, x.rows, x.cols}, s, kind}, dtype, false};
}

QuantView add_quantize(Plan& p, const std::string& name, const View& x, QuantDType dtype,
                       ScaleKind kind, const std::string& label) {
  QuantizeStep q = make_quantize(p, name, x, dtype, kind, label);
  const QuantView out = q.out;
  p.steps.push_back(std::move(q));
  return out;
}

std::vector<std::string> quant_projection_variants(const QuantSpec& spec) {
  if (spec.weights == WeightScales::tensor) return {"split", "fused", "fused_channelwise"};
  return {"split", "fused"};
}

void check_quant_shard(const std::string& op, bool bias, const std::string& what_else) {
  if (bias)
    throw std::invalid_argument(op +
                                ": the quantized variants add no bias yet (the model has one)");
  if (!what_else.empty()) throw std::invalid_argument(op + ": " + what_else);
}

std::vector<View> add_quantized_projection(Plan& p, int x,
                                           const std::vector<ProjectionShard>& shards,
                                           const std::string& fused_name,
                                           const std::string& fused_label, const QuantSpec& spec,
                                           std::int64_t full_output, const OpInfo& op) {
  const auto variants = quant_projection_variants(spec);
  if (std::find(variants.begin(), variants.end(), p.variant) == variants.end()) {
    std::string valid;
    for (const auto& v : variants) valid += (valid.empty() ? "" : ", ") + v;
    throw std::invalid_argument("unknown variant '" + p.variant + "' for op " + op.name + " at " +
                                spec.name() + " (valid: " + valid + ")");
  }
  const std::int64_t m = p.tokens, k = p.buffers[static_cast<std::size_t>(x)].cols;
  const QuantDType dt = spec.dtype;
  const ScaleKind wk = scale_kind(spec.weights), xk = scale_kind(spec.activations);
  const bool fused = p.variant != "split";
  if (spec.weights == WeightScales::block) {  // vLLM's validate_fp8_block_shape, as it checks
    std::vector<std::int64_t> sizes;
    for (const auto& s : shards) sizes.push_back(s.weight.rows);
    const std::string why =
        fused ? fp8_block_shape_refusal(k, full_output, k, sizes, p.shard.tp)
              : fp8_block_shape_refusal(k, full_output, k, {sizes.front()}, p.shard.tp);
    if (!why.empty())
      throw std::invalid_argument(op.name + "/" + p.variant + " at " + spec.name() +
                                  " is refused as vLLM refuses it: " + why);
  }
  const bool is_static = spec.scheme == ActScheme::static_scale;
  int static_scale = -1;
  if (is_static) {  // the given input scale, calibrated on this input (its amax / qmax)
    static_scale = add_scales(p, "x_input_scale", ScaleKind::tensor, m, k, BufferRole::input);
    BufferSpec& b = p.buffers[static_cast<std::size_t>(static_scale)];
    b.parts = {p.buffers[static_cast<std::size_t>(x)].name};
    b.part_rows = {m};
    b.part_windows = {{m, k, 0, 0}};  // the whole input (the buffer itself is one scale)
    b.quantized = BufferSpec::Quantized{dt, ScaleKind::tensor, ShardFusion::stack, -1};
  }
  // x's codes and scales (a static plan's scale is the given one).
  const auto quantize_x = [&](const std::string& suffix, const std::string& label) {
    BufferSpec codes{"x_q" + suffix, m, k, BufferRole::output, {}, {}, {}};
    codes.store = BufferSpec::Store::codes;
    const int c = p.add_buffer(std::move(codes));
    const int s =
        is_static ? static_scale : add_scales(p, "x_scale" + suffix, xk, m, k, BufferRole::output);
    const QuantView q{View{c, 0, 0, m, k}, s, xk};
    p.steps.push_back(QuantizeStep{label, whole(p, x), q, dt, is_static});
    return q;
  };
  std::vector<View> out;
  if (!fused) {
    for (const auto& s : shards) {
      const QuantView xq = quantize_x("_" + s.output, "quantize_" + s.output);
      const QuantView w =
          add_quant_weight(p, s.weight.name, {s.weight}, k, dt, wk, ShardFusion::stack);
      const int y = add_output(p, s.output, m, s.weight.rows);
      p.steps.push_back(ScaledGemmStep{s.label, xq, w, whole(p, y), dt});
      out.push_back(whole(p, y));
    }
    return out;
  }
  const ShardFusion fusion = spec.weights != WeightScales::tensor ? ShardFusion::stack
                             : p.variant == "fused"               ? ShardFusion::max_scale
                                                                  : ShardFusion::channelwise;
  std::vector<tp::WindowPart> parts;
  std::int64_t n = 0;
  for (const auto& s : shards) {
    parts.push_back(s.weight);
    n += s.weight.rows;
  }
  const QuantView xq = quantize_x("", "quantize_x");
  const QuantView w = add_quant_weight(p, fused_name, parts, k, dt, wk, fusion);
  const int y = add_output(p, fused_name.substr(2), m, n);  // "w_qkv" -> "qkv"
  p.steps.push_back(ScaledGemmStep{fused_label, xq, w, whole(p, y), dt});
  std::int64_t c0 = 0;
  for (const auto& s : shards) {
    out.push_back(columns(p, y, c0, s.weight.rows));
    c0 += s.weight.rows;
  }
  return out;
}

}  // namespace fusebench::ops
