#pragma once
// Runs the comparison groups of the sweep (groups.hpp): materialises every member of a group
// (its workspace, rotation sets, TP ranks), has the timing engine (src/measure/timing_engine)
// measure them interleaved, runs the counter passes and the TP report pass of each member, and
// keeps one result per member and measurement. A group is measured when the first of its
// members asks for a result it does not have yet (its n-th call gets the group's n-th
// measurement, so --benchmark_repetitions=N measures the group N times); the other members
// are then handed their cached results. No Google Benchmark here (fixture_runner.hpp maps the
// results onto it).
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "comm/tp_run.hpp"
#include "entry_fields.hpp"
#include "fusebench/backend.hpp"
#include "fusebench/counters.hpp"
#include "fusebench/workspace.hpp"
#include "groups.hpp"
#include "interrupt.hpp"
#include "measure/blocks.hpp"
#include "measure/ceilings.hpp"
#include "measure/decomposition_log.hpp"
#include "measure/rotation.hpp"
#include "measure/timing_engine.hpp"
#include "run_observer.hpp"
#include "sweep.hpp"

namespace fusebench::bench {

struct RunnerSettings {
  measure::EngineSettings engine;  // stopping rule (with the clock reference), device, ...
  std::size_t cache_bytes = 0;     // last-level cache to defeat by rotation (0: unknown)
  std::size_t rotation_budget_bytes = std::size_t{1} << 30;  // per member
  const measure::MeasuredCeilings* ceilings = nullptr;       // null: no roofline_fraction
  // The published ceilings, raised to what the sweep observed (null: the measured ones as is).
  measure::CeilingsLog* ceilings_log = nullptr;
  // Blocks per group measurement (measure/blocks.hpp); 0: auto (measure::kAutoCpuBlocks for
  // every group on the CPU backend, else 1).
  std::size_t timing_blocks = 0;
  // Asked at the safe points (before every block and every group): true stops the sweep there
  // (a Ctrl-C, interrupt.hpp). Groups already measured keep their results; the others are
  // "not measured" (EntryResult::interrupted). Unset: never.
  std::function<bool()> stop;
  // Measures the ceilings again and adds them to ceilings_log (the binary's; unset: never).
  // Called between groups once ceilings_every_s have passed since the last measurement, and
  // once after the last group (unless the last measurement is under a quarter of that old).
  std::function<void()> remeasure_ceilings;
  double ceilings_every_s = 0;
};

class GroupRunner {
 public:
  GroupRunner(Backend& backend, std::uint64_t seed, const std::vector<Fixture>& fixtures,
              GroupPlan plan, RunnerSettings settings, CommSettings comm);
  ~GroupRunner();
  GroupRunner(const GroupRunner&) = delete;
  GroupRunner& operator=(const GroupRunner&) = delete;

  void add_collector(std::unique_ptr<CounterCollector> collector) {
    collectors_.push_back(std::move(collector));
  }
  // Told of every block and finished group (null: nobody); not owned.
  void set_observer(RunObserver* observer) { observer_ = observer; }
  // RunnerSettings::stop said stop: no group is measured any more.
  bool interrupted() const { return interrupted_; }
  // Blocks each group measurement asks for: --timing-blocks, else the backend's default.
  std::size_t blocks() const;
  // The result of fixture `index`'s next call; measures its group when needed. Never throws: a
  // failure is the result's error.
  EntryResult next_result(std::size_t index);
  // Frees the workspaces of the group measured last (and releases TP follower ranks from it).
  void release();

  // How the measurements stopped, for the console (issue: a sweep that timed out everywhere
  // must say so): counts and the widest targeted interval.
  struct Tally {
    std::size_t measurements = 0, converged = 0, timed_out = 0, max_samples = 0,
                blocks_disagree = 0;
    // The widest targeted interval that reached 95% (relative half-width) and its group; groups
    // with an interval that could not reach 95% (too few valid samples) are counted apart.
    double widest = 0;
    std::string widest_group;
    std::size_t not_computable = 0;
    std::set<std::string> targets;  // what the groups targeted (speedup or median intervals)
    std::size_t contended = 0;      // stopped timing_stop: contended
    std::size_t preempted = 0;      // samples dropped as preempted, all groups
    // The group during which other processes took the most CPU (foreign cores) and that load.
    double worst_foreign_cores = -1;
    std::string worst_group;
  };
  const Tally& tally() const { return tally_; }
  std::string tally_text() const;
  // One plain line when groups were contended (how many, and what to do); empty otherwise.
  std::string contention_text() const;
  // The load over the groups measured so far, for context["host_load"]["worst_group"].
  nlohmann::json worst_load_json() const;

 private:
  struct Member;
  struct Active;
  // Groups measured in blocks are measured several at a time, their blocks taken in turn: as
  // many consecutive groups as fit this many seconds of their timeouts (--timing-max-time x
  // members; the default CPU tp_mlp sweep at tp 2, 12 groups of 2 s, is one window).
  static constexpr double kBlockWindowSeconds = 30;
  struct Pending;
  struct Timed {                         // what the engine measures of the active group
    std::vector<std::size_t> positions;  // member positions, in engine order
    std::vector<measure::TimedMember> members;
    std::optional<std::size_t> baseline;
  };
  void measure_group(std::size_t group);
  void measure_alone(std::size_t group);
  void measure_window(std::size_t group);
  void run_block(Pending& p, std::size_t block);
  void finish(Pending& p, const std::vector<EntryResult>& out);
  // The sweep was stopped mid-window: the group's results from the blocks it has.
  void finish_interrupted(Pending& p);
  measure::Regime regime_of(const Fixture& f) const;
  Timed timed_members(measure::Regime regime, std::vector<std::string>& cache_policy);
  void count(const measure::GroupMeasurement& gm, const std::string& key);
  std::vector<EntryResult> results_of(std::size_t group, const measure::GroupMeasurement& gm,
                                      const std::vector<std::size_t>& timed,
                                      const std::vector<std::string>& cache_policy);
  void prepare(std::size_t group);
  // The engine's settings for the active group: preempted samples are dropped unless the
  // group's own threads outnumber the cores (in-process TP ranks on the CPU, or a grouped
  // step's region beside the GEMM libraries' spinning workers), where the group-level load
  // decides instead (measure/interleave.hpp, contention_stop).
  // A multi-process run whose ranks fill the cores gets no run-delay probe at all: neither the
  // other ranks' waits nor their CPU time tell a neighbour (contention not judged).
  measure::EngineSettings engine_for_active() const;
  // True when a member of the active group runs a grouped step of several GEMMs as a parallel
  // region on the CPU with more than one thread.
  bool region_beside_library_threads() const;
  void fail_member(Member& m, const std::string& why);
  // A safe point: throws the runner's own Interrupted when RunnerSettings::stop says stop.
  void stop_here_if_asked();
  void block_measured(std::size_t group, std::size_t block, std::size_t blocks, double sampled_s);
  void group_measured(std::size_t group);
  std::unique_ptr<Workspace> make_workspace(const Fixture& f);
  std::unique_ptr<measure::RotationSets> make_rotation(Workspace& ws);
  void start_tp_ranks();               // the active group's TpRun over its workspaces
  void warm_up(bool keep_algorithms);  // one untimed run of every member
  void refresh_members();              // fresh buffers and ranks between blocks
  std::vector<EntryResult> measure_prepared(std::size_t group);
  // Member `member_pos`'s report entry, assembled in one place: what the group's measurement
  // says of it (result_for), then what the fixture says of itself beside its time: the rows its
  // GEMMs ran (OpInfo::rows_json), a quantized entry's accuracy (add_accuracy) and the op's own
  // fields (OpInfo::entry_fields). The fixture's axes are main's (fixture_fields).
  EntryResult entry_for(std::size_t group, std::size_t member_pos,
                        const measure::GroupMeasurement& g, const std::vector<std::size_t>& timed,
                        const std::vector<std::string>& cache_policy);
  // What the group's measurement says of member `member_pos`: time, comparison, clocks,
  // roofline, counters, the TP split, the model's cost (entry_fields.hpp for the pure parts; the
  // ceilings, counter passes and TP report below need the member's resources). Measures only.
  EntryResult result_for(std::size_t group, std::size_t member_pos,
                         const measure::GroupMeasurement& g, const std::vector<std::size_t>& timed,
                         const std::vector<std::string>& cache_policy);
  // A quantized entry's accuracy (quant_fields.hpp): its outputs against the float64 reference
  // the op names and against its quant_split variant's outputs, read from the group's
  // workspaces (a TP pipeline's rank 0 after every rank ran it).
  void add_accuracy(std::size_t member_pos, EntryResult& r);
  // Why `baseline` was not measured with the group (not selected, failed, not in the run).
  std::string baseline_missing(std::size_t group, const std::string& baseline) const;
  void add_roofline(const Fixture& f, const Member& m, measure::Regime regime, double median,
                    const Cost& cost, EntryResult& r);
  // Counter passes, once per member; a graph entry's replay is counted too.
  void add_counters(std::size_t pos, measure::Regime regime, const Cost& cost, EntryResult& r);
  void add_tp_report(std::size_t pos, double median, EntryResult& r);

  Backend& backend_;
  std::uint64_t seed_;
  const std::vector<Fixture>& fixtures_;
  GroupPlan plan_;
  RunnerSettings settings_;
  CommSettings comm_;
  std::vector<std::unique_ptr<CounterCollector>> collectors_;
  std::unique_ptr<Active> active_;                 // the workspaces of the group measured last
  std::vector<std::size_t> calls_;                 // per fixture: results handed out so far
  std::vector<std::vector<EntryResult>> results_;  // per fixture: one per group measurement
  measure::DecompositionLog decomposition_;
  Tally tally_;
  RunObserver* observer_ = nullptr;
  std::size_t blocks_done_ = 0;
  std::size_t groups_done_ = 0;
  void maybe_remeasure_ceilings(bool after_last_group);
  std::size_t current_group_ = 0;  // the group being measured (for the observer)
  bool interrupted_ = false;
};

}  // namespace fusebench::bench
