#pragma once
// How a sample is taken. The timing engine measures a comparison group (the variants of one op
// at one shape, dtype and regime) in interleaved rounds: every round takes one sample of each
// member, exactly as that regime samples a single region, in a rotated order (interleave.hpp),
// until the stopping rule is met. It returns data (statistics, intervals, speedups); mapping
// them onto Google Benchmark is the binary's business (bench/). docs/timing.md explains why.
//
// One sample, per regime (R = runs per sample, sized from a one-run estimate):
//   cold   L2 flushed, then one run enqueued behind the blocking kernel between CUDA events
//   batch  R runs enqueued behind the blocking kernel, released, events around them, / R
//   eager  R runs issued back to back from the host, one synchronise, host wall time / R
//   graph  R replays of the member's captured graphs (one per rotation set), host wall time / R
// Before sampling, every member runs each of its rotation sets once, untimed (algorithm choice,
// pointer arrays, lazy loading never land in a sample), then graphs are captured (graph regime);
// in batch and cold one run is enqueued behind a short hold, and a member whose run does not get
// enqueued in time is retired before round 0 (its region waits for the held stream).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusebench/backend.hpp"
#include "measure/contention.hpp"
#include "measure/interleave.hpp"
#include "measure/intervals.hpp"
#include "measure/statistics.hpp"
#include "measure/timing_device.hpp"
#include "measure/timing_policy.hpp"

namespace fusebench::measure {

struct EngineSettings {
  StoppingRule rule;
  double target_sample_s = 1e-3;  // batch/eager/graph: runs per sample to fill about this much
  // The blocking kernel gives up after this; a correct enqueue of a sample takes about 1 ms.
  double block_timeout_s = 0.5;
  DeviceTiming* device = nullptr;  // null on the CPU: eager only, no clock
  // Host-timed regimes (eager, graph; every CPU sample): our threads' run delay is read around
  // each sample (null: not read). With drop_preempted, a sample that waited for a CPU more than
  // kPreemptedFraction of its time is dropped; without (a group whose own threads outnumber the
  // cores waits for itself), the delay is only recorded and the group-level load decides.
  RunDelayProbe* run_delay = nullptr;
  bool drop_preempted = true;
  // Called just before each sample (member, round): traces and tests of the order.
  std::function<void(std::size_t member, std::size_t round)> on_sample;
};

// One member of a group, as the engine sees it.
struct TimedMember {
  std::string label;                             // the variant, for messages
  std::function<void(std::size_t set)> run_set;  // one run on rotation set `set` (0 .. sets-1)
  std::size_t sets = 1;
  int launches_per_run = 1;  // model launches of one run: bounds the batch behind the block
  // Graph regime: one captured graph per set, kept by the caller across measurements (null: the
  // engine captures its own for this measurement).
  std::vector<std::unique_ptr<GraphReplay>>* graphs = nullptr;
};

struct MemberMeasurement {
  Summary summary;                 // over the valid samples
  std::optional<Estimate> median;  // time_median with its interval; none without a valid sample
  std::int64_t runs_per_sample = 1;
  std::size_t block_timeouts = 0;  // batch/cold samples dropped: the blocking kernel gave up
  // Sampling of this member stopped (batch/cold): its one held run in the warm-up timed out
  // (kHoldProbeTimeoutS), or kMaxTimeoutsAtOneRun consecutive blocking-kernel timeouts with one
  // run per sample. Either way something in its region waits for the held stream.
  bool gave_up = false;
  std::string gave_up_reason;  // which of the two, in words; empty unless gave_up
  // The data the statistics came from: per round this member's value (nullopt: none that
  // round) and every sample, throttled ones included. Blocks are combined from them (blocks.hpp).
  std::vector<std::optional<double>> round_values;
  std::vector<Sample> samples;
};

// Consecutive blocking-kernel timeouts at one run per sample after which a member is no longer
// sampled (each costs the block timeout, and its group's other members would wait).
inline constexpr std::size_t kMaxTimeoutsAtOneRun = 3;
// Batch/cold warm-up: one run is enqueued behind a blocking kernel with this timeout; a member
// whose run is not enqueued by then is retired before round 0 (enqueuing one run takes
// microseconds; a region that waits for the held stream never finishes).
inline constexpr double kHoldProbeTimeoutS = 0.1;

// One estimate of each block of a measurement (the block's median, or its median paired
// ratio) and the between-block interval they give (blocks.hpp); none with under 2 values.
struct BlockSpread {
  std::vector<double> values;
  std::optional<Estimate> between;
};

struct GroupMeasurement {
  Regime regime = Regime::eager;
  std::vector<MemberMeasurement> members;
  // speedup[m][j]: member m's speedup over member j (median of time_j / time_m per round);
  // nullopt for m == j and where no round has valid samples of both.
  std::vector<std::vector<std::optional<Estimate>>> speedup;
  std::optional<std::size_t> baseline;
  bool targets_speedup = false;
  std::string target;  // target_text(): what the stopping rule aimed at
  StopReason stop = StopReason::keep_going;
  std::size_t rounds = 0;
  double wall_seconds = 0;
  double widest = 0;  // widest targeted relative half-width at the end (inf: not computable)
  std::size_t widest_member = 0;
  // Measured in blocks (blocks.hpp): how many, and per block each member's median and speedups
  // (empty with one block).
  std::size_t blocks = 1;
  std::size_t blocks_asked = 1;
  // The host's load while the group was measured (summed over blocks); whether samples were
  // checked for preemption (drop_preempted with a readable run delay).
  LoadBetween load;
  bool contention_watched = false;  // settings.run_delay was given: contention is judged
  bool preemption_checked = false;
  std::string blocks_note;  // why fewer blocks than asked were measured; empty otherwise
  std::vector<BlockSpread> median_blocks;                // [m]
  std::vector<std::vector<BlockSpread>> speedup_blocks;  // [m][j]
};

// A member's own failure (its region, its graph capture, its warm-up, an error that surfaced at
// the synchronise after its work): the group can be measured again without member `member`.
struct MemberFailure : std::runtime_error {
  MemberFailure(std::size_t failed_member, const std::string& what)
      : std::runtime_error(what), member(failed_member) {}
  std::size_t member;  // index into measure_group's `members`
};

// What contention did to a finished measurement (its members' summaries, load and
// preemption_checked set): stop becomes contended where contention_stop() says so.
void apply_contention(GroupMeasurement& g);

// Measures `members` (all on `backend`) in `regime` under settings.rule. `baseline`: the index
// of the op's baseline variant when it is a member. Throws std::runtime_error when the regime
// needs a GPU and settings.device is null, and MemberFailure (with the error's text) when a
// member's warm-up, capture or sample throws.
GroupMeasurement measure_group(Regime regime, Backend& backend, std::vector<TimedMember>& members,
                               std::optional<std::size_t> baseline, const EngineSettings& settings);

}  // namespace fusebench::measure
