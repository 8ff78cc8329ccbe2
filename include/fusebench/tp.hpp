#pragma once
// Tensor-parallel pipelines (tp_attn, tp_mlp) and the collective sweep (allreduce, allgather):
// which ops need a communicator, and their correctness check against the unsharded layer pair.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fusebench/communicator.hpp"
#include "fusebench/verify.hpp"

namespace fusebench {

// Ops whose plans have collective steps at tp > 1 (they need a Communicator).
bool is_tp_op(std::string_view op);
// Ops that are a single collective (the sweep): meaningless at tp = 1.
bool is_collective_op(std::string_view op);

// The same layer unsharded (tp = 1, rank 0), rebuilt from one rank's shard.
ShardShape unsharded(const ShardShape& shard);

// What every rank of one fixture must agree on (everything but the rank).
std::string tp_config_string(const std::string& op, const std::string& variant,
                             const ShardShape& shard, std::int64_t tokens, DType dtype,
                             std::uint64_t seed);

// Runs op/variant as rank comm.rank() of shard.tp on `backend` (after checking that all ranks
// run the same configuration) and compares every output with the float64 reference of the
// unsharded layer pair and, for the pipelines, "out" with the unsharded pipeline (tp = 1) run
// on the same backend. The result's variant reads "<variant>/rank:<r>".
// `weights` (e.g. a checkpoint's layer) replaces the generator's weights on every rank, in the
// unsharded pipeline and in the reference.
VerifyResult verify_tp_rank(Backend& backend, Communicator& comm, const std::string& op,
                            const std::string& variant, ShardShape shard, std::int64_t tokens,
                            DType dtype, std::uint64_t seed, bool with_reference,
                            const TensorSource* weights = nullptr, std::int64_t reference_rows = 0);

// The same for a plan already built for rank comm.rank() (the tests hand it a deliberately wrong
// one, e.g. with the row-parallel bias on every rank, to show the check catches it).
// `reference_rows` (0: all) limits the float64 check to the first rows of each of the rank's
// outputs, for ops with OpInfo::reference_head (throws std::invalid_argument for others).
VerifyResult verify_tp_plan(Backend& backend, Communicator& comm, const Plan& plan,
                            std::uint64_t seed, bool with_reference,
                            const TensorSource* weights = nullptr, std::int64_t reference_rows = 0);

// Runs `body(rank)` on `ranks` threads and rethrows the first failure (after every thread ended).
void run_ranks(int ranks, const std::function<void(int)>& body);

// Every variant of `op`, every rank on its own thread with its own CPU backend and an
// in-process communicator. One result per (variant, rank).
std::vector<VerifyResult> verify_tp_op_inprocess(const std::string& op, const ShardShape& shard,
                                                 std::int64_t tokens, DType dtype,
                                                 std::uint64_t seed, bool with_reference,
                                                 const TensorSource* weights = nullptr,
                                                 std::int64_t reference_rows = 0);
// The quantized pipelines' check (fp8, int8): every rank's outputs against the float64 replay of
// all ranks' plans from the same codes and scales (dequantized_tp_reference), ranks as threads
// of this process on the CPU backend. A variant the shape refuses (vLLM's block rule) is left
// out, as the sweep leaves it out.
std::vector<VerifyResult> verify_quant_tp_inprocess(const std::string& op, const ShardShape& shard,
                                                    std::int64_t tokens, DType dtype,
                                                    const QuantSpec& spec, std::uint64_t seed,
                                                    const TensorSource* weights = nullptr);

}  // namespace fusebench
