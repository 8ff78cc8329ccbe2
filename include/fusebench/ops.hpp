#pragma once
// The registry of ops (qkv, gate_up, ...) and their variants (split, fused, ...).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusebench/plan.hpp"
#include "fusebench/quant.hpp"
#include "fusebench/routing.hpp"

namespace fusebench {

// Where a model of the sweep came from and the run's choices an op's per-model set-up reads
// (the moe op: the routing rule in its config, the router in its checkpoint, --routing, --seed).
struct ModelSetup {
  const ModelShape* model = nullptr;
  std::string preset;          // the preset's name, or "" for a config or a checkpoint
  std::string config_path;     // the config.json it was read from, or "" for a preset
  std::string checkpoint_dir;  // --weights as given, or ""
  // The checkpoint layer's router, read on request (with e_score_correction_bias when asked);
  // null where the model has no checkpoint or its layer holds no routed experts. Throws
  // CheckpointError naming a missing or misshapen tensor.
  std::function<std::shared_ptr<const RouterWeights>(bool correction_bias)> read_router;
  RoutingSource routing;
  std::uint64_t seed = 1;
  // Expert parallelism (the tp_moe op): --expert-placement (linear | round_robin) and
  // --redundant-experts (EPLB's replicas; 0: none).
  std::string expert_placement = "linear";
  std::int64_t redundant_experts = 0;
};

// Something the sweep leaves out, and why: `what` is the op, or the op with a variant or a
// dtype ("moe dtype:fp8:block").
struct OpRefusal {
  std::string what, reason;
};

// Completes a shard of one model for an op (the moe op attaches its routing block) and returns
// what it refuses there (empty: the shard runs); given the sweep's quantized specs, it may name
// a spec's own refusal beside the op's.
using ShardPreparer =
    std::function<std::vector<OpRefusal>(ShardShape&, const std::vector<QuantSpec>&)>;

// Host values of the logical tensors a plan reads, rounded to the plan's dtype.
using LogicalTensors = std::map<std::string, std::vector<float>>;
// Reference outputs in float64, keyed like Plan::outputs.
using ReferenceOutputs = std::map<std::string, std::vector<double>>;

// The float64 reference a quantized entry's output rows are compared with (its quant_error,
// docs/quant.md): the plan whose OpInfo::reference is the unquantized product, on the logical
// tensors' windows the plan reads, or on the whole logical tensors (`whole_tensors`).
struct AccuracyReference {
  Plan plan;
  bool whole_tensors = false;
};

// What a plan is built at: the dtype of its activations and outputs, and where it runs quantized
// (fp8, int8: docs/quant.md) the spec of its GEMMs. One builder per op reads it: a quantized
// variant is the same builder with a spec on the plan, not a second builder.
struct PlanRequest {
  DType dtype = DType::f32;
  std::optional<QuantSpec> quant = std::nullopt;
};

struct OpInfo {
  std::string name;
  std::string description;
  std::vector<std::string> variants;  // the first one is the baseline ("split")
  // The op's one builder, quantized or not (`request.quant`); a quantized request reaches it
  // only where quant_variants is set.
  std::function<Plan(const ShardShape&, std::int64_t tokens, const PlanRequest& request,
                     const std::string& variant)>
      build;
  // Unsharded semantics of the op computed in float64 from the logical tensors.
  std::function<ReferenceOutputs(const Plan& plan, const LogicalTensors& inputs)> reference;
  // Whether `variant` exists for this shard (fused_bias_kernel only where there is a bias);
  // null: every variant does.
  std::function<bool(const ShardShape&, const std::string& variant)> has_variant = nullptr;
  // Quantized variants (fp8, int8: docs/quant.md) for a spec, the baseline first; null where the
  // op has none yet (build is then never asked for a quantized plan). The plan's dtype is that of
  // the activations and outputs.
  std::function<std::vector<std::string>(const QuantSpec&)> quant_variants = nullptr;
  // The quantized variant whose shards keep their own weight scales: the reference of the other
  // variants' quant_error_vs_split (moe: per_expert_split).
  std::string quant_split = "split";
  // The reference of a quantized entry's accuracy, given its measured plan and the rows compared
  // (the moe op: the measured plan's first rows, routed as in the whole shape; the TP pipelines:
  // the unsharded layer pair); null: the entry's op and variant built again at `rows` tokens.
  std::function<AccuracyReference(const Plan& measured, std::int64_t rows)> quant_reference =
      nullptr;
  // How `variant` merges its shards' weight scales (the entry's quant.shard_fusion); null: the
  // projections' rule (quant_split: one weight per shard; fused_channelwise: channelwise; others:
  // max-scale requantization of per-tensor scales, row and block scales stacked).
  std::function<std::string(const QuantSpec&, const std::string& variant)> quant_shard_fusion =
      nullptr;

  // What the sweep asks of the op (docs/adding-an-op.md). The runner names no op: it reads these.
  // Whether a sweep without --ops runs it (the TP pipelines, the collectives and moe, whose
  // every expert's weights are 1.2 GB for qwen3-30b-a3b in bf16, run on request).
  bool in_default_sweep = true;
  // The flags only this op reads (moe: --routing): given without an op that reads them, the run
  // is refused naming them, not run with the flag dropped.
  std::vector<std::string> own_flags = {};
  // Whether it reads every routed expert of a checkpoint's layer (else --expert's alone).
  bool reads_all_experts = false;
  // Whether its one-launch variants (grouped GEMMs) are what its comparison is about on every
  // backend: then they run where the backend has no single-launch grouped GEMM.
  bool one_launch_everywhere = false;
  // Per-model set-up, once per model of a sweep that runs the op; null: nothing to set up.
  std::function<ShardPreparer(const ModelSetup&)> setup = nullptr;
  // Why a quantized fixture of the op cannot run on cuda ("": it can).
  std::string quant_refusal_on_cuda = {};
  // Why `variant` cannot run on cuda for `shard` ("": it can); null: every variant can.
  std::function<std::string(const ShardShape&, const std::string& variant)> cuda_variant_refusal =
      nullptr;
  // The rows its GEMMs run for `tokens` tokens of `model` (null: the tokens), and how they were
  // drawn for the entry (null json where they are the tokens).
  std::function<std::int64_t(const ModelShape&, const ShardShape&, std::int64_t tokens)> rows =
      nullptr;
  std::function<nlohmann::json(const ModelShape&, const ShardShape&, std::int64_t tokens)>
      rows_json = nullptr;
  // Fields an entry of a plan of this op adds (moe: its routing and padding); null: none.
  std::function<void(const Plan&, nlohmann::json& fields)> entry_fields = nullptr;
  // Whether its plans run on tp ranks together, with collectives (the TP pipelines, the
  // collectives, tp_moe): the runner starts the ranks and the verifier runs every rank.
  bool across_ranks = false;
  // The variant whose tp = 1 plan every rank's "out" is also compared with, on the same backend
  // ("": none; the float64 reference alone).
  std::string unsharded_variant = "paired";
  // The plan whose logical tensors the reference reads, for a rank's plan that holds only some
  // of them (an expert-parallel rank holds its experts); null: the plan itself.
  std::function<Plan(const Plan&)> reference_plan = nullptr;
  // The float64 reference of the first `rows` rows of each of a rank's outputs (a row-sharded
  // output: its first rows, padding rows zero), for a plan whose token count cannot be lowered
  // (tp_moe under a routing file that fixes it: the verifier's budget then caps the rows checked,
  // not the tokens run). Takes the inputs (logical tensors of reference_plan) to slice them.
  std::function<ReferenceOutputs(const Plan&, LogicalTensors inputs, std::int64_t rows)>
      reference_head = nullptr;
};

const std::vector<OpInfo>& op_registry();
// The variants of `op` that exist for `shard`, baseline first.
std::vector<std::string> variants_for(const OpInfo& op, const ShardShape& shard);

// qkv-like ops run on the attention projections (layer attention | mla), MLP-like ops on one MLP
// layer (dense | expert | shared_expert); the collectives on neither.
bool is_attention_op(std::string_view op);
bool is_mlp_op(std::string_view op);
// The layers `op` benchmarks on `model`, in order; empty when the model refuses the op
// (model.refusal(op) says why) or for the collectives.
std::vector<LayerKind> op_layers(std::string_view op, const ModelShape& model);
// The `layer:` value of a fixture of `op` on `shard` ("" for the collectives).
std::string layer_name(std::string_view op, const ShardShape& shard);
// Whether the fixture's GEMMs carry a bias, and its gated activation ("none" for attention ops
// and the collectives): the entry fields `bias` and `activation`.
bool op_has_bias(std::string_view op, const ShardShape& shard);
std::string activation_name(std::string_view op, const ShardShape& shard);
// Throws std::invalid_argument naming the op and listing the valid ones.
const OpInfo& find_op(std::string_view name);
Plan build_plan(std::string_view op, const std::string& variant, const ShardShape& shard,
                std::int64_t tokens, DType dtype);
// The same at a quantized spec when `quant` holds one; throws std::invalid_argument naming the op
// where it has no quantized variants.
Plan build_plan(std::string_view op, const std::string& variant, const ShardShape& shard,
                std::int64_t tokens, DType dtype, const std::optional<QuantSpec>& quant);
Plan build_plan(std::string_view op, const std::string& variant, const ShardShape& shard,
                std::int64_t tokens, const PlanRequest& request);
// "" when `op` runs quantized, else why not (the op named).
std::string quant_refusal(const OpInfo& op);

}  // namespace fusebench
