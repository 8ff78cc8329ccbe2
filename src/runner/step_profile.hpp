#pragma once
// An entry's step profile: which kind of step its time goes to (GEMM, activation, quantize,
// gather, combine, ...), and how fast each non-GEMM kind moves its bytes against the machine's
// copy bandwidth, so a reader sees when the glue around the GEMMs, not the GEMMs, decides the
// entry's time.
#include <vector>

#include "fusebench/plan.hpp"
#include "runner/entry_fields.hpp"

namespace fusebench::bench {

// Runs of the plan whose per-step medians the profile reports.
inline constexpr int kStepProfileRuns = 5;

// `seconds`: each step's time alone (Workspace::time_steps), in plan order; `copy_bandwidth`:
// the ceilings' copy bandwidth (0: none measured); `entry_seconds`: the entry's median.
// Adds fields.step_profile and the counter non_gemm_share.
void add_step_profile(const Plan& plan, const std::vector<double>& seconds, double copy_bandwidth,
                      double entry_seconds, EntryResult& r);

}  // namespace fusebench::bench
