#pragma once
// Each op lives in its own file and hands its description to the registry here.
#include "fusebench/ops.hpp"

namespace fusebench::ops {

OpInfo qkv_op();
OpInfo gate_up_op();
// Tensor-parallel pipelines and the collective sweep (tp_*.cpp).
OpInfo tp_attn_op();
OpInfo tp_mlp_op();
OpInfo allreduce_op();
OpInfo allgather_op();

// Shared helpers for op definitions.
View whole(const Plan& plan, int buffer);
View columns(const Plan& plan, int buffer, std::int64_t col0, std::int64_t cols);
int add_input(Plan& plan, const std::string& name, std::int64_t rows, std::int64_t cols);
// A weight made of logical tensors stacked along rows: {name, rows} pairs.
int add_weight(Plan& plan, const std::string& name,
               const std::vector<std::pair<std::string, std::int64_t>>& parts, std::int64_t cols);
int add_output(Plan& plan, const std::string& name, std::int64_t rows, std::int64_t cols);
// y = x * w^T in float64 for row-major x[m,k], w[n,k].
std::vector<double> reference_linear(const std::vector<float>& x, const std::vector<float>& w,
                                     std::int64_t m, std::int64_t n, std::int64_t k);
double silu(double v);
[[noreturn]] void unknown_variant(const OpInfo& op, const std::string& variant);

}  // namespace fusebench::ops
