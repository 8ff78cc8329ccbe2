#include "verification.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <set>
#include <tuple>

#include "fusebench/cost_model.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/routing.hpp"
#include "fusebench/tp.hpp"
#include "fusebench/verify.hpp"

namespace fusebench::bench {
namespace {

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2g", v);
  return buf;
}

// Which part of |got - want| <= atol + rtol*|want| decided: "rtol" (every element within
// rtol*|want|), "atol" (some elements near zero pass by atol alone, so the max relative error may
// exceed rtol) or "neither" (mismatches).
const char* within(std::int64_t mismatches, std::int64_t within_atol_only) {
  return mismatches > 0 ? "neither" : within_atol_only > 0 ? "atol" : "rtol";
}

// "qkv/fused: OK (vs split: 3 outputs, max_abs 1.2e-06, within rtol 0.0001; vs float64 on rows
// 1-59 of 1024 rows: 3 outputs, max_abs 2.1e-06, within atol 0.0001: 12/3072 elements near 0
// exceed rtol 0.0001)":
// one line, the worst output per kind of comparison.
// `rank_rows`: the float64 check covers each rank's first output rows (a routing that fixes the
// token count), not the first token rows.
std::string one_line(const VerifyResult& r, std::int64_t tokens, bool rank_rows) {
  std::string line = r.op + "/" + r.variant + ": ";
  if (!r.checked()) return line + "NOT CHECKED (nothing was compared)";
  line += r.ok() ? "OK" : "FAILED";
  std::vector<std::string> kinds;
  for (const auto& c : r.comparisons) {
    if (std::find(kinds.begin(), kinds.end(), c.against) == kinds.end()) kinds.push_back(c.against);
  }
  std::string detail;
  for (const auto& kind : kinds) {
    int outputs = 0;
    double max_abs = 0;
    std::int64_t mismatches = 0, elements = 0, by_atol = 0;
    Tolerance tol;
    for (const auto& c : r.comparisons) {
      if (c.against != kind) continue;
      ++outputs;
      max_abs = std::max(max_abs, c.max_abs_error);
      mismatches += c.mismatches;
      elements += c.elements;
      by_atol += c.within_atol_only;
      tol = c.tolerance;
    }
    const std::string decided = within(mismatches, by_atol);
    std::string tolerance = ", within rtol " + sci(tol.rtol);
    if (decided == "atol") {
      tolerance = ", within atol " + sci(tol.atol) + ": " + std::to_string(by_atol) + "/" +
                  std::to_string(elements) + " elements near 0 exceed rtol " + sci(tol.rtol);
    } else if (decided == "neither") {
      tolerance = " (atol " + sci(tol.atol) + " + rtol " + sci(tol.rtol) + "*|want|)";
    }
    std::string against = "vs " + kind;
    if (kind.rfind("float64", 0) == 0 && r.reference_rows < tokens)
      against += rank_rows ? " on this rank's first " + std::to_string(r.reference_rows) +
                                 " output rows (" + std::to_string(tokens) + " tokens)"
                           : " on rows 1-" + std::to_string(r.reference_rows) + " of " +
                                 std::to_string(tokens) + " rows";
    detail += (detail.empty() ? "" : "; ") + against + ": " + std::to_string(outputs) + " output" +
              (outputs == 1 ? "" : "s") + ", max_abs " + sci(max_abs) +
              (mismatches > 0 ? ", " + std::to_string(mismatches) + "/" + std::to_string(elements) +
                                    " mismatches"
                              : "") +
              tolerance;
  }
  return line + " (" + detail + ")";
}

nlohmann::json to_json(const VerifyResult& r, const Fixture& f, std::int64_t tokens_checked) {
  nlohmann::json j = {{"op", r.op},
                      {"variant", r.variant},
                      {"model", f.model.name},
                      {"layer", f.layer.empty() ? "none" : f.layer},
                      {"weights", f.weights.empty() ? "none" : f.weights},
                      {"tp", f.shard.tp},
                      {"tokens", f.tokens},
                      {"dtype", f.dtype_name()},
                      {"ok", r.ok() && r.checked()},
                      {"float64_reference", r.reference_rows > 0},
                      {"float64_reference_rows", r.reference_rows}};
  if (f.rows() != f.tokens) j["rows"] = f.rows();
  if (tokens_checked != f.rows()) j["tokens_checked"] = tokens_checked;
  j["comparisons"] = nlohmann::json::array();
  std::int64_t mismatches = 0, by_atol = 0;
  for (const auto& c : r.comparisons) {
    j["comparisons"].push_back({{"output", c.output},
                                {"against", c.against},
                                {"max_abs_error", c.max_abs_error},
                                {"max_rel_error", c.max_rel_error},
                                {"mismatches", c.mismatches},
                                {"elements", c.elements},
                                {"atol", c.tolerance.atol},
                                {"rtol", c.tolerance.rtol},
                                {"within", within(c.mismatches, c.within_atol_only)},
                                {"elements_within_atol_only", c.within_atol_only}});
    mismatches += c.mismatches;
    by_atol += c.within_atol_only;
  }
  // Beside max_rel_error, which tolerance passed it (a max_rel_error above rtol with ok=true is
  // atol's doing: elements whose want is near zero).
  if (!r.comparisons.empty()) {
    j["atol"] = r.comparisons.front().tolerance.atol;
    j["rtol"] = r.comparisons.front().tolerance.rtol;
    j["within"] = within(mismatches, by_atol);
    j["elements_within_atol_only"] = by_atol;
  }
  return j;
}

// Multiply-adds per token row of the op's baseline at this shard, unsharded for TP pipelines
// (their reference is the whole layer pair).
// A routing file that fixes the token count (tokens_per_expert) has no plan at 1 token: the
// probe routes uniformly (the same rows per token, k slots each).
double macs_per_row(const Fixture& f) {
  const std::string& baseline = find_op(f.op).variants.front();
  ShardShape s = is_tp_op(f.op) && !is_collective_op(f.op) ? unsharded(f.shard) : f.shard;
  s.moe = file_routing_as_uniform(s.moe);
  return cost_of(build_plan(f.op, baseline, s, 1, f.dtype, f.quant)).flops / 2;
}

}  // namespace

std::int64_t reference_rows(double macs_per_row, std::int64_t tokens) {
  if (!(macs_per_row > 0)) return tokens;
  const double fit = std::floor(kReferenceMacBudget / macs_per_row);
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(std::min(fit, 1e18)), 1, tokens);
}

nlohmann::json verification_policy() {
  return {{"tolerance",
           "an element passes when |got - want| <= atol + rtol*|want| (atol and rtol per dtype, "
           "in each result); within: rtol when every element is within rtol*|want|, atol when "
           "some elements whose want is near zero pass by atol alone (their relative error, and "
           "so max_rel_error, may exceed rtol), neither when elements mismatch"},
          {"shapes",
           "every model, tp, op, dtype and token count of the fixtures this run measures "
           "(after --benchmark_filter); all variants of each op, on one fresh random input, with "
           "the entries' weights (random, or the checkpoint's layer for weights:checkpoint)"},
          {"float64_reference",
           "the op computed in float64 on the host over the first float64_reference_rows token "
           "rows: all rows when that costs at most " +
               sci(kReferenceMacBudget) +
               " multiply-adds, else as many rows as fit (each output row depends on its own "
               "input row alone)"},
          {"tp_pipelines",
           "tp > 1: every rank a CPU thread with the in-process communicator, compared with "
           "the unsharded layer pair and float64; at tokens_checked tokens where the run's "
           "token count would exceed the same budget, except under a routing file that fixes "
           "the token count (tokens_per_expert): then at the run's tokens, each rank's float64 "
           "check over its first float64_reference_rows output rows"}};
}

VerificationRun run_verification(Backend& backend, const std::vector<Fixture>& fixtures,
                                 std::uint64_t seed) {
  VerificationRun run;
  // One check per shape: the variants and regimes of a fixture share it (the layers of one op
  // are shapes of their own: an MoE model's dense, expert and shared_expert gate_up).
  std::set<std::tuple<std::string, std::string, std::string, int, std::string, std::string,
                      std::int64_t>>
      done;
  for (const auto& f : fixtures) {
    if (!done.insert({f.model.name, f.weights, f.layer, f.shard.tp, f.op, f.dtype_name(), f.tokens})
             .second)
      continue;
    // TP pipelines at tp > 1: every rank on a CPU thread with the in-process communicator (a
    // GPU run may have fewer GPUs than ranks); the GEMMs themselves are verified by qkv/gate_up
    // and by the tp = 1 pipelines on this backend.
    const bool tp_on_cpu = is_tp_op(f.op) && f.shard.tp > 1;
    if (tp_on_cpu && !make_cpu_backend()->unsupported_reason(f.dtype).empty()) continue;
    // An expert's gate_up runs its routed rows, not the layer's tokens (Fixture::rows).
    const std::int64_t rows = reference_rows(macs_per_row(f), f.rows());
    // All host work capped: the in-process ranks run at the capped token count, unless the
    // routing fixes it (a tokens_per_expert file routes its M alone): then the ranks run the
    // whole M and each rank's float64 check covers its first `rows` output rows.
    const bool fixed_tokens = f.shard.moe && routing_fixes_tokens(f.shard.moe->source);
    const std::int64_t tokens = tp_on_cpu && !fixed_tokens ? rows : f.rows();
    const std::int64_t tp_reference_rows = fixed_tokens && rows < f.rows() ? rows : 0;
    const auto verified =
        f.quant && tp_on_cpu ? verify_quant_tp_inprocess(f.op, f.shard, tokens, f.dtype, *f.quant,
                                                         seed, f.weight_source())
        : f.quant ? verify_quant_op(backend, f.op, f.shard, f.rows(), f.dtype, *f.quant, seed, rows,
                                    f.weight_source())
        : tp_on_cpu ? verify_tp_op_inprocess(f.op, f.shard, tokens, f.dtype, seed, true,
                                             f.weight_source(), tp_reference_rows)
                    : verify_op(backend, f.op, f.shard, tokens, f.dtype, seed, true, rows,
                                f.weight_source());
    for (const auto& r : verified) {
      std::string where = "verify " + f.model.name + (f.layer.empty() ? "" : " layer:" + f.layer) +
                          (f.weights.empty() ? "" : " weights:" + f.weights) +
                          " tp=" + std::to_string(f.shard.tp) +
                          " tokens=" + std::to_string(f.tokens);
      if (f.rows() != f.tokens) where += " (expert rows " + std::to_string(f.rows()) + ")";
      if (tokens != f.rows()) where += " (checked at " + std::to_string(tokens) + " on the CPU)";
      std::cerr << where << " " << f.dtype_name() << ": "
                << one_line(r, tokens, tp_reference_rows > 0) << "\n";
      run.passed = run.passed && r.ok() && r.checked();
      run.results.push_back(to_json(r, f, tokens));
    }
  }
  return run;
}

}  // namespace fusebench::bench
