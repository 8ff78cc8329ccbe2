#pragma once
// The measurement passes that run after the timed pass of every fixture, each a separate run of
// the same region: launch counting (CUPTI Activity API on CUDA, library calls on the CPU) and
// DRAM bytes (CUPTI Range Profiler, CUDA only). What cannot be measured is reported unavailable
// with the reason, never as 0.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusebench/backend.hpp"
#include "fusebench/counters.hpp"

namespace fusebench {

struct CounterPassOptions {
  bool launch_counts = true;        // --launch-counts=on|off
  bool dram_counters = true;        // --dram-counters=on|off
  int launch_count_iterations = 2;  // region runs per launch-count pass (GPU)
  std::string backend_reason;       // why this backend was chosen, quoted in reasons
};

struct CounterPasses {
  std::vector<std::unique_ptr<CounterCollector>> collectors;
  // Run-level summary for the report context: counter -> "available" | "unavailable: <why>".
  nlohmann::json status = nlohmann::json::object();
  // How the passes are set up: CUPTI version, chip, metric names, replay passes, NVTX.
  nlohmann::json setup = nlohmann::json::object();
};

// Probes what this process can measure on `backend` (a dry run of each CUPTI pass) and returns
// the passes to run after timing, in order: launch-count, then dram.
CounterPasses make_counter_passes(Backend& backend, const CounterPassOptions& options);

// Definitions of the measured counters, for the report context.
nlohmann::json measured_counter_definitions();

// Adds launches_vs_model (launches / model_launches) and bytes_vs_model ((dram_read_bytes +
// dram_write_bytes) / model_bytes) where their inputs were measured; where an input is
// unavailable the ratio is unavailable with the same reason. A pass that saw nothing of a region
// the model says does work (0 launches, or 0 DRAM and L2 bytes) measured nothing: its counters
// become unavailable with that reason instead of reporting 0.
void add_model_ratios(RegionCounters& counters, double model_launches, double model_bytes);

}  // namespace fusebench
