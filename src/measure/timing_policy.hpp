#pragma once
// Pure decisions of the timing regimes, kept apart from the device code so they are unit-tested:
// how many rotating copies of a fixture's buffers keep its weights out of the cache, how many
// runs make one sample, and how a fused-vs-split difference decomposes into host launch cost,
// device per-kernel overhead and bytes.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace fusebench::measure {

enum class Regime { cold, batch, eager, graph };
Regime parse_regime(const std::string& text);  // throws std::invalid_argument listing valid ones
const char* to_string(Regime regime);
// True for regimes that need a GPU stream (blocking kernel, events, graphs).
bool regime_needs_gpu(Regime regime);

struct Rotation {
  std::size_t sets = 1;      // copies of the buffers cycled through, run after run
  bool covers_cache = true;  // false when the memory budget or max_sets stopped short
  std::string reason;        // why this many, for the report
};
// One set when the cache size is unknown or one set already exceeds it (then no run can hit a
// previous run's lines); otherwise enough sets that the other sets' bytes are at least twice
// the cache between two uses of a set, within `memory_budget` bytes and `max_sets`.
Rotation rotation_sets(std::size_t bytes_per_set, std::size_t cache_bytes,
                       std::size_t memory_budget, std::size_t max_sets = 64);

// Runs per sample: enough for a sample of about `target_sample_s` given one run's estimated
// time, at most `max_runs` (the batch regime's queue behind the blocking kernel is bounded).
std::int64_t runs_per_sample(double run_estimate_s, double target_sample_s, std::int64_t max_runs);

// Runs of a region that may queue behind the blocking kernel: the launch queue is bounded and a
// full one blocks the host until the kernel's timeout, so at most 128 launches, counting twice
// the model's launches per run (cuBLAS may add split-K reduce kernels and memsets). At least 1.
std::int64_t max_runs_behind_block(int model_launches_per_run);

// Per-run times of one variant at one shape.
struct VariantTimes {
  double eager_s = 0;   // host wall time per run, launches included
  double device_s = 0;  // device time per run (batch regime, or cold when batch was not run)
  double bytes = 0;     // model_bytes of the plan
  int launches = 0;     // model_launches of the plan
};

// baseline - variant, each part positive when the variant saves time. By construction
//   total = host_launch + bytes + device_overhead
// where total = eager(base) - eager(var); host_launch = (eager - device)(base) - (eager -
// device)(var); device = device(base) - device(var); bytes = bytes_saved / bandwidth (the time
// the saved traffic costs at the measured copy bandwidth); device_overhead = device - bytes
// (per-kernel fixed cost, tails and occupancy: what fewer launches save on the device).
struct Decomposition {
  double total_s = 0;
  double host_launch_s = 0;
  double device_s = 0;
  double bytes_saved = 0;
  double bytes_s = 0;
  double device_overhead_s = 0;
  int launches_saved = 0;
  std::optional<double> device_overhead_per_launch_s;  // when launches_saved > 0
  std::optional<double> host_launch_per_launch_s;
};
// Throws std::invalid_argument when bandwidth <= 0 or a time is not positive.
Decomposition decompose(const VariantTimes& baseline, const VariantTimes& variant,
                        double bandwidth);
nlohmann::json to_json(const Decomposition& d);

}  // namespace fusebench::measure
