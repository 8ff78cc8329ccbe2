#include "fusebench/verify.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "fusebench/routing.hpp"
#include "fusebench/workspace.hpp"

namespace fusebench {

Tolerance tolerance_for(DType dtype) {
  // Outputs are O(1) (weights scaled by 1/sqrt(K)). The bound covers one rounding of the output
  // to the dtype (bf16: 2^-8, fp16: 2^-11 relative) plus fp32 accumulation-order differences
  // between algorithms (split-K, tiling), with a margin.
  switch (dtype) {
    case DType::bf16:
      return {2e-2, 2e-2};
    case DType::f16:
      return {4e-3, 4e-3};
    case DType::f32:
      return {1e-4, 1e-4};
  }
  return {};
}

namespace {

template <class A, class B>
Comparison compare(const std::string& output, const std::string& against, const std::vector<A>& got,
                   const std::vector<B>& want, Tolerance tol) {
  Comparison c{output, against, 0, 0, 0, static_cast<std::int64_t>(want.size()), true, tol};
  if (got.size() != want.size()) {
    c.ok = false;
    c.mismatches = c.elements;
    return c;
  }
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    const double err = std::abs(g - w);
    if (!(err <= tol.atol + tol.rtol * std::abs(w))) {
      ++c.mismatches;  // NaN counts as mismatch
    } else if (err > tol.rtol * std::abs(w)) {
      ++c.within_atol_only;
    }
    if (!(err <= c.max_abs_error)) c.max_abs_error = err;
    const double rel = err / std::max(std::abs(w), 1e-6);
    if (!(rel <= c.max_rel_error)) c.max_rel_error = rel;
  }
  c.ok = c.mismatches == 0;
  return c;
}

}  // namespace

Comparison compare_outputs(const std::string& output, const std::string& against,
                           const std::vector<float>& got, const std::vector<double>& want,
                           Tolerance tol) {
  return compare(output, against, got, want, tol);
}

Comparison compare_outputs(const std::string& output, const std::string& against,
                           const std::vector<float>& got, const std::vector<float>& want,
                           Tolerance tol) {
  return compare(output, against, got, want, tol);
}

bool VerifyResult::ok() const {
  for (const auto& c : comparisons) {
    if (!c.ok) return false;
  }
  return true;
}

std::string VerifyResult::summary() const {
  std::ostringstream out;
  out << op << "/" << variant << ": "
      << (!checked() ? "NOT CHECKED (nothing was compared)"
          : ok()     ? "OK"
                     : "FAILED");
  for (const auto& c : comparisons) {
    out << "\n  " << c.output << " vs " << c.against << ": max_abs=" << c.max_abs_error
        << " max_rel=" << c.max_rel_error << " mismatches=" << c.mismatches << "/" << c.elements;
  }
  return out.str();
}

std::vector<VerifyResult> verify_op(Backend& backend, const std::string& op,
                                    const ShardShape& shard, std::int64_t tokens, DType dtype,
                                    std::uint64_t seed, bool with_reference,
                                    std::int64_t reference_rows, const TensorSource* weights) {
  const OpInfo& info = find_op(op);
  const Tolerance tol = tolerance_for(dtype);
  std::map<std::string, std::vector<float>> baseline;
  ReferenceOutputs reference;
  std::int64_t rows = with_reference ? tokens : 0;
  std::vector<VerifyResult> results;
  const std::vector<std::string> variants = variants_for(info, shard);
  for (const auto& variant : variants) {
    Plan plan = build_plan(op, variant, shard, tokens, dtype);
    const bool missing = std::any_of(plan.outputs.begin(), plan.outputs.end(),
                                     [&](const auto& o) { return !reference.count(o.first); });
    if (with_reference && missing) {
      // Once, unless a variant has an output the others lack (gpt-oss's interleaved gate_up);
      // the first rows only, when asked and when every output has one row per token.
      const bool per_token_rows =
          std::all_of(plan.outputs.begin(), plan.outputs.end(),
                      [&](const auto& out) { return out.second.rows == tokens; });
      rows =
          reference_rows > 0 && reference_rows < tokens && per_token_rows ? reference_rows : tokens;
      // The moe op's first rows are routed as in the whole shape (a routing of `rows` tokens
      // alone may differ): the reference reads the whole shape's routing. The head is built
      // routed uniformly where a routing file fixes the token count (it has no plan at `rows`).
      ShardShape head_shard = shard;
      head_shard.moe = file_routing_as_uniform(shard.moe);
      Plan head = rows < tokens ? build_plan(op, variant, head_shard, rows, dtype) : plan;
      if (plan.moe) head.moe = plan.moe;
      reference = info.reference(head, logical_inputs(head, seed, weights, /*windows_only=*/true));
    }
    Workspace ws(backend, plan, seed, weights);
    ws.run();
    VerifyResult result{op, variant, {}, rows};
    for (const auto& [name, view] : ws.plan().outputs) {
      auto got = ws.read(view);
      if (variant == variants.front()) {
        baseline[name] = got;
      } else if (baseline.count(name)) {  // outputs both variants have
        result.comparisons.push_back(compare(name, variants.front(), got, baseline.at(name), tol));
      }
      if (with_reference) {
        // Row-major [tokens, cols]: the first `rows` rows are the first rows*cols values.
        const std::vector<float> head(got.begin(),
                                      got.begin() + static_cast<std::ptrdiff_t>(rows * view.cols));
        result.comparisons.push_back(compare(name, "float64", head, reference.at(name), tol));
      }
    }
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace fusebench
