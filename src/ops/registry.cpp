#include <cmath>
#include <stdexcept>

#include "op_list.hpp"

namespace fusebench {

const std::vector<OpInfo>& op_registry() {
  static const std::vector<OpInfo> registry = {ops::qkv_op(),       ops::gate_up_op(),
                                               ops::tp_attn_op(),   ops::tp_mlp_op(),
                                               ops::allreduce_op(), ops::allgather_op()};
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

Plan build_plan(std::string_view op, const std::string& variant, const ShardShape& shard,
                std::int64_t tokens, DType dtype) {
  if (tokens < 1) {
    throw std::invalid_argument("tokens=" + std::to_string(tokens) + " is invalid (must be >= 1)");
  }
  return find_op(op).build(shard, tokens, dtype, variant);
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
  return plan.add_buffer({name, rows, cols, BufferRole::input, {name}, {rows}});
}

int add_weight(Plan& plan, const std::string& name,
               const std::vector<std::pair<std::string, std::int64_t>>& parts, std::int64_t cols) {
  BufferSpec spec{name, 0, cols, BufferRole::weight, {}, {}};
  for (const auto& [part, rows] : parts) {
    spec.parts.push_back(part);
    spec.part_rows.push_back(rows);
    spec.rows += rows;
  }
  return plan.add_buffer(std::move(spec));
}

int add_output(Plan& plan, const std::string& name, std::int64_t rows, std::int64_t cols) {
  return plan.add_buffer({name, rows, cols, BufferRole::output, {}, {}});
}

double silu(double v) { return v / (1.0 + std::exp(-v)); }

void unknown_variant(const OpInfo& op, const std::string& variant) {
  std::string valid;
  for (const auto& v : op.variants) valid += (valid.empty() ? "" : ", ") + v;
  throw std::invalid_argument("unknown variant '" + variant + "' for op " + op.name +
                              " (valid: " + valid + ")");
}

}  // namespace ops
}  // namespace fusebench
