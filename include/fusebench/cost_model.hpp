#pragma once
// Analytic cost of a plan: FLOPs, minimal bytes, launches, and the roofline that follows.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusebench/link_model.hpp"
#include "fusebench/plan.hpp"

namespace fusebench {

// model_flops counts matmul FLOPs (2*M*N*K per GEMM). model_bytes is the minimal traffic: every
// step reads each input once and writes each output once (a GEMM moves (MK + NK + MN) elements,
// plus N with a bias epilogue; act-and-mul 3*M*N; a separate bias add 2*M*N + N; RMSNorm
// 2*M*N + N; a quantize M*K in + M*K bytes out + its scales; a scaled GEMM one byte per
// operand element, both scale grids and M*N out, and for int8 its int32 accumulator written and
// read back (8*M*N); the moe op's row gather reads each routed row
// and writes every row, its scatter-add reads the row and the destination row and writes it; a
// weight several members of one grouped step read, padded's blocks of one expert, counts once).
// Collective bytes are kept apart in comm_bytes.
struct Cost {
  double flops = 0;
  double bytes = 0;
  double comm_bytes = 0;       // nccl-tests sizes of the plan's collectives (per rank)
  double comm_wire_bytes = 0;  // what they move per rank on a ring: size * bus factor (below)
  int launches = 0;            // kernels the plan issues (library calls on CPU)
  int gemm_launches = 0;
  int elementwise_launches = 0;
  int collective_launches = 0;
  int quantize_launches = 0;  // of elementwise_launches: activation quantize kernels

  double arithmetic_intensity() const { return bytes > 0 ? flops / bytes : 0; }
};

Cost cost_of(const Plan& plan);

// Launches of one scaled GEMM (ScaledGemmStep), on every backend: 1 for fp8 (the scales applied
// inside the GEMM: cuBLASLt's scale modes); 2 for int8, the s8 x s8 -> s32 GEMM and then a
// dequantize pass (int32 x row scale x column scale -> the output dtype): cuBLASLt's int8 matmul
// takes no per-row or per-column scales, so the cuda backend launches its own dequantize kernel,
// and the CPU backend counts its host scaling loop as that second call. The first is counted in
// gemm_launches, the second in elementwise_launches.
int scaled_gemm_launches(QuantDType dtype);

// A collective step as nccl-tests names it: kind and size in bytes (all-reduce: the buffer;
// all-gather, along columns or rows: the gathered total; reduce-scatter: the input total, tp
// times what each rank keeps). nullopt for a step that is not a collective.
struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::all_reduce;
  double bytes = 0;
};
std::optional<CollectiveCall> collective_call(const Step& step, DType dtype);
// Bytes one rank sends (and receives) for `call` on a ring of `ranks`: bytes * bus_factor, i.e.
// 2(n-1)/n of the buffer for an all-reduce, (n-1)/n of the full tensor for an all-gather or a
// reduce-scatter (so an all-reduce moves what a reduce-scatter plus an all-gather move).
double wire_bytes(const CollectiveCall& call, int ranks);

struct Ceilings {
  double peak_flops = 0;  // FLOP/s
  double bandwidth = 0;   // bytes/s
  std::string source;     // "measured", "nominal:<gpu>", ...
  double ridge() const { return bandwidth > 0 ? peak_flops / bandwidth : 0; }
};

// One step's share of a plan's cost, in plan order (step_costs), and what kind of step it is, as
// step profiles name them: gemm, scaled_gemm (a quantized GEMM with its scale epilogue),
// activation, bias, norm, quantize, gather, combine, gate, collective.
struct StepCostEntry {
  std::string_view kind;
  double flops = 0, bytes = 0, comm_bytes = 0;
};
std::vector<StepCostEntry> step_costs(const Plan& plan);

// Roofline time of a plan: each step bound by max(flops/peak, bytes/bandwidth), summed, plus
// `per_launch_s` for every launch.
double roofline_seconds(const Plan& plan, const Ceilings& ceilings, double per_launch_s = 0);

// Smallest token count at which the plan `plan_at(tokens)` turns compute-bound (its arithmetic
// intensity reaches the ridge), found by bisection over tokens in [1, max_tokens]; returns -1 if
// never. (The caller builds the plan: the cost model knows plans, not ops.)
std::int64_t predicted_compute_bound_tokens(const std::function<Plan(std::int64_t)>& plan_at,
                                            const Ceilings& ceilings,
                                            std::int64_t max_tokens = 1 << 20);

}  // namespace fusebench
