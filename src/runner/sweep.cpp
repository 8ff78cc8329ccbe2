#include "sweep.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>

#include "backends/cuda_scaled_gemm.hpp"
#include "checkpoint_weights.hpp"
#include "comm/tp_run.hpp"
#include "fusebench/checkpoint_router.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/routing.hpp"
#include "fusebench/safetensors.hpp"
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

std::int64_t Fixture::rows() const {
  const OpInfo& info = find_op(op);
  return info.rows ? info.rows(model, shard, tokens) : tokens;
}

nlohmann::json Fixture::rows_json() const {
  const OpInfo& info = find_op(op);
  return info.rows_json ? info.rows_json(model, shard, tokens) : nlohmann::json(nullptr);
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

// What every step of forming the sweep reads: the options, the backend and the plan's target.
struct SweepInputs {
  const Options& o;
  const Backend& backend;
  bool plan_for_gpu = false;  // --list-for=cuda: the sweep a GPU run would form, run nowhere
  bool gpu = false;           // the sweep is a GPU's (the cuda backend, or --list-for=cuda)
  bool ops_asked = false;     // --ops given: an op a model refuses is an error, not left out
  // The backend's (or, for --list-for=cuda, the cuda backend's) refusal of a quantized spec.
  std::string quant_refusal(const QuantSpec& spec) const {
    return plan_for_gpu ? cuda_quant_refusal(spec) : backend.quant_unsupported_reason(spec);
  }
  bool variant_asked(const std::string& variant) const {
    return o.variants.empty() ||
           std::find(o.variants.begin(), o.variants.end(), variant) != o.variants.end();
  }
};

// The registered op of that name, or null (an unknown name is refused where the op is looked up).
const OpInfo* registered_op(const std::string& name) {
  for (const auto& op : op_registry())
    if (op.name == name) return &op;
  return nullptr;
}

void add_refusal_once(Sweep& s, const std::string& model, const std::string& what,
                      const std::string& reason) {
  const bool said = std::any_of(s.refused.begin(), s.refused.end(),
                                [&](const auto& r) { return r.model == model && r.op == what; });
  if (!said) s.refused.push_back({model, what, reason});
}

// The fixtures of `op` on `shard` at each quantized spec: its quantized variants (filtered by
// --variants), or, for an op that has none, an error when asked for by name, else a refusal said
// once.
void add_quant_fixtures(Sweep& s, const SweepInputs& in, const OpInfo& op, const ModelShape& model,
                        const ShardShape& shard,
                        const std::shared_ptr<const HfLayerWeights>& checkpoint,
                        const std::vector<QuantSpec>& specs) {
  if (specs.empty()) return;
  if (in.gpu && !op.quant_refusal_on_cuda.empty()) {  // left out with the reason
    s.refused.push_back(
        {model.name, op.name + " dtype:" + specs.front().name(), op.quant_refusal_on_cuda});
    return;
  }
  if (const std::string why = quant_refusal(op); !why.empty()) {
    if (in.ops_asked) throw std::invalid_argument("--dtypes=" + specs.front().name() + ": " + why);
    add_refusal_once(s, model.name, op.name, why);
    return;
  }
  for (const QuantSpec& spec : specs) {
    for (auto m : s.tokens) {
      for (const auto& t : s.timing) {
        for (const auto& variant : op.quant_variants(spec)) {
          if (!in.variant_asked(variant)) continue;
          // Refused shapes (vLLM's block rule, a bias) are left out here, with the reason.
          try {
            (void)build_plan(op.name, variant, shard, 1, DType::bf16, spec);
          } catch (const std::invalid_argument& e) {
            s.refused.push_back(
                {model.name, op.name + "/" + variant + " dtype:" + spec.name(), e.what()});
            continue;
          }
          // The cuda backend's shape rules (backends/cuda_scaled_gemm.hpp: fp8's K % 16, block
          // scaling's M % 4, ...): left out up front, naming the rule, not failed on the device.
          if (const std::string why = in.gpu ? cuda::plan_refusal(build_plan(
                                                   op.name, variant, shard, m, DType::bf16, spec))
                                             : std::string();
              !why.empty()) {
            add_refusal_once(
                s, model.name,
                op.name + "/" + variant + " dtype:" + spec.name() + " tokens:" + std::to_string(m),
                why);
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
std::vector<QuantSpec> checkpoint_quant_specs(const Sweep& s, std::size_t i,
                                              const SweepInputs& in) {
  const Options& o = in.o;
  if (i >= s.checkpoints.size() || !s.checkpoints[i] || !s.checkpoints[i]->quant()) return {};
  const CheckpointQuant& q = *s.checkpoints[i]->quant();
  const std::string own = q.spec.name();
  std::vector<QuantSpec> out;
  for (const auto& d : o.dtypes) {
    const std::optional<QuantSpec>& asked = d.quant;
    const bool runs =
        asked && (*asked == q.spec ||
                  (asked->dtype == q.spec.dtype && asked->weights == q.spec.weights &&
                   asked->scheme == ActScheme::dynamic && q.spec.scheme == ActScheme::dynamic));
    if (!runs)
      throw std::invalid_argument(
          o.dtype_flag + "=" + d.text + ": --weights " + s.checkpoint_dirs[i] +
          " is a quantized checkpoint (" + q.read_as + "), whose stored codes and scales run at " +
          own + " only (or, with dynamic activations, another activation granularity of the same " +
          "weights): give " + o.dtype_flag + "=" + own + " or leave " + o.dtype_flag + " out");
    if (std::find(out.begin(), out.end(), *asked) == out.end()) out.push_back(*asked);
  }
  if (out.empty()) out.push_back(q.spec);
  for (const QuantSpec& spec : out) {
    if (const std::string why = in.quant_refusal(spec); !why.empty())
      throw std::invalid_argument("--weights " + s.checkpoint_dirs[i] + " (" + spec.name() +
                                  ") cannot run here: " + why);
  }
  return out;
}

// The models: presets (--models, else the backend's default), --model-config files and
// checkpoints (--weights), each name once. Returns the preset names, the first models.
std::vector<std::string> add_models(Sweep& s, const SweepInputs& in) {
  const Options& o = in.o;
  // Defaults: the GPU sweep covers decode to long prefill on every preset; the CPU sweep is
  // sized to finish in about a minute on two cores.
  std::vector<std::string> model_names = o.models;
  if (model_names.empty() && o.model_configs.empty() && o.weights.empty()) {
    model_names =
        in.gpu ? std::vector<std::string>{"qwen3-0.6b", "llama3-8b", "qwen3-32b", "llama3-70b"}
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
  // layer; a random-weights model of the same name may run beside it (weights:random). An op
  // that reads every routed expert of the layer asks for them all (the others: --expert's alone).
  const bool all_experts = std::any_of(o.ops.begin(), o.ops.end(), [](const std::string& name) {
    const OpInfo* op = registered_op(name);
    return op && op->reads_all_experts;
  });
  for (const auto& dir : o.weights) {
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
  return model_names;
}

// --ops, else the ops a sweep runs by default; --collective-sweep adds the collectives.
std::vector<std::string> sweep_ops(const Options& o) {
  std::vector<std::string> ops = o.ops;
  if (ops.empty()) {
    for (const auto& op : op_registry())
      if (op.in_default_sweep) ops.push_back(op.name);
  }
  if (o.collective_sweep) {
    for (const auto& op : op_registry()) {
      if (is_collective_op(op.name) && std::find(ops.begin(), ops.end(), op.name) == ops.end())
        ops.push_back(op.name);
    }
  }
  return ops;
}

std::vector<std::int64_t> sweep_tokens(const SweepInputs& in) {
  std::vector<std::int64_t> tokens = in.o.tokens;
  if (tokens.empty()) {
    if (in.gpu) {
      for (std::int64_t m = 1; m <= 16384; m *= 2) tokens.push_back(m);
    } else {
      tokens = {1, 4, 16, 64, 256, 1024};
    }
  }
  for (auto m : tokens) {
    if (m < 1)
      throw std::invalid_argument("--tokens: " + std::to_string(m) + " is invalid (must be >= 1)");
  }
  return tokens;
}

// --dtypes (else the backend's default): the plain dtypes and the quantized specs, in order, each
// checked against the backend.
struct DtypeAxis {
  std::vector<DType> plain;
  std::vector<QuantSpec> quant;
};

// A --dtypes value (parsed with the flag) the backend runs; throws naming it and why not.
void check_dtype(const SweepInputs& in, const DtypeChoice& d) {
  // --list-for=cuda lists a GPU's sweep from the CPU backend: the cuda backend's refusal.
  const std::string why =
      d.quant ? in.quant_refusal(*d.quant) : in.backend.unsupported_reason(*d.plain);
  if (!why.empty())
    throw std::invalid_argument(in.o.dtype_flag + ": " + d.text + " is not supported here: " + why);
}

DtypeAxis sweep_dtypes(const SweepInputs& in) {
  std::vector<DtypeChoice> asked = in.o.dtypes;
  if (asked.empty())
    asked = in.gpu ? std::vector<DtypeChoice>{"bf16"} : std::vector<DtypeChoice>{"fp32", "bf16"};
  DtypeAxis axis;
  for (const auto& d : asked) {
    check_dtype(in, d);
    if (d.plain) {
      axis.plain.push_back(*d.plain);
    } else if (std::find(axis.quant.begin(), axis.quant.end(), *d.quant) == axis.quant.end()) {
      axis.quant.push_back(*d.quant);
    }
  }
  return axis;
}

void add_dtype(std::vector<DType>& dtypes, DType d) {
  if (std::find(dtypes.begin(), dtypes.end(), d) == dtypes.end()) dtypes.push_back(d);
}

// Per model: --dtypes, else the backend's default, or a checkpoint's own dtype (exact); a
// quantized checkpoint runs at its own spec, from its stored codes and scales. Sets s.dtypes.
std::vector<DtypeAxis> model_dtypes(Sweep& s, const SweepInputs& in, const DtypeAxis& asked) {
  std::vector<DtypeAxis> out;
  for (std::size_t i = 0; i < s.models.size(); ++i) {
    if (auto specs = checkpoint_quant_specs(s, i, in); !specs.empty()) {
      out.push_back({{}, std::move(specs)});
      add_dtype(s.dtypes, DType::bf16);
      continue;
    }
    DtypeAxis axis = asked;
    if (s.checkpoints[i] && in.o.dtypes.empty())
      axis.plain = {checkpoint_run_dtype(*s.checkpoints[i], s.checkpoint_dirs[i], in.backend,
                                         in.o.dtype_flag)};
    // Quantized fixtures' activations and outputs are bf16 (as vLLM's FP8 and INT8 linears).
    if (!axis.quant.empty()) add_dtype(s.dtypes, DType::bf16);
    for (DType d : axis.plain) add_dtype(s.dtypes, d);
    out.push_back(std::move(axis));
  }
  return out;
}

// Timing regimes (docs/timing.md). GPU default batch,eager: the two the decomposition needs,
// sized so the default sweep fits a device check of a few minutes; cold and graph on request.
std::vector<std::string> sweep_timing(const SweepInputs& in) {
  using measure::Regime;
  std::vector<Regime> regimes = in.o.timing;
  if (regimes.empty())
    regimes = in.gpu ? std::vector<Regime>{Regime::batch, Regime::eager}
                     : std::vector<Regime>{Regime::eager};
  std::vector<std::string> timing;
  for (const Regime t : regimes) {
    if (measure::regime_needs_gpu(t) && !in.gpu) {
      throw std::invalid_argument(std::string("--timing: ") + measure::to_string(t) +
                                  " needs a GPU (this run uses the " + in.backend.name() +
                                  " backend, which supports eager only)");
    }
    timing.emplace_back(measure::to_string(t));
  }
  return timing;
}

// Each op's per-model set-up (OpInfo::setup: the moe op's routing block and router), per model
// then op, before any fixture is formed: a bad router tensor is bad input naming it.
using ModelPreparers = std::map<std::string, ShardPreparer>;
std::vector<ModelPreparers> setup_ops(const Sweep& s, const SweepInputs& in,
                                      const std::vector<std::string>& presets) {
  // The routing's seed: --seed when given, else 1, so that a routing is the same in every run
  // (only the tensors are fresh).
  const RoutingSource& routing = in.o.routing;
  std::vector<ModelPreparers> out(s.models.size());
  for (std::size_t i = 0; i < s.models.size(); ++i) {
    ModelSetup m;
    m.model = &s.models[i];
    if (i < presets.size()) {
      m.preset = presets[i];
    } else if (i < presets.size() + in.o.model_configs.size()) {
      m.config_path = in.o.model_configs[i - presets.size()];
    }
    m.checkpoint_dir = s.checkpoint_dirs[i];
    if (const auto& layer = s.checkpoints[i]; layer && layer->serves(LayerKind::expert)) {
      m.read_router = [layer, model = m.model](bool correction_bias) {
        try {
          return std::make_shared<const RouterWeights>(
              read_router(layer->checkpoint(), *model, layer->layer(), correction_bias));
        } catch (const CheckpointError& e) {
          throw CheckpointError(std::string("--weights: ") + e.what());
        }
      };
    }
    m.routing = routing;
    m.seed = in.o.seed != 0 ? in.o.seed : 1;
    m.expert_placement = in.o.expert_placement;
    m.redundant_experts = in.o.redundant_experts;
    for (const auto& name : s.ops) {
      const OpInfo* op = registered_op(name);
      if (op && op->setup) out[i][name] = op->setup(m);
    }
  }
  return out;
}

// The bf16 (plain dtype) variants of `op` on `shard` the sweep runs, after --variants and the
// backend's and the op's refusals.
std::vector<std::string> plain_variants(Sweep& s, const SweepInputs& in, const OpInfo& op,
                                        const ModelShape& model, const ShardShape& shard,
                                        DType probe_dtype) {
  std::vector<std::string> variants;
  for (const auto& variant : variants_for(op, shard)) {
    if (!in.variant_asked(variant)) continue;
    // One-launch variants (grouped/batched GEMM) where the backend cannot issue them as one
    // launch: skipped by default, refused when asked for (timing them would mislead).
    if (const auto caveat = in.backend.one_launch_gemm_caveat();
        !caveat.empty() && !in.plan_for_gpu && !op.one_launch_everywhere) {
      const Plan probe = build_plan(op.name, variant, shard, 1, probe_dtype);
      const bool one_launch =
          std::any_of(probe.steps.begin(), probe.steps.end(),
                      [](const Step& st) { return std::holds_alternative<GroupedGemmStep>(st); });
      if (one_launch && in.o.variants.empty()) continue;
      if (one_launch)
        throw std::invalid_argument("--variants: " + variant + " is not timed here: " + caveat);
    }
    if (in.gpu && op.cuda_variant_refusal) {
      if (const std::string why = op.cuda_variant_refusal(shard, variant); !why.empty()) {
        if (!in.o.variants.empty())
          throw std::invalid_argument("--variants: " + op.name + "/" + variant + ": " + why);
        s.refused.push_back({model.name, op.name + "/" + variant, why});
        continue;
      }
    }
    variants.push_back(variant);
  }
  return variants;
}

// The fixtures of one op on one shard of one model at one tp: quantized and plain, the variant
// innermost (a comparison group's members are adjacent).
void add_op_fixtures(Sweep& s, const SweepInputs& in, const OpInfo& op, std::size_t model_index,
                     ShardShape shard, const DtypeAxis& dtypes, const ModelPreparers& prepare) {
  const ModelShape& model = s.models[model_index];
  const auto& checkpoint = s.checkpoints[model_index];
  if (const auto p = prepare.find(op.name); p != prepare.end()) {
    // Left out with the reason, never an error: a sweep over several models runs the rest.
    const std::vector<OpRefusal> refused = p->second(shard, dtypes.quant);
    for (const auto& r : refused) s.refused.push_back({model.name, r.what, r.reason});
    if (!refused.empty()) return;
  }
  if (is_collective_op(op.name) && shard.tp == 1) return;  // nothing to exchange
  // A checkpoint's decoder layer holds some of the model's layers (an MoE model's dense layers
  // hold no experts): the others are left out, once, with the reason.
  const LayerKind kind = is_attention_op(op.name) ? shard.attention : shard.mlp;
  if (checkpoint && !is_collective_op(op.name) && !checkpoint->serves(kind)) {
    add_refusal_once(s, model.name, op.name + " layer:" + std::string(to_string(kind)),
                     checkpoint->not_served_reason(kind));
    return;
  }
  add_quant_fixtures(s, in, op, model, shard, checkpoint, dtypes.quant);
  if (dtypes.plain.empty()) return;  // only quantized dtypes asked for
  const std::vector<std::string> variants =
      plain_variants(s, in, op, model, shard, dtypes.plain.front());
  for (DType dtype : dtypes.plain) {
    for (auto m : s.tokens) {
      for (const auto& t : s.timing) {
        for (const auto& variant : variants) {
          Fixture f{op.name, variant, model, shard, m, dtype, t};
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

// An op the model refuses: an error when asked for by name, like any bad input; else left out,
// said once. An op with a per-model set-up and no layer on the model says why, when asked.
void check_model_ops(Sweep& s, const SweepInputs& in, std::size_t model_index,
                     const ModelPreparers& prepare) {
  const ModelShape& model = s.models[model_index];
  for (const auto& op_name : s.ops) {
    if (const std::string why = model.refusal(op_name); !why.empty()) {
      if (in.ops_asked)
        throw std::invalid_argument("--ops: " + op_name + " cannot run on " + model.name + ": " +
                                    why);
      s.refused.push_back({model.name, op_name, why});
    }
  }
  if (!in.ops_asked) return;
  for (const auto& [op_name, preparer] : prepare) {
    if (!op_layers(op_name, model).empty()) continue;
    ShardShape none;
    for (const auto& r : preparer(none, {})) s.refused.push_back({model.name, r.what, r.reason});
  }
}

// The last checks, once every fixture is formed: --variants, each TP fixture's communicator,
// names, an empty sweep, sizes and checkpoint shapes.
void finish_sweep(Sweep& s, const SweepInputs& in, const CommSettings* comm) {
  check_variants_exist(in.o.variants, s.ops);
  // Which communicator each TP fixture uses (comm/tp_run.hpp); empty for the other ops.
  for (auto& f : s.fixtures)
    f.comm = resolve_comm(comm ? *comm : CommSettings{}, in.backend, f.op, f.shard.tp);
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
}

}  // namespace

// The product of the axes (model, tp, op and its layers, dtype, tokens, regime, variant), less
// what the ops refuse: the sweep knows no op by name (OpInfo says what each needs).
Sweep build_sweep(const Options& o, const Backend& backend, const CommSettings* comm) {
  SweepInputs in{o, backend};
  in.plan_for_gpu = o.list && o.list_for == "cuda";
  in.gpu = backend.name() != "cpu" || in.plan_for_gpu;
  in.ops_asked = !o.ops.empty();
  Sweep s;
  const std::vector<std::string> presets = add_models(s, in);
  s.ops = sweep_ops(o);
  s.tokens = sweep_tokens(in);
  s.tp = o.tp;
  const std::vector<DtypeAxis> dtypes = model_dtypes(s, in, sweep_dtypes(in));
  s.timing = sweep_timing(in);
  const std::vector<ModelPreparers> prepare = setup_ops(s, in, presets);
  for (std::size_t i = 0; i < s.models.size(); ++i) {
    check_model_ops(s, in, i, prepare[i]);
    for (int tp : s.tp) {
      // One shard per layer the op runs on (throws with the valid tp sizes).
      for (const auto& [op_name, shard] : op_layer_shards(s.models[i], tp, s.ops))
        add_op_fixtures(s, in, find_op(op_name), i, shard, dtypes[i], prepare[i]);
    }
  }
  finish_sweep(s, in, comm);
  return s;
}

}  // namespace fusebench::bench
