#include "run_context.hpp"

#include "checkpoint_weights.hpp"
#include "fusebench/model_context.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/report.hpp"
#include "quant_fields.hpp"

namespace fusebench::bench {

nlohmann::json fixture_fields(const Fixture& f, const Backend& backend) {
  nlohmann::json fields = {{"op", f.op},
                           {"variant", f.variant},
                           {"model", f.model.name},
                           {"layer", f.layer.empty() ? "none" : f.layer},
                           {"bias", op_has_bias(f.op, f.shard)},
                           {"activation", activation_name(f.op, f.shard)},
                           {"tokens", f.tokens},
                           {"tp", f.shard.tp},
                           {"dtype", f.dtype_name()},
                           {"backend", backend.name()}};
  if (f.quant) add_quant_description(f, backend, fields);
  if (!f.comm.empty()) fields["comm"] = f.comm;
  fields["weights"] = f.weights.empty() ? "none" : f.weights;
  if (f.checkpoint) {
    fields["weights_conversion"] = conversion_text(*f.checkpoint, f.dtype);
    fields["weights_conversion_exact"] = conversion_exact(*f.checkpoint, f.dtype);
  }
  return fields;
}

nlohmann::json run_context(const Sweep& sweep, const Backend& backend, const RunDescription& run) {
  nlohmann::json context = collect_context(backend.context(), run.args);
  context["cpu_threads"] = run.cpu_threads;
  context["backend_reason"] = run.backend_reason;
  context["seed"] = run.seed;
  if (!run.benchmark_context.empty()) context["benchmark_context"] = run.benchmark_context;
  // How each model was read: family, vLLM class, layers, what a fixture stands for, refusals.
  for (std::size_t i = 0; i < sweep.models.size(); ++i) {
    nlohmann::json m = model_context(sweep.models[i]);
    m["weights"] = sweep.checkpoints[i] ? "checkpoint" : "random";
    context["models"].push_back(std::move(m));
  }
  // Where the weights come from: random, or each checkpoint's layer (docs/checkpoints.md).
  context["weights"] = weights_context(sweep);
  for (const auto& r : sweep.refused)
    context["refused"].push_back({{"model", r.model}, {"op", r.op}, {"reason", r.reason}});
  context["counter_definitions"] = {
      {"model_flops", "matmul FLOPs of the plan per iteration (2*M*N*K per GEMM)"},
      {"model_bytes",
       "minimal bytes per iteration: each step reads its inputs and writes its outputs once"},
      {"model_launches", "kernels (GPU) or library calls (CPU) the plan issues per iteration"},
      {"model_intensity", "model_flops / model_bytes (FLOP/B)"},
      {"flops_per_second", "model_flops / measured time"},
      {"bytes_per_second", "model_bytes / measured time"}};
  return context;
}

}  // namespace fusebench::bench
