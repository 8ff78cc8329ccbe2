#pragma once
// From the --timing-* flags to the timing engine's settings: applies --gemm-algo, measures the
// ceilings (once per run, with the SM clock under load), fills the stopping rule (backend
// defaults where a flag is not given) and describes it all in context["timing"] and
// context["ceilings"] (docs/timing.md).
#include <memory>
#include <nlohmann/json.hpp>

#include "fusebench/backend.hpp"
#include "group_runner.hpp"
#include "measure/ceilings.hpp"
#include "measure/timing_device.hpp"
#include "options.hpp"
#include "sweep.hpp"

namespace fusebench::bench {

// Everything the timing engine needs for a run, owned here so main only wires it up.
struct TimingSetup {
  std::unique_ptr<measure::DeviceTiming> device;
  std::unique_ptr<measure::MeasuredCeilings> ceilings;
  RunnerSettings settings;
};
TimingSetup setup_timing(const Options& options, Backend& backend, const Sweep& sweep,
                         nlohmann::json& context);

}  // namespace fusebench::bench
