#pragma once
// Each op lives in its own file and hands its description to the registry here.
#include "fusebench/ops.hpp"

namespace fusebench::ops {

OpInfo qkv_op();
OpInfo gate_up_op();
// The routed-expert block of one MoE layer (moe.cpp).
OpInfo moe_op();
// Its per-model set-up: the routing block of each shard (moe_setup.cpp).
ShardPreparer moe_setup(const ModelSetup& model);
// The same for any op on the block (tp_moe), probed with `probe_variant` at one token.
ShardPreparer moe_block_setup(const ModelSetup& model, const std::string& op,
                              const std::string& probe_variant);
// The block across ranks: TP-sharded experts against expert parallelism (tp_moe.cpp).
OpInfo tp_moe_op();
// Tensor-parallel pipelines and the collective sweep (tp_*.cpp).
OpInfo tp_attn_op();
OpInfo tp_mlp_op();
OpInfo allreduce_op();
OpInfo allgather_op();

// Shared helpers for op definitions.
// An empty plan of `op`/`variant` for one rank's shard, `m` tokens and `dtype`.
Plan start_plan(const std::string& op, const ShardShape& s, std::int64_t m, DType dtype,
                const std::string& variant);
View whole(const Plan& plan, int buffer);
View columns(const Plan& plan, int buffer, std::int64_t col0, std::int64_t cols);
int add_input(Plan& plan, const std::string& name, std::int64_t rows, std::int64_t cols);
// A weight made of logical tensors stacked along rows: {name, rows} pairs.
int add_weight(Plan& plan, const std::string& name,
               const std::vector<std::pair<std::string, std::int64_t>>& parts, std::int64_t cols);
int add_output(Plan& plan, const std::string& name, std::int64_t rows, std::int64_t cols);
// y = x * w^T in float64 for row-major x[m,k], w[n,k]; x is the float inputs or a float64
// intermediate (the TP pipelines chain two layers).
template <class X>
std::vector<double> reference_linear(const std::vector<X>& x, const std::vector<float>& w,
                                     std::int64_t m, std::int64_t n, std::int64_t k) {
  std::vector<double> y(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        acc += static_cast<double>(x[static_cast<std::size_t>(i * k + p)]) *
               static_cast<double>(w[static_cast<std::size_t>(j * k + p)]);
      }
      y[static_cast<std::size_t>(i * n + j)] = acc;
    }
  }
  return y;
}
double silu(double v);
// act(g) * u in float64 (the reference of ActAndMulStep).
double act_and_mul(Activation act, double limit, double g, double u);
// Rows [row0, row0 + n) of a row-major tensor with `cols` columns.
std::vector<float> rows_of(const std::vector<float>& t, std::int64_t cols, std::int64_t row0,
                           std::int64_t n);
// The same of a tensor that is either the whole logical tensor or already just those rows
// (logical_inputs with windows_only): a shard's rows either way.
std::vector<float> shard_rows(const std::vector<float>& t, std::int64_t cols, std::int64_t row0,
                              std::int64_t n);
// y[m, n] += b[b0 + j] on every row (the reference of a bias epilogue or bias add); b is the
// whole bias, or just its n elements (then b0 is ignored).
void add_bias(std::vector<double>& y, std::int64_t m, std::int64_t n, const std::vector<float>& b,
              std::int64_t b0);
[[noreturn]] void unknown_variant(const OpInfo& op, const std::string& variant);

}  // namespace fusebench::ops
