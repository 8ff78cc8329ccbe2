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
#include "run_options.hpp"
#include "sweep.hpp"

namespace fusebench::bench {

// Everything the timing engine needs for a run, owned here so main only wires it up.
struct TimingSetup {
  std::unique_ptr<measure::DeviceTiming> device;
  std::unique_ptr<measure::MeasuredCeilings> ceilings;
  std::unique_ptr<measure::CeilingsLog> ceilings_log;  // what the report publishes
  std::unique_ptr<measure::RunDelayProbe> run_delay;   // preempted samples (contention.hpp)
  RunnerSettings settings;
};
// The CPU GEMM libraries' threads for the whole run (--cpu-threads; measure/contention.hpp),
// set before anything runs a GEMM (the ceilings, verification and the sweep use them); the
// choice and its reason for context["cpu_threads"]. A GPU backend runs no CPU GEMM: noted.
nlohmann::json apply_cpu_thread_policy(const Options& options, Backend& backend);
TimingSetup setup_timing(const Options& options, Backend& backend, const Sweep& sweep,
                         nlohmann::json& context);

}  // namespace fusebench::bench
