#include "sweep.hpp"

#include <algorithm>
#include <stdexcept>

#include "comm/tp_run.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/tp.hpp"
#include "measure/timing_policy.hpp"
#include "sweep_checks.hpp"

namespace fusebench::bench {

std::string Fixture::name() const {
  return data_name() + (timing.empty() ? "" : "/timing:" + timing);
}

std::string Fixture::data_name() const {
  return op + "/" + variant + "/model:" + model.name + "/tokens:" + std::to_string(tokens) +
         "/tp:" + std::to_string(shard.tp) + "/dtype:" + std::string(to_string(dtype)) +
         (comm.empty() ? "" : "/comm:" + comm);
}

std::string Fixture::group_key() const {
  Fixture f = *this;
  f.variant.assign(1, '*');  // (not = "*": a GCC 12 -Wrestrict false positive)
  return f.name();
}

std::string Fixture::group_data_key() const {
  Fixture f = *this;
  f.variant.assign(1, '*');  // (not = "*": a GCC 12 -Wrestrict false positive)
  f.timing.clear();
  return f.name();
}

std::string Fixture::baseline_variant() const { return find_op(op).variants.front(); }

TpMember tp_member(const Fixture& f, std::size_t index) {
  return {f.op, f.variant, f.shard, f.tokens, f.dtype, f.comm, static_cast<std::int32_t>(index)};
}

Sweep build_sweep(const Options& o, const Backend& backend, const CommSettings* comm) {
  const bool gpu = backend.name() != "cpu";
  Sweep s;
  // Defaults: the GPU sweep covers decode to long prefill on every preset; the CPU sweep is
  // sized to finish in about a minute on two cores.
  std::vector<std::string> model_names = o.models;
  if (model_names.empty() && o.model_configs.empty()) {
    model_names =
        gpu ? std::vector<std::string>{"qwen3-0.6b", "llama3-8b", "qwen3-32b", "llama3-70b"}
            : std::vector<std::string>{"qwen3-0.6b"};
  }
  for (const auto& name : model_names) s.models.push_back(find_model(name));
  for (const auto& path : o.model_configs) s.models.push_back(load_hf_config(path));

  s.ops = o.ops;
  if (s.ops.empty()) {
    for (const auto& op : op_registry()) {
      if (!is_tp_op(op.name)) s.ops.push_back(op.name);  // TP ops and collectives on request
    }
  }
  if (o.collective_sweep) {
    for (const char* c : {"allreduce", "allgather"}) {
      if (std::find(s.ops.begin(), s.ops.end(), c) == s.ops.end()) s.ops.push_back(c);
    }
  }
  s.tokens = o.tokens;
  if (s.tokens.empty()) {
    if (gpu) {
      for (std::int64_t m = 1; m <= 16384; m *= 2) s.tokens.push_back(m);
    } else {
      s.tokens = {1, 4, 16, 64, 256, 1024};
    }
  }
  for (auto m : s.tokens) {
    if (m < 1)
      throw std::invalid_argument("--tokens: " + std::to_string(m) + " is invalid (must be >= 1)");
  }
  s.tp = o.tp;
  std::vector<std::string> dtype_names = o.dtypes;
  if (dtype_names.empty())
    dtype_names = gpu ? std::vector<std::string>{"bf16"} : std::vector<std::string>{"fp32", "bf16"};
  for (const auto& d : dtype_names) {
    const DType dtype = parse_dtype(d);
    if (auto why = backend.unsupported_reason(dtype); !why.empty()) {
      throw std::invalid_argument("--dtypes: " + d + " is not supported here: " + why);
    }
    s.dtypes.push_back(dtype);
  }
  // Timing regimes (docs/timing.md). GPU default batch,eager: the two the decomposition needs,
  // sized so the default sweep fits a device check of a few minutes; cold and graph on request.
  s.timing = o.timing;
  if (s.timing.empty())
    s.timing = gpu ? std::vector<std::string>{"batch", "eager"} : std::vector<std::string>{"eager"};
  for (const auto& t : s.timing) {
    if (measure::regime_needs_gpu(measure::parse_regime(t)) && !gpu) {
      throw std::invalid_argument("--timing: " + t + " needs a GPU (this run uses the " +
                                  backend.name() + " backend, which supports eager only)");
    }
  }

  for (const auto& model : s.models) {
    for (int tp : s.tp) {
      const ShardShape shard_shape = shard(model, tp);  // throws with the valid tp sizes
      for (const auto& op_name : s.ops) {
        const OpInfo& op = find_op(op_name);
        if (is_collective_op(op.name) && tp == 1) continue;  // nothing to exchange
        std::vector<std::string> variants;
        for (const auto& variant : op.variants) {
          if (!o.variants.empty() &&
              std::find(o.variants.begin(), o.variants.end(), variant) == o.variants.end()) {
            continue;
          }
          // One-launch variants (grouped/batched GEMM) where the backend cannot issue them as one
          // launch: skipped by default, refused when asked for (timing them would mislead).
          if (const auto caveat = backend.one_launch_gemm_caveat(); !caveat.empty()) {
            const Plan probe = build_plan(op.name, variant, shard_shape, 1, s.dtypes.front());
            const bool one_launch = std::any_of(
                probe.steps.begin(), probe.steps.end(),
                [](const Step& st) { return std::holds_alternative<GroupedGemmStep>(st); });
            if (one_launch && o.variants.empty()) continue;
            if (one_launch)
              throw std::invalid_argument("--variants: " + variant +
                                          " is not timed here: " + caveat);
          }
          variants.push_back(variant);
        }
        // Variant innermost: a comparison group's members are adjacent.
        for (DType dtype : s.dtypes) {
          for (auto m : s.tokens) {
            for (const auto& t : s.timing) {
              for (const auto& variant : variants)
                s.fixtures.push_back({op.name, variant, model, shard_shape, m, dtype, t});
            }
          }
        }
      }
    }
  }
  check_variants_exist(o.variants, s.ops);
  // Which communicator each TP fixture uses (comm/tp_run.hpp); empty for the other ops.
  for (auto& f : s.fixtures)
    f.comm = resolve_comm(comm ? *comm : CommSettings{}, backend, f.op, f.shard.tp);
  if (s.fixtures.empty())
    throw std::invalid_argument("the sweep is empty: check --ops and --variants");
  return s;
}

}  // namespace fusebench::bench
