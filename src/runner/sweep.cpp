#include "sweep.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "checkpoint_weights.hpp"
#include "comm/tp_run.hpp"
#include "fusebench/checkpoint_router.hpp"
#include "fusebench/input_files.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/routing.hpp"
#include "fusebench/tp.hpp"
#include "measure/timing_policy.hpp"
#include "preflight.hpp"
#include "sweep_checks.hpp"

namespace fusebench::bench {

std::string Fixture::name() const {
  return data_name() + (timing.empty() ? "" : "/timing:" + timing);
}

std::string Fixture::data_name() const {
  return op + "/" + variant + "/model:" + model.name + (layer.empty() ? "" : "/layer:" + layer) +
         "/tokens:" + std::to_string(tokens) + "/tp:" + std::to_string(shard.tp) +
         "/dtype:" + dtype_name() + (weights.empty() ? "" : "/weights:" + weights) +
         (comm.empty() ? "" : "/comm:" + comm);
}

std::string Fixture::dtype_name() const {
  return quant ? quant->name() : std::string(to_string(dtype));
}

static bool routed_expert_rows(const Fixture& f) {
  return f.op == "gate_up" && f.shard.mlp == LayerKind::expert && f.model.experts > 0 &&
         f.model.experts_per_token > 0;
}

std::int64_t Fixture::rows() const {
  if (!routed_expert_rows(*this)) return tokens;
  const double active = expected_active_experts(tokens, model.experts, model.experts_per_token);
  const double per_expert = static_cast<double>(tokens * model.experts_per_token) / active;
  return std::max<std::int64_t>(1, std::llround(per_expert));
}

nlohmann::json Fixture::rows_json() const {
  if (!routed_expert_rows(*this)) return nullptr;
  return {{"rows", rows()},
          {"tokens", tokens},
          {"experts", model.experts},
          {"top_k", model.experts_per_token},
          {"expected_active_experts",
           expected_active_experts(tokens, model.experts, model.experts_per_token)},
          {"rule",
           "one routed expert's rows: tokens * top_k / expected_active_experts (uniform "
           "routing), rounded, at least 1; the whole block at its real routing is the moe op"}};
}

Plan Fixture::plan() const { return build_plan(op, variant, shard, rows(), dtype, quant); }

std::vector<ShardShape> op_shards(const ModelShape& model, int tp, const std::string& op) {
  std::vector<ShardShape> out;
  for (LayerKind layer : op_layers(op, model)) out.push_back(shard(model, tp, layer));
  return out;
}

std::vector<std::pair<std::string, ShardShape>> op_layer_shards(
    const ModelShape& model, int tp, const std::vector<std::string>& ops) {
  std::vector<std::pair<std::string, ShardShape>> out;
  for (const auto& op : ops) {
    for (const auto& s : op_shards(model, tp, op)) out.emplace_back(op, s);
  }
  return out;
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
  return {f.op,
          f.variant,
          f.shard,
          f.tokens,
          f.dtype,
          f.comm,
          static_cast<std::int32_t>(index),
          f.weight_source()};
}

namespace {

// The fixtures of `op` on `shard` at each quantized spec: its quantized variants (filtered by
// --variants), or, for an op that has none, an error when asked for by name, else a refusal said
// once.
void add_quant_fixtures(Sweep& s, const Options& o, const OpInfo& op, const ModelShape& model,
                        const ShardShape& shard,
                        const std::shared_ptr<const HfLayerWeights>& checkpoint,
                        const std::vector<QuantSpec>& specs, bool ops_asked, bool gpu) {
  if (specs.empty()) return;
  if (gpu && op.name == "moe") {  // left out with the reason, as the bf16 block's refusals
    s.refused.push_back(
        {model.name, "moe dtype:" + specs.front().name(),
         "the quantized moe block runs on the CPU backend only so far: the cuda backend has no "
         "grouped scaled GEMM (per-expert FP8/INT8 scales through cuBLASLt or CUTLASS) yet"});
    return;
  }
  if (const std::string why = quant_refusal(op); !why.empty()) {
    if (ops_asked) throw std::invalid_argument("--dtypes=" + specs.front().name() + ": " + why);
    const bool said = std::any_of(s.refused.begin(), s.refused.end(), [&](const auto& r) {
      return r.model == model.name && r.op == op.name;
    });
    if (!said) s.refused.push_back({model.name, op.name, why});
    return;
  }
  for (const QuantSpec& spec : specs) {
    for (auto m : s.tokens) {
      for (const auto& t : s.timing) {
        for (const auto& variant : op.quant_variants(spec)) {
          if (!o.variants.empty() &&
              std::find(o.variants.begin(), o.variants.end(), variant) == o.variants.end())
            continue;
          // Refused shapes (vLLM's block rule, a bias) are left out here, with the reason.
          try {
            (void)build_plan(op.name, variant, shard, 1, DType::bf16, spec);
          } catch (const std::invalid_argument& e) {
            s.refused.push_back(
                {model.name, op.name + "/" + variant + " dtype:" + spec.name(), e.what()});
            continue;
          }
          Fixture f{op.name, variant, model, shard, m, DType::bf16, t};
          f.weights = checkpoint ? "checkpoint" : "random";
          f.checkpoint = checkpoint;
          f.quant = spec;
          s.fixtures.push_back(std::move(f));
        }
      }
    }
  }
}

// A quantized checkpoint's specs (config.json's quantization_config), checked against --dtypes
// and the backend; empty for other models. Without --dtypes: the checkpoint's own. A --dtypes
// spec runs where it takes the checkpoint's weights as stored (the same dtype and weight scales)
// and, for dynamic activations, another granularity of them (vLLM picks per-tensor or per-token
// for per-tensor FP8 weights by kernel): fp8:tensor:token on a dynamic fp8:tensor checkpoint.
std::vector<QuantSpec> checkpoint_quant_specs(const Sweep& s, std::size_t i, const Options& o,
                                              const Backend& backend) {
  if (i >= s.checkpoints.size() || !s.checkpoints[i] || !s.checkpoints[i]->quant()) return {};
  const CheckpointQuant& q = *s.checkpoints[i]->quant();
  const std::string own = q.spec.name();
  std::vector<QuantSpec> out;
  for (const auto& d : o.dtypes) {
    std::optional<QuantSpec> asked;
    try {
      if (is_quant_spec(d)) asked = parse_quant_spec(d);
    } catch (const std::invalid_argument&) {
    }
    const bool runs =
        asked && (*asked == q.spec ||
                  (asked->dtype == q.spec.dtype && asked->weights == q.spec.weights &&
                   asked->scheme == ActScheme::dynamic && q.spec.scheme == ActScheme::dynamic));
    if (!runs)
      throw std::invalid_argument(
          o.dtype_flag + "=" + d + ": --weights " + s.checkpoint_dirs[i] +
          " is a quantized checkpoint (" + q.read_as + "), whose stored codes and scales run at " +
          own + " only (or, with dynamic activations, another activation granularity of the same " +
          "weights): give " + o.dtype_flag + "=" + own + " or leave " + o.dtype_flag + " out");
    if (std::find(out.begin(), out.end(), *asked) == out.end()) out.push_back(*asked);
  }
  if (out.empty()) out.push_back(q.spec);
  const bool plan_for_gpu = o.list && o.list_for == "cuda";  // as build_sweep asks
  for (const QuantSpec& spec : out) {
    const std::string why =
        plan_for_gpu ? cuda_quant_refusal(spec) : backend.quant_unsupported_reason(spec);
    if (!why.empty())
      throw std::invalid_argument("--weights " + s.checkpoint_dirs[i] + " (" + spec.name() +
                                  ") cannot run here: " + why);
  }
  return out;
}

}  // namespace

Sweep build_sweep(const Options& o, const Backend& backend, const CommSettings* comm) {
  // --list-for=cuda: the sweep a GPU run would form, listed where there is none (nothing runs).
  const bool plan_for_gpu = o.list && o.list_for == "cuda";
  const bool gpu = backend.name() != "cpu" || plan_for_gpu;
  Sweep s;
  // Defaults: the GPU sweep covers decode to long prefill on every preset; the CPU sweep is
  // sized to finish in about a minute on two cores.
  std::vector<std::string> model_names = o.models;
  if (model_names.empty() && o.model_configs.empty() && o.weights.empty()) {
    model_names =
        gpu ? std::vector<std::string>{"qwen3-0.6b", "llama3-8b", "qwen3-32b", "llama3-70b"}
            : std::vector<std::string>{"qwen3-0.6b"};
  }
  for (const auto& name : model_names) s.models.push_back(find_model(name));
  for (const auto& path : o.model_configs) {
    ModelShape m = load_hf_config(path);
    // Two models with one name would be merged by everything keyed on names (the gate compared
    // two configs as repetitions of one): refuse (docs/models.md, "Model names").
    for (std::size_t i = 0; i < s.models.size(); ++i) {
      if (s.models[i].name != m.name) continue;
      const std::string other = i < model_names.size() ? "the preset " + model_names[i]
                                                       : o.model_configs[i - model_names.size()];
      throw std::invalid_argument("--model-config: " + path + " and " + other +
                                  " both give the model name '" + m.name +
                                  "' (a config's name is its file name unless that is "
                                  "config.json, then _name_or_path, then its folder); rename "
                                  "one file");
    }
    s.models.push_back(std::move(m));
  }
  s.checkpoints.assign(s.models.size(), nullptr);
  s.checkpoint_dirs.assign(s.models.size(), "");
  // Checkpoints (--weights): the model from the directory's config.json, the weights from its
  // layer; a random-weights model of the same name may run beside it (weights:random).
  for (const auto& dir : o.weights) {
    // moe reads every routed expert of the layer (the other ops: --expert's alone).
    const bool all_experts = std::find(o.ops.begin(), o.ops.end(), "moe") != o.ops.end();
    CheckpointModel c = open_checkpoint_model(dir, o.layer, o.expert, all_experts);
    for (std::size_t i = 0; i < s.models.size(); ++i) {
      if (s.models[i].name == c.model.name && s.checkpoints[i])
        throw std::invalid_argument("--weights: " + dir + " and " + s.checkpoint_dirs[i] +
                                    " both give the model name '" + c.model.name +
                                    "' (from config.json's _name_or_path, else the directory): "
                                    "rename one directory");
    }
    s.models.push_back(std::move(c.model));
    s.checkpoints.push_back(std::move(c.layer));
    s.checkpoint_dirs.push_back(dir);
  }

  s.ops = o.ops;
  if (s.ops.empty()) {
    for (const auto& op : op_registry()) {
      // TP ops, the collectives and moe (every expert's weights: 1.2 GB for qwen3-30b-a3b in
      // bf16) on request.
      if (!is_tp_op(op.name) && op.name != "moe") s.ops.push_back(op.name);
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
  std::vector<DType> default_dtypes;
  std::vector<QuantSpec> quant_specs;  // the quantized dtypes asked for, in order
  for (const auto& d : dtype_names) {
    if (is_quant_spec(d)) {
      QuantSpec spec;
      try {
        spec = parse_quant_spec(d);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(o.dtype_flag + ": " + e.what());
      }
      // --list-for=cuda lists a GPU's sweep from the CPU backend: the cuda backend's refusal.
      const std::string why =
          plan_for_gpu ? cuda_quant_refusal(spec) : backend.quant_unsupported_reason(spec);
      if (!why.empty())
        throw std::invalid_argument(o.dtype_flag + ": " + d + " is not supported here: " + why);
      if (std::find(quant_specs.begin(), quant_specs.end(), spec) == quant_specs.end())
        quant_specs.push_back(spec);
      continue;
    }
    DType dtype{};
    try {
      dtype = parse_dtype(d);
    } catch (const std::invalid_argument&) {
      // parse_dtype names only the plain dtypes (the region tool takes no others); the sweep
      // also takes the quantized ones (docs/quant.md).
      throw std::invalid_argument(o.dtype_flag + ": unknown dtype '" + d +
                                  "' (valid: bf16, fp16, fp32, fp8, int8; fp8 and int8 take a "
                                  "granularity, e.g. fp8:channel, docs/quant.md)");
    }
    if (auto why = backend.unsupported_reason(dtype); !why.empty()) {
      throw std::invalid_argument(o.dtype_flag + ": " + d + " is not supported here: " + why);
    }
    default_dtypes.push_back(dtype);
  }
  // Per model: --dtypes, else the backend's default, or a checkpoint's own dtype (exact).
  std::vector<std::vector<DType>> model_dtypes;
  std::vector<std::vector<QuantSpec>> model_quant_specs;
  for (std::size_t i = 0; i < s.models.size(); ++i) {
    // A quantized checkpoint runs at its own spec, from its stored codes and scales.
    if (auto specs = checkpoint_quant_specs(s, i, o, backend); !specs.empty()) {
      model_dtypes.emplace_back();
      model_quant_specs.push_back(std::move(specs));
      if (std::find(s.dtypes.begin(), s.dtypes.end(), DType::bf16) == s.dtypes.end())
        s.dtypes.push_back(DType::bf16);
      continue;
    }
    model_quant_specs.push_back(quant_specs);
    model_dtypes.push_back(
        s.checkpoints[i] && o.dtypes.empty()
            ? std::vector<DType>{checkpoint_run_dtype(*s.checkpoints[i], s.checkpoint_dirs[i],
                                                      backend, o.dtype_flag)}
            : default_dtypes);
    // Quantized fixtures' activations and outputs are bf16 (as vLLM's FP8 and INT8 linears).
    if (!quant_specs.empty()) {
      if (std::find(s.dtypes.begin(), s.dtypes.end(), DType::bf16) == s.dtypes.end())
        s.dtypes.push_back(DType::bf16);
    }
    for (DType d : model_dtypes.back()) {
      if (std::find(s.dtypes.begin(), s.dtypes.end(), d) == s.dtypes.end()) s.dtypes.push_back(d);
    }
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

  // The moe op's routing rule per model, read from the config it came from (a preset's excerpt,
  // a --model-config file, a checkpoint's config.json), and the routing's seed: --seed when given,
  // else 1, so that a routing is the same in every run (only the tensors are fresh).
  const RoutingSource routing = parse_routing(o.routing);
  const std::uint64_t routing_seed = o.seed != 0 ? o.seed : 1;
  // A checkpoint's router (--weights, --routing=router, moe asked): read before anything runs, so
  // that a missing or misshapen router tensor is bad input naming it (a model whose rule is
  // refused is left out by moe_refusal instead).
  std::vector<std::shared_ptr<const RouterWeights>> routers(s.models.size());
  const bool moe_asked = std::find(s.ops.begin(), s.ops.end(), "moe") != s.ops.end();
  for (std::size_t i = 0; i < s.models.size(); ++i) {
    const auto& layer = s.checkpoints[i];
    if (!layer || !moe_asked || routing.kind != RoutingKind::router ||
        !layer->serves(LayerKind::expert))
      continue;
    const std::string path = s.checkpoint_dirs[i] + "/config.json";
    RoutingRule rule;
    try {
      rule = routing_rule_from_config(read_input_file(path, "the checkpoint config"), path);
    } catch (const std::invalid_argument&) {
      continue;  // moe_refusal says why
    }
    try {
      routers[i] = std::make_shared<const RouterWeights>(
          read_router(layer->checkpoint(), s.models[i], layer->layer(), rule.correction_bias));
    } catch (const CheckpointError& e) {
      throw CheckpointError(std::string("--weights: ") + e.what());
    }
  }
  const auto moe_block = [&](std::size_t model_index) {
    const ModelShape& model = s.models[model_index];
    auto b = std::make_shared<MoeBlock>();
    b->router = routers[model_index];
    if (model_index < model_names.size()) {
      b->rule = routing_rule_for_preset(model_names[model_index]);
      b->config_name = "the preset " + model_names[model_index];
    } else {
      const std::string path = model_index < model_names.size() + o.model_configs.size()
                                   ? o.model_configs[model_index - model_names.size()]
                                   : s.checkpoint_dirs[model_index] + "/config.json";
      b->rule = routing_rule_from_config(read_input_file(path, "the model config"), path);
      b->config_name = path;
    }
    b->source = routing;
    b->seed = routing_seed;
    for (const auto& l : model.mlp_layer_list())
      if (l.kind == LayerKind::shared_expert) b->shared_intermediate = l.intermediate;
    return std::shared_ptr<const MoeBlock>(std::move(b));
  };
  // Why the moe op cannot run for a model here ("" when it can).
  const auto moe_refusal = [&](std::size_t model_index, int tp) -> std::string {
    const ModelShape& model = s.models[model_index];
    if (op_layers("moe", model).empty()) return "the model has no routed experts";
    try {
      ShardShape sh = shard(model, tp, LayerKind::expert);
      sh.moe = moe_block(model_index);
      // A routing file is checked where it is used, at the sweep's own token counts (a
      // tokens_per_expert file fits one M): this probe at M=1 routes uniformly.
      if (sh.moe->source.kind == RoutingKind::file) {
        auto probe = std::make_shared<MoeBlock>(*sh.moe);
        probe->source.kind = RoutingKind::uniform;
        sh.moe = std::move(probe);
      }
      build_plan("moe", "per_expert", sh, 1, DType::f32);  // the block's own refusals
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return {};
  };

  const bool ops_asked = !o.ops.empty();
  for (std::size_t model_index = 0; model_index < s.models.size(); ++model_index) {
    const ModelShape& model = s.models[model_index];
    const auto& checkpoint = s.checkpoints[model_index];
    const std::vector<DType>& dtypes = model_dtypes[model_index];
    for (const auto& op_name : s.ops) {
      if (const std::string why = model.refusal(op_name); !why.empty()) {
        // Asked for by name: an error, like any bad input; else the op is left out, said once.
        if (ops_asked)
          throw std::invalid_argument("--ops: " + op_name + " cannot run on " + model.name + ": " +
                                      why);
        s.refused.push_back({model.name, op_name, why});
      }
    }
    // moe on a model without routed experts: op_layers gives it no shard; said once, when asked.
    if (ops_asked && std::find(s.ops.begin(), s.ops.end(), "moe") != s.ops.end() &&
        op_layers("moe", model).empty())
      s.refused.push_back({model.name, "moe", moe_refusal(model_index, 1)});
    for (int tp : s.tp) {
      // One shard per layer the op runs on (throws with the valid tp sizes).
      for (auto [op_name, shard_shape] : op_layer_shards(model, tp, s.ops)) {
        const OpInfo& op = find_op(op_name);
        if (op.name == "moe") {
          // Left out with the reason, never an error: a sweep over dense and MoE models, or a
          // GPU sweep, runs the rest (a sweep left empty says why).
          if (const std::string why = moe_refusal(model_index, tp); !why.empty()) {
            s.refused.push_back({model.name, "moe", why});
            // A quantized spec's own refusal where it says more: vLLM's block rule at tp > 1
            // (Qwen3-30B-A3B's 768-wide experts at tp 8: 96 per rank).
            for (const QuantSpec& spec : model_quant_specs[model_index]) {
              try {
                ShardShape q = shard_shape;
                q.moe = moe_block(model_index);
                build_plan("moe", "per_expert", q, 1, DType::bf16, spec);
              } catch (const std::invalid_argument& e) {
                if (why != e.what())
                  s.refused.push_back({model.name, "moe dtype:" + spec.name(), e.what()});
              }
            }
            continue;
          }
          shard_shape.moe = moe_block(model_index);
        }
        if (is_collective_op(op.name) && tp == 1) continue;  // nothing to exchange
        // A checkpoint's decoder layer holds some of the model's layers (an MoE model's dense
        // layers hold no experts): the others are left out, once, with the reason.
        const LayerKind kind = is_attention_op(op.name) ? shard_shape.attention : shard_shape.mlp;
        if (checkpoint && !is_collective_op(op.name) && !checkpoint->serves(kind)) {
          const std::string what = op.name + " layer:" + std::string(to_string(kind));
          const bool said = std::any_of(s.refused.begin(), s.refused.end(), [&](const auto& r) {
            return r.model == model.name && r.op == what;
          });
          if (!said) s.refused.push_back({model.name, what, checkpoint->not_served_reason(kind)});
          continue;
        }
        add_quant_fixtures(s, o, op, model, shard_shape, checkpoint, model_quant_specs[model_index],
                           ops_asked, gpu);
        if (dtypes.empty()) continue;  // only quantized dtypes asked for
        std::vector<std::string> variants;
        for (const auto& variant : variants_for(op, shard_shape)) {
          if (!o.variants.empty() &&
              std::find(o.variants.begin(), o.variants.end(), variant) == o.variants.end()) {
            continue;
          }
          // One-launch variants (grouped/batched GEMM) where the backend cannot issue them as one
          // launch: skipped by default, refused when asked for (timing them would mislead).
          // moe's grouped and padded are what its comparison is about on every backend (the CPU's
          // grouped GEMM: one parallel region, docs/measured.md).
          if (const auto caveat = backend.one_launch_gemm_caveat();
              !caveat.empty() && !plan_for_gpu && op.name != "moe") {
            const Plan probe = build_plan(op.name, variant, shard_shape, 1, dtypes.front());
            const bool one_launch = std::any_of(
                probe.steps.begin(), probe.steps.end(),
                [](const Step& st) { return std::holds_alternative<GroupedGemmStep>(st); });
            if (one_launch && o.variants.empty()) continue;
            if (one_launch)
              throw std::invalid_argument("--variants: " + variant +
                                          " is not timed here: " + caveat);
          }
          // cuBLAS's grouped and pointer-array batched GEMMs have no bias epilogue, and no kernel
          // adds every active expert's bias yet: with expert biases (gpt-oss) only the loops run.
          if (gpu && op.name == "moe" && shard_shape.mlp_bias &&
              (variant == "grouped" || variant == "padded")) {
            const std::string why =
                "expert biases on cuda: cublasGemmGroupedBatchedEx and cublasGemmBatchedEx have "
                "no bias epilogue, and a kernel adding every expert's bias is not built yet";
            if (!o.variants.empty())
              throw std::invalid_argument("--variants: moe/" + variant + ": " + why);
            s.refused.push_back({model.name, "moe/" + variant, why});
            continue;
          }
          variants.push_back(variant);
        }
        // Variant innermost: a comparison group's members are adjacent.
        for (DType dtype : dtypes) {
          for (auto m : s.tokens) {
            for (const auto& t : s.timing) {
              for (const auto& variant : variants) {
                Fixture f{op.name, variant, model, shard_shape, m, dtype, t};
                if (!is_collective_op(op.name)) {  // the collectives hold no weights
                  f.weights = checkpoint ? "checkpoint" : "random";
                  f.checkpoint = checkpoint;
                }
                s.fixtures.push_back(std::move(f));
              }
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
  for (auto& f : s.fixtures) f.layer = layer_name(f.op, f.shard);  // the name's layer: segment
  if (s.fixtures.empty()) {
    std::string left_out;
    for (const auto& r : s.refused)
      left_out += "; " + r.op + " left out for " + r.model + ": " + r.reason;
    throw std::invalid_argument(
        "the sweep is empty: check --ops and --variants (fused_bias_kernel exists only for "
        "models with a bias; docs/models.md)" +
        left_out);
  }
  // Sizes that overflow are refused before anything is listed or allocated (preflight.hpp).
  check_sizes(s.fixtures);
  // Every checkpoint fixture's weights are there at the shapes its plans ask for (no data read).
  check_checkpoint_fixtures(s.fixtures);
  return s;
}

}  // namespace fusebench::bench
