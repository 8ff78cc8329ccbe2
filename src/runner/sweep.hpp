#pragma once
// The sweep: the cartesian product of the axes (model, tp, op, dtype, tokens, regime, variant),
// validated before anything runs. The variant is the innermost axis, so the members of a
// comparison group (the variants of one op at one shape, dtype and regime, measured interleaved)
// are adjacent.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fusebench/backend.hpp"
#include "fusebench/hf_layer.hpp"
#include "fusebench/quant.hpp"
#include "fusebench/shapes.hpp"
#include "run_options.hpp"

namespace fusebench {
struct CommSettings;
struct TpMember;
}  // namespace fusebench

namespace fusebench::bench {

struct Fixture {
  std::string op;
  std::string variant;
  ModelShape model;
  ShardShape shard;
  std::int64_t tokens = 0;
  DType dtype = DType::bf16;
  std::string timing;  // regime (docs/timing.md); empty: none named
  std::string comm;    // TP ops: none|inprocess|mpi|nccl|modelled (comm/tp_run.hpp); else empty
  std::string layer;   // attention|mla|dense|expert|shared_expert (layer_name); empty: none
  // Where the weights come from: random | checkpoint (the name's weights: segment); empty: no
  // segment (the collectives, which hold no weights).
  std::string weights;
  std::shared_ptr<const HfLayerWeights> checkpoint;  // the layer of `weights:checkpoint`
  // A quantized fixture (fp8, int8: docs/quant.md): its spec names the dtype segment; `dtype` is
  // then that of its activations and outputs (bf16).
  std::optional<QuantSpec> quant;
  std::string dtype_name() const;
  // The rows its GEMMs run: `tokens`, except for gate_up's layer:expert fixture, whose one
  // routed expert gets tokens * top_k / E_active rows, E_active the experts the tokens hit on
  // average under uniform routing (at least 1; routing.hpp expected_active_experts): what one
  // expert of the layer computes, not the M tokens the layer sees (docs/models.md).
  std::int64_t rows() const;
  // Where rows() is not tokens' count, how it was drawn (the entry's `expert_rows`); else null.
  nlohmann::json rows_json() const;
  // The plan this fixture runs (build_plan at its spec when quantized), at rows().
  Plan plan() const;

  // <op>/<variant>/model:<name>[/layer:<layer>]/tokens:<M>/tp:<T>/dtype:<d>[/weights:<w>]
  // [/comm:<c>][/timing:<regime>]; the layer and weights segments are absent only for the
  // collectives.
  std::string name() const;
  // The weights' source for a Workspace: the checkpoint's layer, or null (the seeded generator).
  const TensorSource* weight_source() const { return checkpoint.get(); }
  // name() without the timing segment: the regimes of one fixture share its buffers.
  std::string data_name() const;
  // name() with the variant segment "*": the fixtures of one comparison group share it.
  std::string group_key() const;
  // group_key() without the timing segment: the groups of one shape share their workspaces.
  std::string group_data_key() const;
  // The op's baseline variant (its first: split, naive), which speedups are relative to.
  std::string baseline_variant() const;
};

// What the ranks of a TP run need to know about fixture `index` of the sweep.
TpMember tp_member(const Fixture& fixture, std::size_t index);

struct Sweep {
  std::vector<ModelShape> models;
  // One per model: the checkpoint layer its weights come from (--weights), null for random.
  std::vector<std::shared_ptr<const HfLayerWeights>> checkpoints;
  std::vector<std::string> checkpoint_dirs;  // one per model: --weights as given ("" for random)
  std::vector<std::string> ops;
  std::vector<std::int64_t> tokens;
  std::vector<int> tp;
  std::vector<DType> dtypes;        // every dtype some model runs in
  std::vector<std::string> timing;  // regimes, innermost axis
  std::vector<Fixture> fixtures;
  // Default ops a model refuses (docs/models.md): {model, op, reason}; an op asked for with
  // --ops that a model refuses is an error instead. Layers a checkpoint's decoder layer does
  // not hold (an MoE model's experts in a dense layer) are left out too: op "<op> layer:<l>".
  struct Refusal {
    std::string model, op, reason;
  };
  std::vector<Refusal> refused;
};

// The shards the sweep runs `op` on for `model` at `tp`, one per layer (op_layers); throws like
// shard() for a tp that does not divide a layer.
std::vector<ShardShape> op_shards(const ModelShape& model, int tp, const std::string& op);
// {op, shard} for every op of `ops` and every layer it runs on.
std::vector<std::pair<std::string, ShardShape>> op_layer_shards(
    const ModelShape& model, int tp, const std::vector<std::string>& ops);

// Throws std::invalid_argument naming the first bad value (unknown model or op, tp that does not
// divide the heads, dtype the backend lacks, tokens < 1).
// `comm` (comm/tp_run.hpp) picks the communicator of the TP fixtures; null: --comm=auto.
Sweep build_sweep(const Options& options, const Backend& backend,
                  const CommSettings* comm = nullptr);

}  // namespace fusebench::bench
