#pragma once
// The sweep: the cartesian product of the axes (model, tp, op, dtype, tokens, regime, variant),
// validated before anything runs. The variant is the innermost axis, so the members of a
// comparison group (the variants of one op at one shape, dtype and regime, measured interleaved)
// are adjacent.
#include <cstdint>
#include <string>
#include <vector>

#include "fusebench/backend.hpp"
#include "fusebench/shapes.hpp"
#include "options.hpp"

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

  // <op>/<variant>/model:<name>/tokens:<M>/tp:<T>/dtype:<d>[/timing:<regime>]
  std::string name() const;
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
  std::vector<std::string> ops;
  std::vector<std::int64_t> tokens;
  std::vector<int> tp;
  std::vector<DType> dtypes;
  std::vector<std::string> timing;  // regimes, innermost axis
  std::vector<Fixture> fixtures;
};

// Throws std::invalid_argument naming the first bad value (unknown model or op, tp that does not
// divide the heads, dtype the backend lacks, tokens < 1).
// `comm` (comm/tp_run.hpp) picks the communicator of the TP fixtures; null: --comm=auto.
Sweep build_sweep(const Options& options, const Backend& backend,
                  const CommSettings* comm = nullptr);

}  // namespace fusebench::bench
