#pragma once
// What one run of the suite is asked to do: fusebench's own flags as values, shared by the
// binaries that parse them (bench/) and the runner that carries them out (src/runner/).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fusebench/backend.hpp"
#include "fusebench/dtype.hpp"
#include "fusebench/quant.hpp"
#include "fusebench/routing.hpp"
#include "measure/timing_policy.hpp"

namespace fusebench::bench {

// One --dtypes value, parsed once where the flag is read: a plain dtype or a quantized spec
// (docs/quant.md); what the backend supports is the sweep's to check.
struct DtypeChoice {
  // Throws std::invalid_argument naming the value and the valid forms.
  DtypeChoice(std::string value);  // NOLINT(google-explicit-constructor): o.dtypes = {"fp32"}
  DtypeChoice(const char* value) : DtypeChoice(std::string(value)) {}  // NOLINT
  std::string text;                                                    // as given, for messages
  std::optional<DType> plain;
  std::optional<QuantSpec> quant;
};

// --comm, parsed once where the flag is read: the communicator the TP fixtures ask for
// (resolve_comm, comm/tp_run.hpp, decides what each fixture gets from it).
enum class CommChoice { automatic, nccl, modelled, inprocess, mpi };
// Throws std::invalid_argument naming the value and the valid ones.
CommChoice parse_comm(const std::string& text);
// Its flag value: auto | nccl | modelled | inprocess | mpi.
const char* to_string(CommChoice comm);

// A flag that takes "auto" or a whole count within a range (--cpu-threads, --timing-blocks),
// parsed once where the flag is read.
struct AutoOrCount {
  std::string text = "auto";  // as given, for the report's "requested"
  std::optional<int> count;   // nullopt: auto
  bool is_auto() const { return !count; }
};

struct Options {
  std::string backend = "auto";
  std::vector<std::string> models;         // empty: backend default
  std::vector<std::string> model_configs;  // HF config.json paths
  // Real weights (docs/checkpoints.md): Hugging Face model directories; their config.json gives
  // the model, their layer `layer` (expert `expert` of an MoE layer) its weights.
  std::vector<std::string> weights;
  int layer = -1;                // -1: not given (layer 0)
  std::int64_t expert = -1;      // -1: not given (expert 0)
  std::vector<std::string> ops;  // empty: all
  // Where the moe op's routing comes from (routing.hpp parse_routing): router | uniform |
  // balanced | zipf:S | file:PATH.
  RoutingSource routing;                    // --routing, parsed (default: router)
  std::string expert_placement = "linear";  // --expert-placement (checked when parsed)
  std::int64_t redundant_experts = 0;       // --redundant-experts
  std::vector<std::string> variants;        // empty: all of each op
  std::vector<std::int64_t> tokens;         // empty: backend default
  std::vector<int> tp = {1};
  std::vector<DtypeChoice> dtypes;  // empty: backend default
  // How the front end names the dtype flag in its messages (fusebench-region takes one --dtype).
  std::string dtype_flag = "--dtypes";
  std::string report;        // JSON report path; empty: none
  std::uint64_t seed = 0;    // 0: fresh random seed, recorded in the report
  bool verify = false;       // check every variant before the sweep
  bool verify_only = false;  // check every variant, then stop (nothing timed)
  bool list = false;         // print the fixtures and exit
  // With --list: the sweep as the cuda backend would form it (GPU defaults, regimes and one-launch
  // variants) on a machine without one, and each fixture's buffer bytes and groups (the device
  // check's --plan sizes its steps from them).
  std::string list_for;     // "" | cuda
  bool list_bytes = false;  // name<TAB>bytes<TAB>group_key<TAB>group_data_key
  // Tensor-parallel fixtures (docs/tp.md).
  CommChoice comm = CommChoice::automatic;   // --comm
  std::string link_profile = "nvlink-h200";  // link model of comm:modelled entries
  bool collective_sweep = false;             // add the allreduce and allgather ops
  // Counter passes after timing (docs/counters.md).
  std::string launch_counts = "on";  // on | off: CUPTI activity (GPU) / library calls (CPU)
  std::string dram_counters = "on";  // on | off: CUPTI Range Profiler (GPU)
  // Timing (docs/timing.md). Empty regimes: backend default; negative times: backend default.
  std::vector<measure::Regime> timing;  // cold, batch, eager, graph
  // Relative half-width of the targeted 95% intervals (speedups, else medians) to stop at;
  // negative: backend default (GPU 0.01, CPU 0.03).
  double timing_target_ci = -1;
  double timing_min_time = -1;  // s of measured time before convergence may be declared
  double timing_max_time = -1;  // s of wall time per entry before giving up
  // Seconds between measurements of the ceilings during the run (0: once, at the start);
  // negative: backend default (CPU 30, GPU 0).
  double ceilings_every = -1;
  // Blocks each group is measured in (measure/blocks.hpp): auto (5 on the CPU backend, 1 on a
  // GPU) or a count 1..100.
  AutoOrCount timing_blocks;
  std::string gemm_algo = "timed";  // timed | heuristic
  // CPU GEMM libraries' threads (measure/contention.hpp): auto (the cores not busy with other
  // processes at the start) or a count 1..1024.
  AutoOrCount cpu_threads;
};

// --cpu-threads: auto or a whole number 1..1024; --timing-blocks: auto or a whole number 1..100.
// Each throws std::invalid_argument naming the flag, the value and the valid ones.
AutoOrCount parse_cpu_threads(const std::string& text);
AutoOrCount parse_timing_blocks(const std::string& text);

}  // namespace fusebench::bench
