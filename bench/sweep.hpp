#pragma once
// The sweep: the cartesian product of the axes (model, op, variant, tokens, tp, dtype), validated
// before anything runs.
#include <cstdint>
#include <string>
#include <vector>

#include "fusebench/backend.hpp"
#include "fusebench/shapes.hpp"
#include "options.hpp"

namespace fusebench::bench {

struct CommSettings;

struct Fixture {
  std::string op;
  std::string variant;
  ModelShape model;
  ShardShape shard;
  std::int64_t tokens = 0;
  DType dtype = DType::bf16;
  std::string timing;  // regime (docs/timing.md); empty: none named
  std::string comm;    // TP ops: none|inprocess|mpi|nccl|modelled (tp_fixture.hpp); else empty
  std::string layer;   // attention|mla|dense|expert|shared_expert (layer_name); empty: none

  // <op>/<variant>/model:<name>[/layer:<layer>]/tokens:<M>/tp:<T>/dtype:<d>[/comm:<c>]
  // [/timing:<regime>]; the layer segment is absent only for the collectives.
  std::string name() const;
  // name() without the timing segment: the regimes of one fixture share its buffers.
  std::string data_name() const;
};

struct Sweep {
  std::vector<ModelShape> models;
  std::vector<std::string> ops;
  std::vector<std::int64_t> tokens;
  std::vector<int> tp;
  std::vector<DType> dtypes;
  std::vector<std::string> timing;  // regimes, innermost axis
  std::vector<Fixture> fixtures;
  // Default ops a model refuses (docs/models.md): {model, op, reason}; an op asked for with
  // --ops that a model refuses is an error instead.
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
// `comm` (tp_fixture.hpp) picks the communicator of the TP fixtures; null: --comm=auto.
Sweep build_sweep(const Options& options, const Backend& backend,
                  const CommSettings* comm = nullptr);

}  // namespace fusebench::bench
