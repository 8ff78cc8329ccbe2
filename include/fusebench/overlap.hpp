#pragma once
// Communication of a TP pipeline, per collective kind and exposed versus hidden: how much of the
// collectives' time the pipeline's compute covers (the overlap variant, docs/tp.md). Pure
// functions; the TP run engine feeds them its measurements (or the link model).
#include <map>
#include <span>
#include <vector>

#include "fusebench/cost_model.hpp"
#include "fusebench/link_model.hpp"
#include "fusebench/plan.hpp"

namespace fusebench {

struct CommSplit {
  double exposed_s = 0;        // communication not covered by compute: what it adds to compute
  double hidden_s = 0;         // communication covered by compute
  double hidden_fraction = 0;  // hidden / communication; 0 without communication
};
// From measurements of one pipeline: `pipeline_s` the timed pipeline, `compute_s` its compute
// alone (collectives skipped), `comm_s` its collectives timed one by one. exposed = pipeline -
// compute, clamped to [0, comm_s] (noise can put the difference outside).
CommSplit split_communication(double pipeline_s, double compute_s, double comm_s);

// The plan's steps scheduled on their lanes (plan.hpp StepOrder) with the given durations: a
// lane runs its steps in plan order; a step starts when its lane is free and every step it
// waits for has finished. For the overlap variant this is, per phase, the first chunk's
// collective (the pipeline fill), then per chunk the larger of its GEMM and the next chunk's
// collective, then the last chunk's GEMM (or collective).
struct PlanTimeline {
  std::vector<double> start, finish;  // per step
  double makespan_s = 0;
  double compute_s = 0;  // the steps that are not collectives, summed
  double comm_s = 0;     // the collectives, summed
  CommSplit split;       // split_communication(makespan_s, compute_s, comm_s)
};
// Throws std::invalid_argument when step_seconds does not hold one duration per step.
PlanTimeline plan_timeline(const Plan& plan, std::span<const double> step_seconds);

// Durations for plan_timeline: every collective priced by the link model over plan.shard.tp
// ranks, and `compute_s` (the plan's measured compute) shared among the other steps in
// proportion to their roofline time at `ceilings` (equal shares when the ceilings are unknown).
std::vector<double> modelled_step_seconds(const Plan& plan, double compute_s,
                                          const Ceilings& ceilings, const LinkProfile& link);

// Per collective kind: calls, nccl-tests bytes (cost_model.hpp CollectiveCall) and bytes one
// rank moves on a ring (wire_bytes).
struct KindTraffic {
  int calls = 0;
  double bytes = 0;
  double wire_bytes = 0;
};
std::map<CollectiveKind, KindTraffic> collective_traffic(const Plan& plan);

}  // namespace fusebench
