#include "group_runner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <optional>
#include <thread>

#include "fusebench/cost_model.hpp"
#include "fusebench/counter_passes.hpp"
#include "fusebench/nvtx.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/tp.hpp"
#include "runner/quant_fields.hpp"
#include "runner/step_profile.hpp"

namespace fusebench::bench {

// One fixture's resources while its group (or a group over the same data in another regime) is
// the active one. Declared so that graphs go before the rotation sets they replay, and those
// before the workspace they copy.
struct GroupRunner::Member {
  std::size_t fixture = 0;
  std::unique_ptr<Workspace> ws;
  std::unique_ptr<measure::RotationSets> rotation;
  std::vector<std::unique_ptr<measure::GraphReplay>> graphs;
  std::vector<std::string> algorithms;    // the GEMM algorithms its warm-up run chose
  std::optional<RegionCounters> counted;  // counter passes: once per member, not per regime
  std::string error;                      // set: this member could not be prepared
};

struct GroupRunner::Active {
  std::string data_key;                 // Fixture::group_data_key()
  std::vector<std::string> data_names;  // the members' Fixture::data_name(), in order
  std::vector<Member> members;
  std::unique_ptr<TpRun> tp;          // the TP members' ranks; goes before their workspaces
  std::vector<std::size_t> tp_index;  // member position -> its index in tp
  ~Active() { tp.reset(); }
};

namespace {

// Thrown at a safe point when the sweep is to stop (RunnerSettings::stop); deliberately not a
// std::exception, so that none of the handlers that turn a failure into an entry's error takes it.
struct Interrupted {};

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", fraction * 100);
  return buf;
}

}  // namespace

GroupRunner::GroupRunner(Backend& backend, std::uint64_t seed, const std::vector<Fixture>& fixtures,
                         GroupPlan plan, RunnerSettings settings, CommSettings comm)
    : backend_(backend),
      seed_(seed),
      fixtures_(fixtures),
      plan_(std::move(plan)),
      settings_(std::move(settings)),
      comm_(std::move(comm)),
      calls_(fixtures.size(), 0),
      results_(fixtures.size()) {
  plan_.group_of.resize(fixtures.size(), GroupPlan::none);
}

GroupRunner::~GroupRunner() { release(); }

void GroupRunner::release() { active_.reset(); }

EntryResult GroupRunner::next_result(std::size_t index) {
  if (index >= fixtures_.size()) return {"no fixture " + std::to_string(index) + " in the sweep"};
  if (plan_.group_of[index] == GroupPlan::none) {
    // Called although the filter was predicted to leave it out: measured as a group of its own.
    plan_.group_of[index] = plan_.groups.size();
    plan_.groups.push_back({fixtures_[index].group_key(), {index}, {}});
  }
  const std::size_t rep = calls_[index]++;
  if (results_[index].size() <= rep && !interrupted_) {
    try {
      stop_here_if_asked();
      maybe_remeasure_ceilings(false);
      measure_group(plan_.group_of[index]);
      if (groups_done_ >= plan_.groups.size()) maybe_remeasure_ceilings(true);
    } catch (const Interrupted&) {
      interrupted_ = true;
      release();
    }
  }
  if (results_[index].size() <= rep) {
    if (interrupted_) {
      EntryResult r{kNotMeasuredInterrupted};
      r.interrupted = true;
      return r;
    }
    return {"internal: the group measurement gave no result"};
  }
  return results_[index][rep];
}

void GroupRunner::maybe_remeasure_ceilings(bool after_last_group) {
  measure::CeilingsLog* log = settings_.ceilings_log;
  if (!settings_.remeasure_ceilings || log == nullptr || !(settings_.ceilings_every_s > 0)) return;
  const double since = log->now_s() - log->last_measured_s();
  if (since >= settings_.ceilings_every_s / (after_last_group ? 4 : 1)) {
    release();  // the groups' buffers go first: the measurement has the memory to itself
    settings_.remeasure_ceilings();
  }
}

void GroupRunner::stop_here_if_asked() {
  if (settings_.stop && settings_.stop()) throw Interrupted{};
}

void GroupRunner::block_measured(std::size_t group, std::size_t block, std::size_t blocks,
                                 double sampled_s) {
  ++blocks_done_;
  if (observer_ == nullptr) return;
  const ComparisonGroup& g = plan_.groups[group];
  const measure::StoppingRule rule = measure::block_rule(settings_.engine.rule, blocks);
  const auto members = static_cast<double>(g.members.size());
  BlockDone e;
  e.group = group;
  e.group_key = g.key;
  e.block = block;
  e.blocks = blocks;
  e.members = g.members.size();
  e.blocks_done = blocks_done_;
  e.floor_s = rule.min_time_s * members;
  e.budget_s = rule.max_time_s * members;
  e.sampled_s = sampled_s;
  observer_->block_done(e);
}

void GroupRunner::group_measured(std::size_t group) {
  ++groups_done_;
  if (observer_ != nullptr) observer_->group_done(group, plan_.groups[group].key);
}

measure::Regime GroupRunner::regime_of(const Fixture& f) const {
  return measure::parse_regime(f.timing.empty() ? "eager" : f.timing);
}

void GroupRunner::measure_group(std::size_t group) {
  if (blocks() > 1) {
    measure_window(group);
  } else {
    measure_alone(group);
  }
}

void GroupRunner::measure_alone(std::size_t group) {
  const ComparisonGroup& g = plan_.groups[group];
  current_group_ = group;
  std::vector<EntryResult> out;
  stop_here_if_asked();
  try {
    NvtxRange range(g.key + "/timed");
    prepare(group);
    out = measure_prepared(group);
  } catch (const std::exception& e) {
    out.assign(g.members.size(), EntryResult{e.what()});
    release();  // whatever state it left is not to be reused
  }
  for (std::size_t i = 0; i < g.members.size(); ++i) results_[g.members[i]].push_back(out.at(i));
  group_measured(group);
}

void GroupRunner::prepare(std::size_t group) {
  const ComparisonGroup& g = plan_.groups[group];
  std::vector<std::string> names, variants;
  for (std::size_t f : g.members) {
    names.push_back(fixtures_[f].data_name());
    variants.push_back(fixtures_[f].variant);
  }
  const Fixture& first = fixtures_[g.members.front()];
  if (active_ && active_->data_key == first.group_data_key() && active_->data_names == names) {
    // Another regime (or repetition) of the same members: same buffers, rotation sets, ranks.
    for (std::size_t i = 0; i < g.members.size(); ++i) active_->members[i].fixture = g.members[i];
    return;
  }
  release();  // the previous group's buffers go before this one's are allocated
  auto active = std::make_unique<Active>();
  active->data_key = first.group_data_key();
  active->data_names = names;
  for (std::size_t f : g.members) {
    const Fixture& fx = fixtures_[f];
    Member m;
    m.fixture = f;
    try {
      m.ws = make_workspace(fx);
    } catch (const OutOfMemory& e) {
      m.error = "out of memory preparing the interleaved group (" + join(variants) +
                "), which holds every member at once: " + e.what() +
                "; the other members were measured without this one";
    } catch (const std::exception& e) {
      m.error = e.what();
    }
    active->members.push_back(std::move(m));
  }
  active_ = std::move(active);
  if (is_tp_op(first.op)) start_tp_ranks();
  warm_up(true);
}

void GroupRunner::start_tp_ranks() {
  Active& a = *active_;
  std::vector<Workspace*> ws;
  std::vector<TpMember> tp;
  a.tp_index.assign(a.members.size(), GroupPlan::none);
  for (std::size_t i = 0; i < a.members.size(); ++i) {
    Member& m = a.members[i];
    if (!m.error.empty()) continue;
    a.tp_index[i] = ws.size();
    ws.push_back(m.ws.get());
    tp.push_back(tp_member(fixtures_[m.fixture], m.fixture));
  }
  if (!ws.empty()) a.tp = std::make_unique<TpRun>(ws, tp, seed_, comm_);  // the other ranks
}

void GroupRunner::warm_up(bool keep_algorithms) {
  // Warm-up: cuBLASLt heuristics and lazy module loading, and the algorithms each member chose.
  // A member whose region fails (e.g. a library error of one variant) fails alone, except in a
  // TP group, whose ranks would be out of step: there the whole group fails.
  backend_.take_algorithm_log();
  for (std::size_t i = 0; i < active_->members.size(); ++i) {
    Member& m = active_->members[i];
    if (!m.error.empty()) continue;
    if (active_->tp) {
      active_->tp->region(active_->tp_index[i]);
      backend_.synchronize();
    } else {
      try {
        m.ws->run();
        backend_.synchronize();
      } catch (const std::exception& e) {
        fail_member(m, e.what());
        continue;
      }
    }
    std::vector<std::string> chosen = backend_.take_algorithm_log();
    if (keep_algorithms) m.algorithms = std::move(chosen);
  }
}

void GroupRunner::refresh_members() {
  // A block after the first gets fresh buffers and, in a TP group, fresh ranks (threads,
  // communicator), so the blocks also sample what one allocation or one set of threads fixes
  // for a whole process: back-to-back runs of tp_mlp at tp 2 differed by 7% where five blocks
  // over the same buffers and threads agreed with each other (docs/timing.md, Blocks).
  Active& a = *active_;
  a.tp.reset();
  std::vector<bool> rotated(a.members.size());
  for (std::size_t i = 0; i < a.members.size(); ++i) {
    Member& m = a.members[i];
    rotated[i] = m.rotation != nullptr;
    m.graphs.clear();  // re-captured by the engine on the new buffers
    m.rotation.reset();
    m.ws.reset();  // the old buffers go before the new ones are allocated
  }
  for (std::size_t i = 0; i < a.members.size(); ++i) {
    Member& m = a.members[i];
    if (!m.error.empty()) continue;
    const Fixture& fx = fixtures_[m.fixture];
    m.ws = make_workspace(fx);
    if (rotated[i]) m.rotation = make_rotation(*m.ws);
  }
  if (is_tp_op(fixtures_[a.members.front().fixture].op)) start_tp_ranks();
  warm_up(false);
}

measure::EngineSettings GroupRunner::engine_for_active() const {
  measure::EngineSettings e = settings_.engine;
  if (observer_ != nullptr) {
    // Before each round (not between a round's samples): the observer's line moves during a
    // long block too.
    auto last = std::make_shared<std::size_t>(std::numeric_limits<std::size_t>::max());
    e.on_sample = [inner = e.on_sample, observer = observer_, group = current_group_,
                   key = plan_.groups[current_group_].key, last](std::size_t m, std::size_t round) {
      if (round != *last) {
        *last = round;
        observer->round_started(group, key, round);
      }
      if (inner) inner(m, round);
    };
  }
  if (active_ && !active_->tp && backend_.name() == "cpu" && comm_.world == nullptr &&
      region_beside_library_threads()) {
    // A grouped step's region threads run beside the GEMM libraries' workers, which spin for a
    // while after every multi-threaded call (the router's): their waits are this process's own,
    // as in-process TP ranks' are (measured: docs/timing.md).
    e.drop_preempted = false;
  }
  if (active_ && active_->tp && backend_.name() == "cpu") {
    bool lane = false;
    for (const Member& m : active_->members) lane = lane || (m.ws && m.ws->uses_second_lane());
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    const int threads = active_->tp->busy_threads(lane);
    if (threads > static_cast<int>(cores)) {
      if (comm_.world == nullptr) {
        // In-process ranks: every thread is ours, so other processes' CPU is a neighbour's.
        e.drop_preempted = false;
      } else {
        // The other ranks are processes too: neither their waits nor their CPU tell a neighbour.
        // (the measurement then says contention_watched false; add_contention explains it).
        e.run_delay = nullptr;
      }
    }
  }
  return e;
}

bool GroupRunner::region_beside_library_threads() const {
  const int budget = Backend::host_thread_budget();
  const unsigned threads = budget > 0 ? static_cast<unsigned>(budget)
                                      : std::max(1u, std::thread::hardware_concurrency());
  if (threads < 2) return false;  // one thread: no region workers, no library workers
  for (const Member& m : active_->members) {
    if (!m.ws) continue;
    for (const Step& step : m.ws->plan().steps) {
      if (const auto* g = std::get_if<GroupedGemmStep>(&step); g && g->gemms.size() > 1)
        return true;
      if (const auto* g = std::get_if<GroupedScaledGemmStep>(&step); g && g->gemms.size() > 1)
        return true;
    }
  }
  return false;
}

std::size_t GroupRunner::blocks() const {
  if (settings_.timing_blocks > 0) return settings_.timing_blocks;
  // On the CPU a ratio moves between runs by more than one measurement's interval: TP ranks
  // sharing the cores are scheduled differently from one stretch of seconds to the next, and
  // even a single-rank group's split/fused ratio moved 11% with a new set of buffers
  // (docs/timing.md, Blocks). A GPU has not shown it yet: one block there unless asked.
  return backend_.name() == "cpu" ? measure::kAutoCpuBlocks : 1;
}

std::unique_ptr<Workspace> GroupRunner::make_workspace(const Fixture& f) {
  return std::make_unique<Workspace>(backend_, f.plan(), seed_, f.weight_source());
}

std::unique_ptr<measure::RotationSets> GroupRunner::make_rotation(Workspace& ws) {
  return std::make_unique<measure::RotationSets>(
      ws, measure::rotation_for(ws.plan(), settings_.cache_bytes, settings_.rotation_budget_bytes));
}

void GroupRunner::fail_member(Member& m, const std::string& why) {
  m.error = why;
  m.graphs.clear();
  m.rotation.reset();
  m.ws.reset();  // its memory goes back to the members still measured
}

GroupRunner::Timed GroupRunner::timed_members(measure::Regime regime,
                                              std::vector<std::string>& cache_policy) {
  Active& a = *active_;
  Timed out;
  for (std::size_t i = 0; i < a.members.size(); ++i) {
    Member& m = a.members[i];
    if (!m.error.empty()) continue;
    const Fixture& f = fixtures_[m.fixture];
    // Cold flushes before every sample; the others rotate through sets larger than the cache.
    if (regime == measure::Regime::cold) {
      cache_policy[i] = "L2 flushed before each sample (one run per sample)";
    } else if (!f.comm.empty()) {
      // TP fixtures: the region drives every rank; copies of rank 0's buffers alone would
      // desynchronise the collectives.
      cache_policy[i] = "TP fixture: one set (rank buffers are not rotated)";
    } else {
      if (!m.rotation) {
        try {
          m.rotation = make_rotation(*m.ws);
        } catch (const OutOfMemory& e) {
          fail_member(m, std::string("out of memory making the cache-rotation copies of this "
                                     "member (its interleaved group holds every member at "
                                     "once): ") +
                             e.what());
          continue;
        }
      }
      cache_policy[i] = m.rotation->rotation().reason;
    }
    if (f.variant == f.baseline_variant()) out.baseline = out.members.size();
    out.positions.push_back(i);
    const std::function<void()> region = [this, i, &m] {
      if (active_->tp) {
        active_->tp->region(active_->tp_index[i]);
      } else {
        m.ws->run();
      }
    };
    measure::TimedMember t;
    t.label = f.variant;
    t.sets = m.rotation ? m.rotation->sets() : 1;
    t.run_set = [&m, region](std::size_t set) {
      if (m.rotation) {
        m.rotation->run(set, region);
      } else {
        region();
      }
    };
    t.launches_per_run = cost_of(m.ws->plan()).launches;
    t.graphs = &m.graphs;
    out.members.push_back(std::move(t));
  }
  return out;
}

void GroupRunner::count(const measure::GroupMeasurement& gm, const std::string& key) {
  ++tally_.measurements;
  if (gm.stop == measure::StopReason::converged) ++tally_.converged;
  if (gm.stop == measure::StopReason::timed_out) ++tally_.timed_out;
  if (gm.stop == measure::StopReason::max_samples) ++tally_.max_samples;
  if (gm.stop == measure::StopReason::blocks_disagree) ++tally_.blocks_disagree;
  if (gm.stop == measure::StopReason::contended) ++tally_.contended;
  for (const measure::MemberMeasurement& m : gm.members)
    tally_.preempted += m.summary.dropped_preempted;
  if (gm.load.foreign_cores && *gm.load.foreign_cores > tally_.worst_foreign_cores) {
    tally_.worst_foreign_cores = *gm.load.foreign_cores;
    tally_.worst_group = key;
  }
  if (!std::isfinite(gm.widest)) {
    ++tally_.not_computable;
  } else if (tally_.widest_group.empty() || gm.widest > tally_.widest) {
    tally_.widest = gm.widest;
    tally_.widest_group = key;
  }
  tally_.targets.insert(gm.target);
}

std::vector<EntryResult> GroupRunner::results_of(std::size_t group,
                                                 const measure::GroupMeasurement& gm,
                                                 const std::vector<std::size_t>& timed,
                                                 const std::vector<std::string>& cache_policy) {
  Active& a = *active_;
  count(gm, plan_.groups[group].key);
  std::vector<EntryResult> out(a.members.size());
  for (std::size_t t = 0; t < timed.size(); ++t) {
    if (a.tp) {
      out[timed[t]] = entry_for(group, timed[t], gm, timed, cache_policy);
      continue;
    }
    try {  // the counter passes of one member failing fail that member alone
      out[timed[t]] = entry_for(group, timed[t], gm, timed, cache_policy);
    } catch (const std::exception& e) {
      out[timed[t]] = EntryResult{e.what()};
    }
  }
  for (std::size_t i = 0; i < a.members.size(); ++i) {
    if (!a.members[i].error.empty()) out[i] = EntryResult{a.members[i].error};
  }
  return out;
}

std::vector<EntryResult> GroupRunner::measure_prepared(std::size_t group) {
  const ComparisonGroup& g = plan_.groups[group];
  Active& a = *active_;
  const Fixture& first = fixtures_[g.members.front()];
  const measure::Regime regime = regime_of(first);
  std::vector<std::string> cache_policy(a.members.size());
  // Measured again without a member whose region threw during the measurement (outside a TP
  // group), so one failing variant does not take its group down.
  for (;;) {
    Timed t = timed_members(regime, cache_policy);
    if (t.members.empty()) break;
    std::optional<measure::GroupMeasurement> gm;
    try {
      gm = measure::measure_in_blocks(
          regime, backend_, t.members, t.baseline, engine_for_active(), blocks(),
          [this] {
            stop_here_if_asked();  // between blocks: a safe point
            refresh_members();
          },
          [this, group](std::size_t block, std::size_t blocks, const measure::GroupMeasurement& b) {
            block_measured(group, block, blocks, b.wall_seconds);
          });
    } catch (const measure::MemberFailure& e) {
      // The engine names the member whose region, capture or warm-up failed (a capture broken
      // by a library call shows up only at cudaStreamEndCapture, outside the region).
      if (a.tp) throw;
      try {
        backend_.synchronize();
      } catch (...) {
        // The error may surface here too; the member is failed either way.
      }
      fail_member(a.members[t.positions[e.member]],
                  std::string(e.what()) + " (the rest of its group was measured without it)");
      continue;
    }
    return results_of(group, *gm, t.positions, cache_policy);
  }
  std::vector<EntryResult> out(a.members.size());
  for (std::size_t i = 0; i < a.members.size(); ++i) {
    if (!a.members[i].error.empty()) out[i] = EntryResult{a.members[i].error};
  }
  return out;
}

// A group measured in blocks and the blocks it has so far (measure_window).
struct GroupRunner::Pending {
  std::size_t group = 0;
  measure::BlockPlan plan;  // how many blocks its budget affords (set by its first block)
  std::vector<measure::GroupMeasurement> blocks;
  std::vector<std::size_t> positions;  // the members its first block measured
  std::vector<std::string> cache_policy;
  bool done = false;   // its results are in results_
  bool alone = false;  // to be measured on its own (its members changed between blocks)
};

void GroupRunner::measure_window(std::size_t group) {
  // The next groups measured in blocks that have as many results as this one (none yet, or as
  // many repetitions) share the window, up to kBlockWindowSeconds of their budgets: block 0 of
  // each, then block 1 of each, ..., so one group's blocks are spread over the window and a
  // state of the machine that lasts seconds hits one or two of its blocks, not all
  // (docs/timing.md, Blocks).
  const std::size_t measured = results_[plan_.groups[group].members.front()].size();
  const auto budget = [this](std::size_t g) {
    return settings_.engine.rule.max_time_s * static_cast<double>(plan_.groups[g].members.size());
  };
  std::vector<Pending> window(1);
  window[0].group = group;
  double window_s = budget(group);
  for (std::size_t h = group + 1; h < plan_.groups.size(); ++h) {
    if (plan_.groups[h].members.empty()) continue;  // --benchmark_filter left all of it out
    const std::size_t lead = plan_.groups[h].members.front();
    if (results_[lead].size() != measured || window_s + budget(h) > kBlockWindowSeconds) break;
    window_s += budget(h);
    window.emplace_back();
    window.back().group = h;
  }
  try {
    for (std::size_t b = 0; b < blocks(); ++b) {
      for (Pending& p : window) {
        if (p.done || p.alone || (b > 0 && b >= p.plan.blocks)) continue;
        stop_here_if_asked();  // between blocks: a safe point
        const std::size_t measured_before = p.blocks.size();
        run_block(p, b);
        // The block's own count once its plan is known; a group that ended here (its members
        // failed) or goes on alone has no more blocks in this window.
        const std::size_t planned = p.done || p.alone ? b + 1 : p.plan.blocks;
        const double sampled = p.blocks.size() > measured_before ? p.blocks.back().wall_seconds : 0;
        block_measured(p.group, b, std::max(planned, b + 1), sampled);
        if (p.done) group_measured(p.group);
      }
    }
  } catch (const Interrupted&) {
    // The window's groups are all measured in its last pass: stopped before it, every group
    // would be lost. Those with blocks in hand are reported from them instead, labelled.
    for (Pending& p : window) {
      if (!p.done && !p.alone && !p.blocks.empty()) finish_interrupted(p);
    }
    throw;
  }
  for (Pending& p : window) {
    if (p.alone) measure_alone(p.group);
  }
}

void GroupRunner::finish_interrupted(Pending& p) {
  const ComparisonGroup& g = plan_.groups[p.group];
  current_group_ = p.group;
  try {
    release();  // its results' counter and TP passes run on fresh buffers, as a block's would
    prepare(p.group);
    Active& a = *active_;
    p.cache_policy.resize(a.members.size());
    Timed t = timed_members(regime_of(fixtures_[g.members.front()]), p.cache_policy);
    if (t.positions != p.positions) return;  // not the members its blocks measured: left out
    measure::GroupMeasurement all = p.blocks.size() == 1
                                        ? p.blocks.front()
                                        : measure::combine_blocks(p.blocks, settings_.engine.rule);
    measure::label(all, p.plan);
    all.blocks_note = "the run was interrupted after " + std::to_string(p.blocks.size()) +
                      " of the " + std::to_string(p.plan.blocks) +
                      " blocks planned for this group: measured from those (each with 1/" +
                      std::to_string(p.plan.blocks) + " of the group's time budget)" +
                      (all.blocks_note.empty() ? "" : "; " + all.blocks_note);
    finish(p, results_of(p.group, all, t.positions, p.cache_policy));
    group_measured(p.group);
  } catch (const std::exception&) {
    release();  // what it measured cannot be reported consistently: left out
  }
}

void GroupRunner::finish(Pending& p, const std::vector<EntryResult>& out) {
  const ComparisonGroup& g = plan_.groups[p.group];
  for (std::size_t i = 0; i < g.members.size(); ++i) results_[g.members[i]].push_back(out.at(i));
  p.done = true;
}

void GroupRunner::run_block(Pending& p, std::size_t block) {
  const ComparisonGroup& g = plan_.groups[p.group];
  current_group_ = p.group;
  const measure::Regime regime = regime_of(fixtures_[g.members.front()]);
  try {
    NvtxRange range(g.key + "/timed/block" + std::to_string(block));
    release();  // every block on fresh buffers and ranks, after its own warm-up
    prepare(p.group);
    Active& a = *active_;
    p.cache_policy.resize(a.members.size());
    Timed t = timed_members(regime, p.cache_policy);
    if (block == 0) {
      p.positions = t.positions;
      if (t.members.empty()) {  // every member failed to prepare: their errors
        std::vector<EntryResult> out(a.members.size());
        for (std::size_t i = 0; i < a.members.size(); ++i) out[i] = EntryResult{a.members[i].error};
        finish(p, out);
        return;
      }
      p.plan = measure::plan_blocks(backend_, t.members, engine_for_active(), blocks());
    } else if (t.positions != p.positions) {
      p.alone = true;  // a member prepared in one block and not in another
      return;
    }
    p.blocks.push_back(
        measure::measure_group(regime, backend_, t.members, t.baseline, p.plan.per_block));
    if (p.blocks.size() == p.plan.blocks) {
      measure::GroupMeasurement all =
          p.plan.blocks == 1 ? std::move(p.blocks.front())
                             : measure::combine_blocks(p.blocks, settings_.engine.rule);
      measure::label(all, p.plan);
      finish(p, results_of(p.group, all, t.positions, p.cache_policy));
    }
  } catch (const measure::MemberFailure& e) {
    // Outside a TP group the group is measured again on its own, without the failing member
    // (as measure_prepared does); a TP group's ranks would be out of step: it fails.
    const bool tp = active_ && active_->tp;
    release();
    if (tp) {
      finish(p, std::vector<EntryResult>(g.members.size(), EntryResult{e.what()}));
    } else {
      p.alone = true;
    }
  } catch (const std::exception& e) {
    release();  // whatever state it left is not to be reused
    finish(p, std::vector<EntryResult>(g.members.size(), EntryResult{e.what()}));
  }
}

EntryResult GroupRunner::result_for(std::size_t group, std::size_t pos,
                                    const measure::GroupMeasurement& g,
                                    const std::vector<std::size_t>& timed,
                                    const std::vector<std::string>& cache_policy) {
  Active& a = *active_;
  Member& m = a.members[pos];
  const Fixture& f = fixtures_[m.fixture];
  const std::size_t t =
      static_cast<std::size_t>(std::find(timed.begin(), timed.end(), pos) - timed.begin());
  const measure::StoppingRule& rule = settings_.engine.rule;
  const measure::Summary s = entry_summary(g, t, rule);
  EntryResult r =
      timing_entry(g, t, s, rule, m.rotation ? m.rotation->sets() : 1, cache_policy[pos]);
  if (!r.error.empty()) return r;

  Comparison cmp{
      {}, f.variant, f.baseline_variant(), baseline_missing(group, f.baseline_variant())};
  for (std::size_t p : timed) cmp.variants.push_back(fixtures_[a.members[p].fixture].variant);
  add_comparison(g, t, cmp, r);
  add_clocks(s, settings_.engine.device != nullptr, r);
  const Cost cost = cost_of(m.ws->plan());
  add_roofline(f, m, g.regime, s.median, cost, r);
  add_counters(pos, g.regime, cost, r);
  if (a.tp) add_tp_report(pos, s.median, r);
  if (!a.tp) {  // a TP rank's steps need every rank: its collectives' share is in the TP report
    const double copy = settings_.ceilings != nullptr ? settings_.ceilings->bandwidth : 0;
    add_step_profile(m.ws->plan(), m.ws->time_steps(kStepProfileRuns), copy, s.median, r);
  }
  add_model_cost(cost, f.tokens, f.shard.tp, r);
  return r;
}

EntryResult GroupRunner::entry_for(std::size_t group, std::size_t pos,
                                   const measure::GroupMeasurement& g,
                                   const std::vector<std::size_t>& timed,
                                   const std::vector<std::string>& cache_policy) {
  EntryResult r = result_for(group, pos, g, timed, cache_policy);
  if (!r.error.empty()) return r;
  const Member& m = active_->members[pos];
  const Fixture& f = fixtures_[m.fixture];
  if (nlohmann::json rows = f.rows_json(); !rows.is_null()) r.fields["expert_rows"] = rows;
  if (f.quant) add_accuracy(pos, r);
  add_op_fields(m.ws->plan(), r);
  return r;
}

void GroupRunner::add_accuracy(std::size_t pos, EntryResult& r) {
  Active& a = *active_;
  const Fixture& f = fixtures_[a.members[pos].fixture];
  const std::int64_t rows = quant_reference_rows(f);
  // A TP pipeline runs on every rank at once; its rank 0 (this process's workspace) is read.
  const auto outputs = [&](std::size_t at) {
    if (!a.tp) return read_quant_outputs(*a.members[at].ws, rows);
    a.tp->region(a.tp_index[at]);
    return read_quant_outputs(*a.members[at].ws, rows, false);
  };
  const ShardOutputs got = outputs(pos);
  std::optional<ShardOutputs> split;
  for (std::size_t o = 0; o < a.members.size(); ++o) {
    const Member& other = a.members[o];
    if (o != pos && other.ws && fixtures_[other.fixture].variant == find_op(f.op).quant_split)
      split = outputs(o);
  }
  add_quant_accuracy(f, got, split ? &*split : nullptr, seed_, r.fields);
}

std::string GroupRunner::baseline_missing(std::size_t group, const std::string& baseline) const {
  const ComparisonGroup& cg = plan_.groups[group];
  std::string why = "the baseline (" + baseline + ") is not in this run (--variants)";
  for (const Member& other : active_->members) {
    if (fixtures_[other.fixture].variant == baseline && !other.error.empty())
      why = "the baseline (" + baseline + ") failed: " + other.error;
  }
  for (std::size_t u : cg.unselected) {
    if (fixtures_[u].variant == baseline)
      why = "the baseline (" + baseline +
            ") is not selected by --benchmark_filter, so it was not measured with this entry";
  }
  return why;
}

void GroupRunner::add_roofline(const Fixture& f, const Member& m, measure::Regime regime,
                               double median, const Cost& cost, EntryResult& r) {
  auto& c = r.counters;
  auto& fields = r.fields;
  const Plan& plan = m.ws->plan();
  // Quantized entries: the roofline of their spec's scaled GEMM (measured with the ceilings),
  // not the bf16 one; the published ceilings are not raised by them (one log per dtype).
  if (settings_.ceilings != nullptr && f.quant) {
    const Ceilings q =
        settings_.ceilings_log != nullptr
            ? settings_.ceilings_log->for_quant(*f.quant, settings_.ceilings_log->now_s())
            : settings_.ceilings->for_quant(*f.quant);
    if (q.peak_flops > 0) {
      if (const double frac = measure::roofline_fraction(plan, median, q); frac >= 0) {
        c["roofline_fraction"] = frac;
        if (frac > 1)
          fields["roofline_note"] =
              "above 1: this entry ran faster than its spec's scaled GEMM did in the ceiling's "
              "square product (context.ceilings.peak_flops_by_quant)";
      }
    }
  }
  if (settings_.ceilings != nullptr && !f.quant) {
    double frac = -1;
    if (settings_.ceilings_log != nullptr) {
      // Never above the roofline: a faster entry raises the published ceilings first (a
      // contended entry is only ever slower, so it never raises them).
      settings_.ceilings_log->observe(f.name(), f.dtype, plan, median);
      frac = settings_.ceilings_log->fraction(f.name(), median);
    } else {
      frac = measure::roofline_fraction(plan, median, settings_.ceilings->for_dtype(f.dtype));
    }
    if (frac >= 0) c["roofline_fraction"] = frac;
    // The fused-vs-split decomposition, once this variant and the baseline have the regimes.
    const std::string shape = f.group_data_key();
    decomposition_.record(shape, f.variant, measure::to_string(regime),
                          {median, cost.bytes, cost.launches});
    const auto d = decomposition_.decompose(shape, f.baseline_variant(), f.variant,
                                            settings_.ceilings->bandwidth);
    if (d.decomposition) fields["decomposition"] = *d.decomposition;
    if (!d.unavailable.empty()) fields["decomposition_unavailable"] = d.unavailable;
  }
  if (!m.algorithms.empty()) {
    // One entry per GEMM step of the plan (a grouped/batched step is one), in step order.
    const auto gemm_steps = static_cast<std::size_t>(
        std::count_if(plan.steps.begin(), plan.steps.end(), [](const Step& st) {
          return std::holds_alternative<GemmStep>(st) ||
                 std::holds_alternative<GroupedGemmStep>(st);
        }));
    fields["gemm_algorithms"] = std::vector<std::string>(
        m.algorithms.begin(), m.algorithms.begin() + std::min(m.algorithms.size(), gemm_steps));
  }
}

void GroupRunner::add_counters(std::size_t pos, measure::Regime regime, const Cost& cost,
                               EntryResult& r) {
  Active& a = *active_;
  Member& m = a.members[pos];
  const Fixture& f = fixtures_[m.fixture];
  // Counter passes, after timing and never during it: once per member (the regimes and
  // repetitions of a fixture run the same region, whose counts do not depend on the timing).
  const std::function<void()> region = [&] {
    if (a.tp) {
      a.tp->region(a.tp_index[pos]);
    } else {
      m.ws->run();
    }
  };
  if (!m.counted) {
    RegionCounters counted;
    for (const auto& collector : collectors_) counted.merge(collector->collect(f.name(), region));
    m.counted = counted;
  }
  RegionCounters measured = *m.counted;
  if (regime == measure::Regime::graph && !m.graphs.empty()) {
    // The launch-count pass counts eager runs of the region; a graph entry times a replay of its
    // capture, so the replay is counted too (graph nodes are kernel records with a graph id).
    for (const auto& collector : collectors_) {
      if (collector->name() != "launch-count") continue;
      const RegionCounters replay =
          collector->collect(f.name() + "/graph", [&m] { m.graphs.front()->launch(); });
      if (const auto it = replay.values.find("launches"); it != replay.values.end()) {
        measured.values["graph_launches"] = it->second;
      } else if (const auto why = replay.unavailable.find("launches");
                 why != replay.unavailable.end()) {
        measured.unavailable["graph_launches"] = why->second;
      }
    }
  }
  add_model_ratios(measured, cost.launches, cost.bytes);
  for (const auto& [counter, value] : measured.values) r.counters[counter] = value;
  if (!measured.unavailable.empty()) r.fields["counters_unavailable"] = measured.unavailable;
  if (!measured.kernel_names.empty()) r.fields["kernel_names"] = measured.kernel_names;
}

void GroupRunner::add_tp_report(std::size_t pos, double median, EntryResult& r) {
  Active& a = *active_;
  const Fixture& f = fixtures_[a.members[pos].fixture];
  // Compute/comm split (exposed and hidden against the median) and bus bandwidth.
  std::optional<Ceilings> ceilings;
  if (settings_.ceilings != nullptr) ceilings = settings_.ceilings->for_dtype(f.dtype);
  const TpReport tp = a.tp->report(a.tp_index[pos], median, ceilings ? &*ceilings : nullptr,
                                   settings_.engine.device, settings_.engine.block_timeout_s);
  for (const auto& [counter, value] : tp.counters) r.counters[counter] = value;
  for (const auto& [key, value] : tp.fields.items()) r.fields[key] = value;
}

std::string GroupRunner::tally_text() const {
  const Tally& t = tally_;
  if (t.measurements == 0) return "timing: no group was measured";
  std::string text = "timing: " + std::to_string(t.measurements) +
                     " interleaved group measurement(s): " + std::to_string(t.converged) +
                     " met the target (" + join({t.targets.begin(), t.targets.end()}) +
                     ", relative half-widths of 95% intervals), " + std::to_string(t.timed_out) +
                     " timed out";
  if (t.max_samples > 0) text += ", " + std::to_string(t.max_samples) + " hit max_samples";
  if (t.blocks_disagree > 0)
    text += ", " + std::to_string(t.blocks_disagree) +
            " whose blocks disagree (each converged; their spread widened the interval past the "
            "target)";
  if (!t.widest_group.empty())
    text += "; widest interval +-" + percent(t.widest) + " (" + t.widest_group + ")";
  if (t.not_computable > 0)
    text += "; " + std::to_string(t.not_computable) +
            " with too few valid rounds for a 95% interval (under 6)";
  if (t.contended > 0) text += ", " + std::to_string(t.contended) + " contended";
  if (t.timed_out > 0)
    text +=
        "; timed-out entries say timing_stop: timed_out (raise --timing-max-time to narrow them)";
  return text;
}

std::string GroupRunner::contention_text() const {
  const Tally& t = tally_;
  if (t.contended == 0) return {};
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "CONTENDED: %zu of %zu group measurement(s) are not judged (timing_stop: "
                "contended; %zu samples preempted, the busiest group ran beside %.2f cores of "
                "other processes): their figures are what the scheduler did, not the code. "
                "Measure on a quieter machine, or with fewer threads (--cpu-threads=1)",
                t.contended, t.measurements, t.preempted, std::max(0.0, t.worst_foreign_cores));
  return buf;
}

nlohmann::json GroupRunner::worst_load_json() const {
  if (tally_.worst_group.empty()) return nullptr;
  return {{"group", tally_.worst_group},
          {"foreign_cpu_cores", tally_.worst_foreign_cores},
          {"groups_contended", tally_.contended},
          {"samples_dropped_preempted", tally_.preempted}};
}

}  // namespace fusebench::bench
