#include "runner/quant_fields.hpp"

#include <cmath>

#include "fusebench/cost_model.hpp"
#include "fusebench/ops.hpp"
#include "runner/verification.hpp"

namespace fusebench::bench {

namespace {

// How the entry's variant merges its shards' weight scales (the report's quant.shard_fusion):
// the op's rule (OpInfo::quant_shard_fusion), else the projections'.
std::string shard_fusion(const Fixture& f) {
  const QuantSpec& q = *f.quant;
  const OpInfo& op = find_op(f.op);
  if (op.quant_shard_fusion) return op.quant_shard_fusion(q, f.variant);
  if (f.variant == op.quant_split) return "none: one weight per shard";
  if (f.variant == "fused_channelwise") return "channelwise (exact)";
  return q.weights == WeightScales::tensor ? "max-scale requantization (vLLM's fused FP8; lossy)"
                                           : "stacked (exact)";
}

}  // namespace

void add_quant_description(const Fixture& f, const Backend& backend, nlohmann::json& fields) {
  const QuantSpec& q = *f.quant;
  const std::string fusion = shard_fusion(f);
  const std::string execution = backend.quant_execution(q.dtype);
  fields["quant"] = {{"spec", q.name()},
                     {"dtype", to_string(q.dtype)},
                     {"weights", to_string(q.weights)},
                     {"activations", to_string(q.activations)},
                     {"scheme", to_string(q.scheme)},
                     {"activations_dtype", to_string(f.dtype)},
                     {"shard_fusion", fusion},
                     {"execution", execution}};
  fields["emulated"] = execution.rfind("emulated", 0) == 0;
}

ShardOutputs read_quant_outputs(Workspace& ws, std::int64_t rows, bool run) {
  if (run) ws.run();  // outputs of this workspace's own buffers (timing may have run on copies)
  ShardOutputs out;
  for (const auto& name : ws.plan().quant_outputs) {
    const View& v = ws.plan().outputs.at(name);
    auto all = ws.read(v);
    all.resize(static_cast<std::size_t>(rows * v.cols));
    out[name] = std::move(all);
  }
  return out;
}

std::int64_t quant_reference_rows(const Fixture& f) {
  const double macs =
      cost_of(build_plan(f.op, find_op(f.op).quant_split, f.shard, 1, f.dtype, f.quant)).flops / 2;
  const std::int64_t rows = reference_rows(macs, f.rows());
  const Plan plan = f.plan();
  const auto held = plan.output_rows.find("out");  // sequence parallel: rank 0's rows
  return held == plan.output_rows.end() ? rows : std::min(rows, held->second.rows);
}

namespace {

std::vector<double> widened(const std::vector<float>& v) { return {v.begin(), v.end()}; }

}  // namespace

void add_quant_accuracy(const Fixture& f, const ShardOutputs& got, const ShardOutputs* split,
                        std::uint64_t seed, nlohmann::json& fields) {
  const std::int64_t rows = quant_reference_rows(f);
  // The unquantized product: the op's float64 reference on the same (bf16-rounded) inputs, of
  // the plan the op names (OpInfo::quant_reference), else of its variant at `rows` tokens.
  const OpInfo& op = find_op(f.op);
  const AccuracyReference head =
      op.quant_reference
          ? op.quant_reference(f.plan(), rows)
          : AccuracyReference{build_plan(f.op, f.variant, f.shard, rows, f.dtype, f.quant)};
  const ReferenceOutputs exact = op.reference(
      head.plan, logical_inputs(head.plan, seed, f.weight_source(), !head.whole_tensors));
  nlohmann::json error = nlohmann::json::object(), vs_split = nlohmann::json::object();
  for (const auto& [name, y] : got) {
    const auto cols = static_cast<std::int64_t>(y.size()) / rows;
    error[name] = quant_error(widened(y), exact.at(name), rows, {cols})[0];
    if (std::isnan(error[name].get<double>()))  // dropped from the report as non-finite: say why
      fields["quant_error_note"][name] =
          "no quant_error: the output or its float64 reference is not finite, or the reference "
          "is all zero";
    if (split != nullptr && f.variant != op.quant_split && split->count(name))
      vs_split[name] = quant_error_vs_split(widened(y), widened(split->at(name)), rows, {cols})[0];
  }
  fields["quant_error"] = error;
  fields["quant_error_rows"] = rows;
  if (!vs_split.empty()) fields["quant_error_vs_split"] = vs_split;
}

}  // namespace fusebench::bench
