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

  // <op>/<variant>/model:<name>/tokens:<M>/tp:<T>/dtype:<d>[/timing:<regime>]
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
};

// Throws std::invalid_argument naming the first bad value (unknown model or op, tp that does not
// divide the heads, dtype the backend lacks, tokens < 1).
// `comm` (tp_fixture.hpp) picks the communicator of the TP fixtures; null: --comm=auto.
Sweep build_sweep(const Options& options, const Backend& backend,
                  const CommSettings* comm = nullptr);

}  // namespace fusebench::bench
