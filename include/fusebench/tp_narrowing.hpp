#pragma once
// vLLM's tensor-parallel narrowing of a decoder layer's merged parameters, as a pure function:
// for one rank, which rows (column-parallel: qkv_proj, gate_up_proj) or columns (row-parallel:
// o_proj, down_proj) of each whole logical tensor land where in the rank's parameter. It is the
// arithmetic of QKVParallelLinear / MergedColumnParallelLinear / RowParallelLinear.weight_loader
// (shard_offset, shard_size, start_idx), and the windows fusebench's plans take of the logical
// tensors (BufferSpec::part_windows) must equal it (tests/test_checkpoints.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "fusebench/plan.hpp"
#include "fusebench/shapes.hpp"

namespace fusebench {

struct Narrowing {
  std::string logical;                              // w_q, w_k, ...
  std::int64_t logical_rows = 0, logical_cols = 0;  // the whole tensor
  int dim = 0;                    // 0: output rows (column-parallel), 1: input columns (row)
  std::int64_t param_offset = 0;  // where the shard starts in the rank's parameter (shard_offset)
  std::int64_t size = 0;          // rows or columns of the shard (shard_size)
  std::int64_t start = 0;         // where it starts in the whole tensor (start_idx)

  // The shard as a plan part: its rows and where it sits in the whole tensor.
  std::int64_t part_rows() const { return dim == 0 ? size : logical_rows; }
  BufferSpec::Window window() const {
    return dim == 0 ? BufferSpec::Window{logical_rows, logical_cols, start, 0}
                    : BufferSpec::Window{logical_rows, logical_cols, 0, start};
  }
};

// One rank's merged parameters, each a list of shards in parameter order ([q; k; v], [gate; up]).
// A column-parallel bias (b_q, ...) narrows exactly as its weight's rows; a row-parallel bias
// (b_o, b_down) is whole on every rank and added on rank 0 only.
struct RankNarrowing {
  std::vector<Narrowing> qkv_proj, o_proj, gate_up_proj, down_proj;
};

// Throws std::invalid_argument when tp does not shard the model (shard()'s message) or the rank
// is outside [0, tp).
RankNarrowing vllm_narrowing(const ModelShape& model, int tp, int rank);

}  // namespace fusebench
