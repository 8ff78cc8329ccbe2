#pragma once
// Correctness: every variant of an op against its baseline and a float64 reference.
#include <cstdint>
#include <string>
#include <vector>

#include "fusebench/backend.hpp"
#include "fusebench/ops.hpp"

namespace fusebench {

class TensorSource;

// |got - want| <= atol + rtol * |want|, stated per dtype (see README "Correctness").
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};
Tolerance tolerance_for(DType dtype);

struct Comparison {
  std::string output;
  std::string against;  // "split" or "float64"
  double max_abs_error = 0;
  double max_rel_error = 0;
  std::int64_t mismatches = 0;
  std::int64_t elements = 0;
  bool ok = true;
  Tolerance tolerance;  // what the elements were held to
  // Elements that pass only thanks to atol: |got - want| > rtol*|want| (want near zero). A max
  // relative error above rtol in a passing comparison comes from these.
  std::int64_t within_atol_only = 0;
};

// Element-wise |got - want| <= atol + rtol*|want|; NaN always counts as a mismatch.
Comparison compare_outputs(const std::string& output, const std::string& against,
                           const std::vector<float>& got, const std::vector<double>& want,
                           Tolerance tol);
Comparison compare_outputs(const std::string& output, const std::string& against,
                           const std::vector<float>& got, const std::vector<float>& want,
                           Tolerance tol);

struct VerifyResult {
  std::string op, variant;
  std::vector<Comparison> comparisons;
  std::int64_t reference_rows = 0;  // token rows the float64 comparisons cover (0: none)
  // No mismatch in any comparison. A result without comparisons is not a pass: see checked().
  bool ok() const;
  bool checked() const { return !comparisons.empty(); }
  std::string summary() const;
};

// Runs every variant of `op` on the same fresh random inputs (seeded by `seed`) and compares
// each output with the baseline variant and, when `with_reference`, with the float64 reference.
// `reference_rows` (0: all) limits the float64 reference to the first token rows, where it would
// take too long on the host: each output row of these ops depends on its own input row alone, so
// the reference of the first R tokens is the first R rows of the whole one. `weights` (e.g. a
// checkpoint's layer) replaces the generator's weights for every variant and the reference.
std::vector<VerifyResult> verify_op(Backend& backend, const std::string& op,
                                    const ShardShape& shard, std::int64_t tokens, DType dtype,
                                    std::uint64_t seed, bool with_reference,
                                    std::int64_t reference_rows = 0,
                                    const TensorSource* weights = nullptr);

// The quantized variants of `op` at `spec` (docs/quant.md), each against its own exact
// dequantized reference: its quantized inputs and weights (the same codes and scales, made on
// the host) times their scales, multiplied in float64 over the first `reference_rows` rows (0:
// all), held to tolerance_for(dtype) (the output's rounding and fp32 accumulation). Against
// "float64_dequantized"; the variants differ from one another by design (fused's max scale).
std::vector<VerifyResult> verify_quant_op(Backend& backend, const std::string& op,
                                          const ShardShape& shard, std::int64_t tokens, DType dtype,
                                          const QuantSpec& spec, std::uint64_t seed,
                                          std::int64_t reference_rows = 0,
                                          const TensorSource* weights = nullptr);
// That reference for `plan` from its logical inputs (logical_inputs(plan, ..., windows_only)):
// every output's first `rows` rows. With `weights` storing quantized values (a quantized
// checkpoint), its stored codes and scales (stored_quantized_buffer, stored_static_scale).
ReferenceOutputs dequantized_reference(const Plan& plan, const LogicalTensors& inputs,
                                       std::int64_t rows, const TensorSource* weights = nullptr);
// The same for every rank of a quantized TP pipeline at once (`ranks[r]` is rank r's plan; the
// collectives joined across them), from the whole logical tensors: every row of each rank's
// outputs.
std::vector<ReferenceOutputs> dequantized_tp_reference(const std::vector<Plan>& ranks,
                                                       const LogicalTensors& whole,
                                                       const TensorSource* weights = nullptr);

}  // namespace fusebench
