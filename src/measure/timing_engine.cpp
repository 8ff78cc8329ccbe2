#include "measure/timing_engine.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>
#include <string>

namespace fusebench::measure {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A member while it is sampled: which rotation set runs next, its timer, its runs per sample.
struct MemberState {
  TimedMember* member = nullptr;
  std::vector<std::unique_ptr<GraphReplay>> own_graphs;
  std::vector<std::unique_ptr<GraphReplay>>* graphs = nullptr;
  std::unique_ptr<RegionTimer> timer;
  std::size_t next = 0;
  std::int64_t runs = 1;
  std::size_t block_timeouts = 0;
  std::size_t timeouts_at_one_run = 0;  // consecutive
  bool gave_up = false;
  std::string gave_up_reason;

  void run_next() { member->run_set(next++ % member->sets); }
  void replay_next() { (*graphs)[next++ % graphs->size()]->launch(); }
  void run_or_replay(Regime regime) { regime == Regime::graph ? replay_next() : run_next(); }
};

class Sampler {
 public:
  Sampler(Regime regime, Backend& backend, const EngineSettings& settings)
      : regime_(regime), backend_(backend), st_(settings), dev_(settings.device) {}

  // Warm-up, graph capture and the run estimate that sizes the samples.
  void prepare(MemberState& m) {
    // Every set once, untimed: first-touch work (algorithm selection, pointer arrays of grouped
    // GEMMs) must not land inside a sample, a blocked stream or a graph capture.
    for (std::size_t i = 0; i < m.member->sets; ++i) m.run_next();
    backend_.synchronize();
    m.next = 0;
    if (regime_ == Regime::graph) {
      m.graphs = m.member->graphs != nullptr ? m.member->graphs : &m.own_graphs;
      if (m.graphs->size() != m.member->sets) {
        m.graphs->clear();
        for (std::size_t i = 0; i < m.member->sets; ++i) {
          m.graphs->push_back(dev_->capture([&m, i] { m.member->run_set(i); }));
        }
      }
    }
    if (regime_ == Regime::batch || regime_ == Regime::cold) {
      probe_hold(m);
      if (m.gave_up) return;  // never sampled: no timer, no estimate
    }
    m.timer = backend_.make_timer();
    // One untimed run estimates the per-run time that sizes the samples.
    const auto t0 = Clock::now();
    m.run_or_replay(regime_);
    backend_.synchronize();
    const double estimate = since(t0);
    const int launches = std::max(1, m.member->launches_per_run);
    if (regime_ == Regime::batch) {
      m.runs = runs_per_sample(estimate, st_.target_sample_s, max_runs_behind_block(launches));
    } else if (regime_ == Regime::eager || regime_ == Regime::graph) {
      m.runs = runs_per_sample(estimate, st_.target_sample_s, 1000);
    } else {
      m.runs = 1;
    }
  }

  // One sample of `m`, exactly as a single region is sampled in this regime; nullopt when the
  // blocking kernel gave up before the sample was enqueued (then one run per sample is tried).
  std::optional<Sample> sample(MemberState& m) {
    Sample s;
    const double clock_before = read_clock();
    switch (regime_) {
      case Regime::cold: {
        backend_.flush_l2();
        // Held while the run is enqueued, so host launch gaps stay out of a microsecond region
        // (nvbench's cold loop does the same).
        enqueue_held(*dev_, st_.block_timeout_s, [&] {
          m.timer->start();
          m.run_next();
          m.timer->stop();
        });
        s.total_seconds = m.timer->seconds();
        s.seconds = s.total_seconds;
        break;
      }
      case Regime::batch: {
        enqueue_held(*dev_, st_.block_timeout_s, [&] {
          m.timer->start();
          for (std::int64_t r = 0; r < m.runs; ++r) m.run_next();
          m.timer->stop();
        });
        s.total_seconds = m.timer->seconds();
        s.seconds = s.total_seconds / static_cast<double>(m.runs);
        break;
      }
      case Regime::eager:
      case Regime::graph: {
        // Host wall time: a sample during which our threads waited for a CPU measured the
        // scheduler (contention.hpp). The run delay is read outside the timed span.
        RunDelays before;
        if (st_.run_delay != nullptr) before = st_.run_delay->read();
        const auto t0 = Clock::now();
        for (std::int64_t r = 0; r < m.runs; ++r) m.run_or_replay(regime_);
        backend_.synchronize();
        s.total_seconds = since(t0);
        s.seconds = s.total_seconds / static_cast<double>(m.runs);
        if (st_.run_delay != nullptr && !before.empty()) {
          s.waited_s = RunDelayProbe::waited_seconds(before, st_.run_delay->read());
          s.preempted = st_.drop_preempted && is_preempted(s.waited_s, s.total_seconds);
        }
        break;
      }
    }
    s.sm_clock_mhz = sample_clock(clock_before);
    if ((regime_ == Regime::batch || regime_ == Regime::cold) && dev_->block_timed_out()) {
      // The host could not enqueue the sample before the blocking kernel gave up: the sample
      // includes host gaps. Not a sample of this regime.
      ++m.block_timeouts;
      m.timeouts_at_one_run = m.runs == 1 ? m.timeouts_at_one_run + 1 : 0;
      if (m.timeouts_at_one_run >= kMaxTimeoutsAtOneRun) {
        m.gave_up = true;
        m.gave_up_reason = std::to_string(kMaxTimeoutsAtOneRun) +
                           " consecutive blocking-kernel timeouts at one run per sample";
      }
      // The queue behind the block never fills (max_runs_behind_block), so a timeout means the
      // region waits for the held stream between runs (e.g. a library waiting for its previous
      // call): one run per sample is the only batch that may fit. Halving would cost a block
      // timeout per step.
      m.runs = 1;
      return std::nullopt;
    }
    m.timeouts_at_one_run = 0;
    return s;
  }

 private:
  // A region that waits for the held stream (a synchronous copy inside a library) cannot be
  // sampled in batch or cold. One held run with a short timeout finds that out before round 0,
  // so such a member is retired at once instead of costing its group a block timeout per round.
  void probe_hold(MemberState& m) {
    enqueue_held(*dev_, kHoldProbeTimeoutS, [&] { m.run_next(); });
    backend_.synchronize();
    m.next = 0;
    if (dev_->block_timed_out()) {
      ++m.block_timeouts;
      m.gave_up = true;
      m.gave_up_reason =
          "its one held run in the warm-up did not finish enqueuing within the "
          "0.1 s hold probe";
    }
  }

  double read_clock() {
    if (dev_ == nullptr) return -1;
    dev_->probe_clock();
    backend_.synchronize();
    return dev_->probed_clock_mhz();
  }
  // A sample's clock is the lower of a probe just before it and one just after (unknown: -1),
  // so throttling that began or ended during the sample still marks it.
  double sample_clock(double before) {
    const double after = read_clock();
    if (before < 0) return after;
    return after < 0 ? before : std::min(before, after);
  }

  Regime regime_;
  Backend& backend_;
  const EngineSettings& st_;
  DeviceTiming* dev_;
};

// Rounds are cheap to take on small regions (thousands per second): the intervals are computed
// after every round while there are few, then after every ~1% more rounds.
bool assess_now(std::size_t rounds) { return rounds < 256 || rounds % (rounds / 100) == 0; }

// Runs `f` for member `m`; what it throws becomes m's MemberFailure. Work of m alone (its warm-up,
// capture, sample) ends with a synchronise, so an asynchronous error of m surfaces inside.
template <class F>
auto as_member(std::size_t m, F&& f) {
  try {
    return f();
  } catch (const MemberFailure&) {
    throw;
  } catch (const std::exception& e) {
    throw MemberFailure(m, e.what());
  }
}

}  // namespace

GroupMeasurement measure_group(Regime regime, Backend& backend, std::vector<TimedMember>& members,
                               std::optional<std::size_t> baseline,
                               const EngineSettings& settings) {
  if (members.empty()) throw std::invalid_argument("measure_group: the group has no member");
  if (regime_needs_gpu(regime) && settings.device == nullptr) {
    throw std::runtime_error(std::string("timing:") + to_string(regime) + " needs a GPU");
  }
  if (baseline && *baseline >= members.size()) baseline.reset();
  const std::size_t k = members.size();
  std::vector<MemberState> state(k);
  Sampler sampler(regime, backend, settings);
  for (std::size_t m = 0; m < k; ++m) {
    state[m].member = &members[m];
    if (members[m].sets == 0) members[m].sets = 1;
    as_member(m, [&] { sampler.prepare(state[m]); });
  }

  // One R for every member: a sample of each then has the same structure (runs back to back,
  // rotation sets visited), so the paired ratio compares like with like. Members sized apart
  // straddled an R threshold by a few percent of their estimates and moved the ratio by 7% on
  // the CPU (gate_up M=1: R 2 vs 3). The smallest R keeps every member within its own cap and
  // its samples within the target.
  std::int64_t common_runs = std::numeric_limits<std::int64_t>::max();
  for (const MemberState& m : state)
    if (!m.gave_up) common_runs = std::min(common_runs, m.runs);
  for (MemberState& m : state)
    if (!m.gave_up) m.runs = common_runs;

  GroupSamples samples(k, settings.rule);
  for (std::size_t m = 0; m < k; ++m) {
    if (state[m].gave_up) samples.retire(m);  // its held run timed out in prepare()
  }
  GroupMeasurement out;
  out.regime = regime;
  out.baseline = baseline;
  out.targets_speedup = targets_speedup(samples, baseline);
  out.target = target_text(out.targets_speedup, settings.rule.target_ci);
  Assessment assessment;
  const HostLoad load_before = read_host_load();
  const auto start = Clock::now();
  const double budget = settings.rule.max_time_s * static_cast<double>(k);
  for (;;) {
    if (std::all_of(state.begin(), state.end(), [](const MemberState& m) { return m.gave_up; })) {
      out.stop = StopReason::timed_out;  // every member timed out behind the blocking kernel
      break;
    }
    const std::size_t round = samples.rounds();
    samples.begin_round();
    for (std::size_t m : round_order(k, round)) {
      if (state[m].gave_up) continue;
      if (settings.on_sample) settings.on_sample(m, round);
      samples.add(m, as_member(m, [&] { return sampler.sample(state[m]); }));
      if (state[m].gave_up) samples.retire(m);
    }
    const double wall = since(start);
    const std::size_t rounds = samples.rounds();
    if (assess_now(rounds) || wall >= budget || rounds >= settings.rule.max_samples)
      assessment = assess(samples, baseline);
    out.stop = decide(assessment, samples, wall);
    if (out.stop != StopReason::keep_going) break;
  }
  out.wall_seconds = since(start);
  out.load = load_between(load_before, read_host_load());
  out.contention_watched = settings.run_delay != nullptr;
  out.preemption_checked = settings.run_delay != nullptr && settings.run_delay->available() &&
                           settings.drop_preempted &&
                           (regime == Regime::eager || regime == Regime::graph);
  out.rounds = samples.rounds();
  // A retired member may have changed what was targeted.
  out.targets_speedup = targets_speedup(samples, baseline);
  out.target = target_text(out.targets_speedup, settings.rule.target_ci);
  out.widest = assessment.widest;
  out.widest_member = assessment.widest_member;
  out.members.resize(k);
  out.speedup.assign(k, std::vector<std::optional<Estimate>>(k));
  for (std::size_t m = 0; m < k; ++m) {
    MemberMeasurement& r = out.members[m];
    r.summary = samples.summary(m);
    r.median = median_estimate(samples, m);
    r.runs_per_sample = state[m].runs;
    r.block_timeouts = state[m].block_timeouts;
    r.gave_up = state[m].gave_up;
    r.gave_up_reason = state[m].gave_up_reason;
    r.round_values = samples.values(m);
    r.samples = samples.samples(m);
    for (std::size_t j = 0; j < k; ++j) {
      if (j != m) out.speedup[m][j] = speedup_estimate(samples, m, j);
    }
  }
  apply_contention(out);
  return out;
}

void apply_contention(GroupMeasurement& g) {
  if (!g.contention_watched) return;  // the caller did not ask (no run-delay probe)
  std::size_t taken = 0, dropped = 0;
  bool emptied = false;
  for (const MemberMeasurement& m : g.members) {
    taken += m.samples.size();
    dropped += m.summary.dropped_preempted;
    emptied = emptied || (m.summary.samples == 0 && m.summary.dropped_preempted > 0);
  }
  const bool host_timed = g.regime == Regime::eager || g.regime == Regime::graph;
  g.stop = contention_stop(g.stop, host_timed, g.preemption_checked, taken, dropped,
                           g.load.foreign_cores, emptied);
}

}  // namespace fusebench::measure
