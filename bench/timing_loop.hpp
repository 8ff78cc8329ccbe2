#pragma once
// The timed part of a fixture: runs one timing regime (cold, batch, eager, graph) under the
// stopping rule and turns the samples into the entry's time and statistics. Google Benchmark
// mapping: the fixture is registered with Iterations(1); its one iteration is one complete
// measurement, and SetIterationTime gets the median time per run, so real_time is the per-run
// median. The statistics go into counters (time_median, time_cv, samples, ...).
#include <benchmark/benchmark.h>

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusebench/workspace.hpp"
#include "measure/ceilings.hpp"
#include "measure/statistics.hpp"
#include "measure/timing_device.hpp"
#include "measure/timing_policy.hpp"
#include "sweep.hpp"

namespace fusebench::bench {

// Per-run medians seen so far, for the fused-vs-split decomposition.
struct DecompositionLog {
  // key: op/model/tokens/tp/dtype -> variant -> regime -> {median, bytes, launches}
  struct Point {
    double median_s = 0, bytes = 0;
    int launches = 0;
  };
  std::map<std::string, std::map<std::string, std::map<std::string, Point>>> points;
};

struct TimingSettings {
  measure::StoppingRule rule;
  double target_sample_s = 1e-3;  // batch/eager/graph: runs per sample to fill about this much
  // The blocking kernel gives up after this; a correct enqueue of a sample takes about 1 ms.
  double block_timeout_s = 0.5;
  std::size_t cache_bytes = 0;  // last-level cache to defeat by rotation (0: unknown)
  std::size_t rotation_budget_bytes = std::size_t{1} << 30;
  measure::DeviceTiming* device = nullptr;              // null on the CPU
  const measure::MeasuredCeilings* ceilings = nullptr;  // null: no roofline_fraction
  std::shared_ptr<DecompositionLog> log = std::make_shared<DecompositionLog>();
};

// Rotating copies of the fixture's buffers (same bytes, other addresses) and the CUDA graphs
// captured over them; kept across the regimes of one fixture, reset when the fixture changes.
class RotationState {
 public:
  RotationState() = default;
  RotationState(const RotationState&) = delete;
  RotationState& operator=(const RotationState&) = delete;
  ~RotationState() { reset(); }
  void reset();

  struct Set {
    std::vector<void*> buffers;
  };
  Backend* backend = nullptr;
  std::string key;  // fixture data name the sets belong to
  measure::Rotation rotation;
  std::vector<Set> extra;  // sets 1..n-1 (set 0 is the workspace itself)
  std::vector<std::unique_ptr<measure::GraphReplay>> graphs;
};

// Everything the timing regimes need for a run, owned here so main only wires it up.
struct TimingSetup {
  std::unique_ptr<measure::DeviceTiming> device;
  std::unique_ptr<measure::MeasuredCeilings> ceilings;
  TimingSettings settings;
};
// Applies --gemm-algo, measures the ceilings (once per run), fills the stopping rule from the
// options (backend defaults where not given) and describes it all in context["timing"] and
// context["ceilings"].
TimingSetup setup_timing(const Options& options, Backend& backend, const Sweep& sweep,
                         nlohmann::json& context);

// Times `region` (one run of the fixture on `ws`, the set-0 region the runner also gives its
// counter collectors) in the fixture's regime, sets the iteration time and counters, and adds
// fields (timing, stop reason, clock, cache policy, decomposition) to `fields`.
void time_region(benchmark::State& state, const Fixture& fixture, Workspace& ws,
                 const std::function<void()>& region, RotationState& rotation,
                 const TimingSettings& settings, nlohmann::json& fields);

}  // namespace fusebench::bench
