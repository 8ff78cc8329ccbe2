#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "op_list.hpp"

namespace fusebench {

const std::vector<OpInfo>& op_registry() {
  static const std::vector<OpInfo> registry = {
      ops::qkv_op(),    ops::gate_up_op(),   ops::moe_op(),       ops::tp_attn_op(),
      ops::tp_mlp_op(), ops::allreduce_op(), ops::allgather_op(), ops::tp_moe_op()};
  return registry;
}

const OpInfo& find_op(std::string_view name) {
  std::string valid;
  for (const auto& op : op_registry()) {
    if (op.name == name) return op;
    valid += (valid.empty() ? "" : ", ") + op.name;
  }
  throw std::invalid_argument("unknown op '" + std::string(name) + "' (valid: " + valid + ")");
}

std::vector<std::string> variants_for(const OpInfo& op, const ShardShape& shard) {
  std::vector<std::string> out;
  for (const auto& v : op.variants) {
    if (!op.has_variant || op.has_variant(shard, v)) out.push_back(v);
  }
  return out;
}

bool is_attention_op(std::string_view op) { return op == "qkv" || op == "tp_attn"; }
bool is_mlp_op(std::string_view op) {
  return op == "gate_up" || op == "tp_mlp" || op == "moe" || op == "tp_moe";
}

std::vector<LayerKind> op_layers(std::string_view op, const ModelShape& model) {
  if (!model.refusal(op).empty()) return {};
  if (!is_mlp_op(op)) return {model.attention};  // attention ops; collectives use its shard
  std::vector<LayerKind> out;
  for (const auto& layer : model.mlp_layer_list()) {
    // tp_mlp is a dense column/row pair: vLLM reduces experts together (see shapes.cpp); moe is
    // the routed experts' block (the shared expert inside it).
    if (op == "moe" || op == "tp_moe") {
      if (layer.kind == LayerKind::expert) out.push_back(layer.kind);
    } else if (op == "gate_up" || layer.kind == LayerKind::dense) {
      out.push_back(layer.kind);
    }
  }
  return out;
}

std::string layer_name(std::string_view op, const ShardShape& shard) {
  if (is_attention_op(op)) return std::string(to_string(shard.attention));
  if (is_mlp_op(op)) return std::string(to_string(shard.mlp));
  return {};
}

bool op_has_bias(std::string_view op, const ShardShape& shard) {
  if (op == "qkv") return shard.attention == LayerKind::attention && shard.qkv_bias;
  if (op == "tp_attn") return shard.qkv_bias || shard.o_bias;
  if (is_mlp_op(op)) return shard.mlp_bias;
  return false;
}

std::string activation_name(std::string_view op, const ShardShape& shard) {
  return is_mlp_op(op) ? std::string(to_string(shard.activation)) : "none";
}

Plan build_plan(std::string_view op, const std::string& variant, const ShardShape& shard,
                std::int64_t tokens, DType dtype) {
  return build_plan(op, variant, shard, tokens, PlanRequest{dtype});
}

Plan build_plan(std::string_view op, const std::string& variant, const ShardShape& shard,
                std::int64_t tokens, DType dtype, const std::optional<QuantSpec>& quant) {
  return build_plan(op, variant, shard, tokens, PlanRequest{dtype, quant});
}

Plan build_plan(std::string_view op, const std::string& variant, const ShardShape& shard,
                std::int64_t tokens, const PlanRequest& request) {
  const auto check_tokens = [tokens] {
    if (tokens < 1)
      throw std::invalid_argument("tokens=" + std::to_string(tokens) +
                                  " is invalid (must be >= 1)");
  };
  if (!request.quant) {
    check_tokens();
    return find_op(op).build(shard, tokens, request, variant);
  }
  const OpInfo& info = find_op(op);
  if (const std::string why = quant_refusal(info); !why.empty()) throw std::invalid_argument(why);
  check_tokens();
  return info.build(shard, tokens, request, variant);
}

std::string quant_refusal(const OpInfo& op) {
  if (op.quant_variants) return {};
  return "op " + op.name +
         " has no quantized (fp8, int8) variants: a collective moves the activations as they "
         "are; qkv, gate_up, moe, tp_attn and tp_mlp have them";
}

namespace ops {

Plan start_plan(const std::string& op, const ShardShape& s, std::int64_t m, DType dtype,
                const std::string& variant) {
  Plan p;
  p.op = op;
  p.variant = variant;
  p.tokens = m;
  p.dtype = dtype;
  p.shard = s;
  return p;
}

View whole(const Plan& plan, int buffer) {
  const auto& b = plan.buffers.at(static_cast<std::size_t>(buffer));
  return View{buffer, 0, 0, b.rows, b.cols};
}

View columns(const Plan& plan, int buffer, std::int64_t col0, std::int64_t cols) {
  View v = whole(plan, buffer);
  v.col0 = col0;
  v.cols = cols;
  return v;
}

int add_input(Plan& plan, const std::string& name, std::int64_t rows, std::int64_t cols) {
  return plan.add_buffer({name, rows, cols, BufferRole::input, {name}, {rows}, {}});
}

int add_weight(Plan& plan, const std::string& name,
               const std::vector<std::pair<std::string, std::int64_t>>& parts, std::int64_t cols) {
  BufferSpec spec{name, 0, cols, BufferRole::weight, {}, {}, {}};
  for (const auto& [part, rows] : parts) {
    spec.parts.push_back(part);
    spec.part_rows.push_back(rows);
    spec.rows += rows;
  }
  return plan.add_buffer(std::move(spec));
}

int add_output(Plan& plan, const std::string& name, std::int64_t rows, std::int64_t cols) {
  return plan.add_buffer({name, rows, cols, BufferRole::output, {}, {}, {}});
}

double silu(double v) { return v / (1.0 + std::exp(-v)); }

double act_and_mul(Activation act, double limit, double g, double u) {
  switch (act) {
    case Activation::silu:
      return silu(g) * u;
    case Activation::gelu_tanh: {
      const double k = std::sqrt(2.0 / 3.14159265358979323846);
      return 0.5 * g * (1.0 + std::tanh(k * (g + 0.044715 * g * g * g))) * u;
    }
    case Activation::gelu:
      return 0.5 * g * (1.0 + std::erf(g / std::sqrt(2.0))) * u;
    case Activation::swigluoai: {
      const double gc = std::min(g, limit), uc = std::clamp(u, -limit, limit);
      return (uc + 1.0) * gc / (1.0 + std::exp(-kSwigluOaiAlpha * gc));
    }
  }
  return 0;
}

std::vector<float> rows_of(const std::vector<float>& t, std::int64_t cols, std::int64_t row0,
                           std::int64_t n) {
  const auto begin = t.begin() + static_cast<std::ptrdiff_t>(row0 * cols);
  return std::vector<float>(begin, begin + static_cast<std::ptrdiff_t>(n * cols));
}

std::vector<float> shard_rows(const std::vector<float>& t, std::int64_t cols, std::int64_t row0,
                              std::int64_t n) {
  if (static_cast<std::int64_t>(t.size()) == n * cols) return t;
  return rows_of(t, cols, row0, n);
}

void add_bias(std::vector<double>& y, std::int64_t m, std::int64_t n, const std::vector<float>& b,
              std::int64_t b0) {
  if (static_cast<std::int64_t>(b.size()) == n) b0 = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j)
      y[static_cast<std::size_t>(i * n + j)] +=
          static_cast<double>(b[static_cast<std::size_t>(b0 + j)]);
  }
}

void unknown_variant(const OpInfo& op, const std::string& variant) {
  std::string valid;
  for (const auto& v : op.variants) valid += (valid.empty() ? "" : ", ") + v;
  throw std::invalid_argument("unknown variant '" + variant + "' for op " + op.name +
                              " (valid: " + valid + ")");
}

}  // namespace ops
}  // namespace fusebench
