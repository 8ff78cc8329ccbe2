#pragma once
// Analytic cost of a plan: FLOPs, minimal bytes, launches, and the roofline that follows.
#include <cstdint>
#include <string>

#include "fusebench/plan.hpp"

namespace fusebench {

// model_flops counts matmul FLOPs (2*M*N*K per GEMM). model_bytes is the minimal traffic: every
// step reads each input once and writes each output once (a GEMM moves (MK + NK + MN) elements,
// plus N with a bias epilogue; act-and-mul 3*M*N; a separate bias add 2*M*N + N). Collective
// bytes are kept apart in comm_bytes.
struct Cost {
  double flops = 0;
  double bytes = 0;
  double comm_bytes = 0;  // payload bytes handed to collectives (per rank)
  int launches = 0;       // kernels the plan issues (library calls on CPU)
  int gemm_launches = 0;
  int elementwise_launches = 0;
  int collective_launches = 0;

  double arithmetic_intensity() const { return bytes > 0 ? flops / bytes : 0; }
};

Cost cost_of(const Plan& plan);

struct Ceilings {
  double peak_flops = 0;  // FLOP/s
  double bandwidth = 0;   // bytes/s
  std::string source;     // "measured", "nominal:<gpu>", ...
  double ridge() const { return bandwidth > 0 ? peak_flops / bandwidth : 0; }
};

// Roofline time of a plan: each step bound by max(flops/peak, bytes/bandwidth), summed, plus
// `per_launch_s` for every launch.
double roofline_seconds(const Plan& plan, const Ceilings& ceilings, double per_launch_s = 0);

// Smallest token count at which the plan turns compute-bound (its arithmetic intensity reaches
// the ridge), found by bisection over tokens in [1, max_tokens]; returns -1 if never.
std::int64_t predicted_compute_bound_tokens(const std::string& op, const std::string& variant,
                                            const ShardShape& shard, DType dtype,
                                            const Ceilings& ceilings,
                                            std::int64_t max_tokens = 1 << 20);

}  // namespace fusebench
