#pragma once
// How ranks talk: the ranks and the communicator of a tensor-parallel run (tp_attn, tp_mlp,
// allreduce, allgather), for one fixture or for the members of an interleaved comparison group
// (e.g. naive and paired, which share the ranks and the communicator), and the pass after timing
// that splits a member's time into compute and communication (docs/tp.md):
//   comm:none      tp = 1 (nothing to communicate; vLLM skips the collective)
//   comm:inprocess CPU: every rank a thread of this process with its own backend
//   comm:nccl      GPU: one process over tp GPUs (threads), or one process per GPU (mpirun)
//   comm:mpi       CPU: one process per rank (mpirun)
//   comm:modelled  one rank's compute measured, every collective priced by the link model
// Multi-process runs (mpirun/srun): rank 0 leads; the other ranks follow its commands (which
// members make the group, run member k once, group done, sweep done), so every rank issues the
// same collectives in the same order however rank 0's timing engine interleaves the members.
// No Google Benchmark here: the report pass returns its counters and fields as data.
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "fusebench/communicator.hpp"
#include "fusebench/cost_model.hpp"
#include "fusebench/link_model.hpp"
#include "fusebench/workspace.hpp"
#include "measure/timing_device.hpp"

namespace fusebench {
namespace comm {
class StartLine;
}

struct CommSettings {
  std::string requested = "auto";  // --comm: auto | nccl | modelled | inprocess | mpi
  LinkProfile link;                // --link-profile
  double timeout_s = 120;
  Communicator* world = nullptr;  // multi-process runs: this process's communicator
};

// One fixture of a TP run, as every rank must know it.
struct TpMember {
  std::string op, variant;
  ShardShape shard;  // the fixture's shard; each rank runs it as its own rank
  std::int64_t tokens = 0;
  DType dtype = DType::bf16;
  std::string comm;  // resolve_comm()'s label
  // Multi-process runs: the fixture's position in the sweep, which is how the leader names it
  // to the followers (they hold the same sweep).
  std::int32_t index = -1;
  // Where every rank's weights come from (a checkpoint's layer, each rank reading its windows);
  // null: the seeded generator. Outlives the run (the sweep holds it).
  const TensorSource* weights = nullptr;
};

// The comm label of a fixture (see above); throws std::invalid_argument naming what cannot be
// met (e.g. --comm=nccl with fewer GPUs than tp and no mpirun).
std::string resolve_comm(const CommSettings& settings, const Backend& backend,
                         const std::string& op, int tp);

// context["tp"]: the --comm request, the link profile, processes; definitions of the counters.
nlohmann::json tp_context(const CommSettings& settings, int processes);
nlohmann::json tp_counter_definitions();

// --link-profile=measured: all-reduces of 1 and 1024 rows of a 4096-wide hidden state (8 KB and
// 8 MB in bf16, 16 KB and 16 MB in fp32) timed on this machine with the communicator --comm=auto
// picks for the most ranks available here (GPU: NCCL over min(GPUs, 8); CPU: 2 in-process
// ranks), fitted to latency + bytes*f/busbw. Throws when only one GPU exists.
LinkProfile measure_link_profile(Backend& backend, const CommSettings& settings);

// What the report pass adds to an entry: counters (numbers) and fields.
struct TpReport {
  std::map<std::string, double> counters;
  nlohmann::json fields = nlohmann::json::object();
};

class TpRun {
 public:
  // `workspaces[i]` is this process's rank of `members[i]` (its plan's shard.rank is that rank).
  // The members share tp and comm (one communicator serves them all).
  TpRun(std::vector<Workspace*> workspaces, std::vector<TpMember> members, std::uint64_t seed,
        const CommSettings& settings);
  ~TpRun();
  TpRun(const TpRun&) = delete;
  TpRun& operator=(const TpRun&) = delete;

  std::size_t members() const { return members_.size(); }
  Communicator* comm() { return comm_; }
  // Threads a pipeline runs on this machine: its ranks here (threads of this process, or the
  // launcher's local processes) times their GEMM threads, plus one per rank for a plan's second
  // lane. On a CPU backend, more than the
  // cores means the ranks wait for each other's CPU, which a run-delay check cannot tell from a
  // busy neighbour's (measure/contention.hpp).
  int busy_threads(bool second_lane) const;
  // One run of member `member`'s pipeline on every rank (posts it to the other ranks, runs this
  // one).
  void region(std::size_t member = 0);
  // Passes after timing: the compute alone (collectives skipped) on every rank at once after a
  // barrier, the slowest rank's time kept, and the collectives timed one by one on rank 0
  // (measured) or priced (modelled); then the split of the communication into exposed and
  // hidden: from `pipeline_s` (the timed pipeline, seconds per run) for every entry with
  // collectives, and from the plan's lanes priced by the link model for modelled entries
  // (`ceilings` share the compute among the steps; null: equal shares). With a `device` (GPU),
  // the compute runs are enqueued behind a blocking kernel on every rank, so at decode sizes
  // compute_seconds is device time, not the host's launch rate.
  TpReport report(std::size_t member, double pipeline_s, const Ceilings* ceilings = nullptr,
                  measure::DeviceTiming* device = nullptr, double block_timeout_s = 0.5);

  // Multi-process followers (ranks > 0): obey rank 0 until it says the sweep is over. `sweep`
  // holds every fixture of the run by index (TpMember::index).
  static void follow(const std::vector<TpMember>& sweep, Backend& backend, std::uint64_t seed,
                     const CommSettings& settings);
  // Rank 0 tells the followers the sweep is over.
  static void release_followers(const CommSettings& settings);

 private:
  struct LocalRank;
  // What a local rank runs: member `member` once, or (compute_reps > 0) its compute pass.
  struct Job {
    std::size_t member = 0;
    int compute_reps = 0;
    bool device = false;  // compute pass: behind a blocking kernel of the rank's own device
    double block_timeout_s = 0.5;
  };
  void post_to_local_ranks(std::size_t member);
  // Rank 0's backend takes host_threads_ until the destructor gives it its defaults back.
  void split_host_threads();
  void post_job(const Job& job);
  void wait_local_ranks();
  // What rank 0's communicator and every local rank's have counted so far (rank order).
  std::vector<CollectiveTally> tallies() const;
  // The compute pass of `member` on every rank at once; per rank seconds per run.
  std::vector<double> compute_on_every_rank(std::size_t member, int reps,
                                            measure::DeviceTiming* device, double block_timeout_s,
                                            bool* host_gaps);

  std::vector<Workspace*> ws_;
  std::vector<TpMember> members_;
  CommSettings settings_;
  std::string kind_;
  std::unique_ptr<Communicator> own_comm_;  // modelled, or rank 0 of a local group
  Communicator* comm_ = nullptr;
  std::vector<std::unique_ptr<LocalRank>> local_;  // ranks 1..tp-1 of a single-process run
  std::unique_ptr<comm::StartLine> start_line_;    // their barrier before a compute pass
  bool leader_ = false;                            // rank 0 of a multi-process run
  int host_threads_ = 0;                // GEMM threads per rank on a CPU backend (0: not split)
  Backend* threads_backend_ = nullptr;  // rank 0's, set to host_threads_ for the group's life
};

}  // namespace fusebench
