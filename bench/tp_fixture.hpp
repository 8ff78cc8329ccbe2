#pragma once
// The ranks and the communicator of a tensor-parallel fixture (tp_attn, tp_mlp, allreduce,
// allgather) in the benchmark, and what it adds to the report (docs/tp.md):
//   comm:none      tp = 1 (nothing to communicate; vLLM skips the collective)
//   comm:inprocess CPU: every rank a thread of this process with its own backend
//   comm:nccl      GPU: one process over tp GPUs (threads), or one process per GPU (mpirun)
//   comm:mpi       CPU: one process per rank (mpirun)
//   comm:modelled  one rank's compute measured, every collective priced by the link model
// Multi-process runs (mpirun/srun): rank 0 runs Google Benchmark and leads; the other ranks
// follow its commands (which fixture, one more run, done), so every rank issues the same
// collectives in the same order however often rank 0's timing loop calls the region.
#include <benchmark/benchmark.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "fusebench/communicator.hpp"
#include "fusebench/link_model.hpp"
#include "fusebench/workspace.hpp"
#include "measure/timing_device.hpp"
#include "sweep.hpp"

namespace fusebench::bench {

struct CommSettings {
  std::string requested = "auto";  // --comm: auto | nccl | modelled | inprocess | mpi
  LinkProfile link;                // --link-profile
  double timeout_s = 120;
  Communicator* world = nullptr;  // multi-process runs: this process's communicator
  const std::vector<Fixture>* fixtures = nullptr;  // the sweep (the leader names fixtures by index)
};

// The comm label of a fixture (see above); throws std::invalid_argument naming what cannot be
// met (e.g. --comm=nccl with fewer GPUs than tp and no mpirun).
std::string resolve_comm(const CommSettings& settings, const Backend& backend,
                         const std::string& op, int tp);

// Under mpirun/srun: this process opens the GPU of its local rank modulo the GPUs it sees
// (local_device.hpp; call before creating the backend).
void pin_local_gpu();
// context["tp"]: the --comm request, the link profile, processes; definitions of the counters.
nlohmann::json tp_context(const CommSettings& settings, int processes);
nlohmann::json tp_counter_definitions();

// --link-profile=measured: all-reduces of 8 KB and 8 MB timed on this machine with the
// communicator --comm=auto picks for the most ranks available here (GPU: NCCL over min(GPUs, 8);
// CPU: 2 in-process ranks), fitted to latency + bytes*f/busbw. Throws when only one GPU exists.
LinkProfile measure_link_profile(Backend& backend, const CommSettings& settings);

class TpRun {
 public:
  // `ws` is this process's rank of the fixture (its plan's shard.rank is that rank).
  TpRun(Workspace& ws, const Fixture& fixture, std::uint64_t seed, const CommSettings& settings);
  ~TpRun();
  TpRun(const TpRun&) = delete;
  TpRun& operator=(const TpRun&) = delete;

  Communicator* comm() { return comm_; }
  // One run of the pipeline on every rank (posts it to the other ranks, runs this one).
  void region();
  // Passes after timing: this rank's compute alone (collectives skipped) and the collectives
  // timed one by one (measured) or priced (modelled). Sets counters and report fields. With a
  // `device` (GPU), the compute runs are enqueued behind its blocking kernel, so at decode sizes
  // compute_seconds is device time, not the host's launch rate.
  void report(benchmark::State& state, nlohmann::json& fields,
              measure::DeviceTiming* device = nullptr, double block_timeout_s = 0.5);

  // Multi-process followers (ranks > 0): obey rank 0 until it says the sweep is over.
  static void follow(const std::vector<Fixture>& fixtures, Backend& backend, std::uint64_t seed,
                     const CommSettings& settings);
  // Rank 0 tells the followers the sweep is over.
  static void release_followers(const CommSettings& settings);

 private:
  struct LocalRank;
  void post_to_local_ranks();
  void wait_local_ranks();

  Workspace& ws_;
  Fixture fixture_;
  CommSettings settings_;
  std::string kind_;
  std::unique_ptr<Communicator> own_comm_;  // modelled, or rank 0 of a local group
  Communicator* comm_ = nullptr;
  std::vector<std::unique_ptr<LocalRank>> local_;  // ranks 1..tp-1 of a single-process run
  bool leader_ = false;                            // rank 0 of a multi-process run
};

}  // namespace fusebench::bench
