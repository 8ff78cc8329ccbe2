#include "timing_loop.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "fusebench/cost_model.hpp"
#include "fusebench/ops.hpp"

namespace fusebench::bench {
namespace {

using Clock = std::chrono::steady_clock;
using measure::Regime;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool has_collectives(const Plan& plan) { return plan.has_collectives(); }

// Builds the rotation sets of a fixture once (copies of set 0's bytes: no regeneration).
void prepare_rotation(RotationState& rot, const std::string& key, Workspace& ws,
                      const TimingSettings& settings) {
  if (rot.key == key) return;
  rot.reset();
  rot.backend = &ws.backend();
  rot.key = key;
  const Plan& plan = ws.plan();
  if (has_collectives(plan)) {
    rot.rotation = {1, false, "plan has collectives: one set (rank buffers are not rotated)"};
    return;
  }
  rot.rotation =
      measure::rotation_sets(ws.bytes(), settings.cache_bytes, settings.rotation_budget_bytes);
  std::vector<std::byte> host;
  for (std::size_t s = 1; s < rot.rotation.sets; ++s) {
    RotationState::Set set;
    try {
      for (int b = 0; b < static_cast<int>(plan.buffers.size()); ++b) {
        const std::size_t bytes = plan.buffer_bytes(b);
        set.buffers.push_back(ws.backend().allocate(bytes));
        const MatRef whole = ws.ref(View{b, 0, 0, plan.buffers[static_cast<std::size_t>(b)].rows,
                                         plan.buffers[static_cast<std::size_t>(b)].cols});
        host.resize(bytes);
        ws.backend().download(host.data(), whole.data, bytes);
        ws.backend().upload(set.buffers.back(), host.data(), bytes);
      }
    } catch (...) {
      for (void* p : set.buffers) ws.backend().release(p);
      throw;
    }
    rot.extra.push_back(std::move(set));
  }
}

struct Measurement {
  measure::Summary summary;
  measure::StopReason stop = measure::StopReason::keep_going;
  std::int64_t runs_per_sample = 1;
  std::size_t block_timeouts = 0;
};

Measurement measure_regime(Regime regime, Workspace& ws, const std::function<void()>& region,
                           RotationState& rot, const TimingSettings& st) {
  Backend& backend = ws.backend();
  measure::DeviceTiming* dev = st.device;
  if (measure::regime_needs_gpu(regime) && dev == nullptr) {
    throw std::runtime_error(std::string("timing:") + measure::to_string(regime) + " needs a GPU");
  }
  const std::size_t sets = 1 + rot.extra.size();
  std::size_t next = 0;
  const auto run_next = [&] {
    const std::size_t i = next++ % sets;
    if (i == 0) {
      region();
    } else {
      ws.run_on(rot.extra[i - 1].buffers);
    }
  };
  // Every set once, untimed: first-touch work (algorithm selection, pointer arrays of grouped
  // GEMMs) must not land inside a sample, a blocked stream or a graph capture.
  for (std::size_t i = 0; i < sets; ++i) run_next();
  backend.synchronize();
  next = 0;
  if (regime == Regime::graph && rot.graphs.size() != sets) {
    rot.graphs.clear();
    for (std::size_t i = 0; i < sets; ++i) rot.graphs.push_back(dev->capture(run_next));
    next = 0;
  }
  const auto read_clock = [&]() -> double {
    if (dev == nullptr) return -1;
    dev->probe_clock();
    backend.synchronize();
    return dev->probed_clock_mhz();
  };
  // A sample's clock is the lower of a probe just before it and one just after (unknown: -1),
  // so throttling that began or ended during the sample still marks it.
  const auto sample_clock = [&read_clock](double before) {
    const double after = read_clock();
    if (before < 0) return after;
    return after < 0 ? before : std::min(before, after);
  };
  auto timer = backend.make_timer();

  // One untimed run estimates the per-run time that sizes the samples.
  const auto t_est0 = Clock::now();
  if (regime == Regime::graph) {
    rot.graphs[next++ % sets]->launch();
  } else {
    run_next();
  }
  backend.synchronize();
  const double estimate = since(t_est0);

  Measurement m;
  const int launches = std::max(1, cost_of(ws.plan()).launches);
  if (regime == Regime::batch) {
    m.runs_per_sample = measure::runs_per_sample(estimate, st.target_sample_s,
                                                 measure::max_runs_behind_block(launches));
  } else if (regime == Regime::eager || regime == Regime::graph) {
    m.runs_per_sample = measure::runs_per_sample(estimate, st.target_sample_s, 1000);
  }
  std::int64_t runs = m.runs_per_sample;

  measure::SampleSet samples(st.rule);
  const auto start = Clock::now();
  for (;;) {
    measure::Sample s;
    const double clock_before = read_clock();
    switch (regime) {
      case Regime::cold: {
        backend.flush_l2();
        // Held while the run is enqueued, so host launch gaps stay out of a microsecond region
        // (nvbench's cold loop does the same).
        measure::enqueue_held(*dev, st.block_timeout_s, [&] {
          timer->start();
          run_next();
          timer->stop();
        });
        s.total_seconds = timer->seconds();
        s.seconds = s.total_seconds;
        s.sm_clock_mhz = sample_clock(clock_before);
        break;
      }
      case Regime::batch: {
        measure::enqueue_held(*dev, st.block_timeout_s, [&] {
          timer->start();
          for (std::int64_t r = 0; r < runs; ++r) run_next();
          timer->stop();
        });
        s.total_seconds = timer->seconds();
        s.seconds = s.total_seconds / static_cast<double>(runs);
        s.sm_clock_mhz = sample_clock(clock_before);
        break;
      }
      case Regime::eager:
      case Regime::graph: {
        const auto t0 = Clock::now();
        for (std::int64_t r = 0; r < runs; ++r) {
          if (regime == Regime::graph) {
            rot.graphs[next++ % sets]->launch();
          } else {
            run_next();
          }
        }
        backend.synchronize();
        s.total_seconds = since(t0);
        s.seconds = s.total_seconds / static_cast<double>(runs);
        s.sm_clock_mhz = sample_clock(clock_before);
        break;
      }
    }
    if ((regime == Regime::batch || regime == Regime::cold) && dev->block_timed_out()) {
      // The host could not enqueue the sample before the blocking kernel gave up: the sample
      // includes host gaps. Not a sample of this regime; a smaller batch may fit.
      ++m.block_timeouts;
      runs = std::max<std::int64_t>(1, runs / 2);
      m.runs_per_sample = runs;
    } else {
      samples.add(s);
    }
    m.stop = samples.check(since(start));
    if (m.stop != measure::StopReason::keep_going) break;
  }
  m.summary = samples.summary();
  return m;
}

std::string data_key(const Fixture& f) {
  return f.op + "/model:" + f.model.name + "/tokens:" + std::to_string(f.tokens) +
         "/tp:" + std::to_string(f.shard.tp) + "/dtype:" + std::string(to_string(f.dtype));
}

// Records this entry's median and, when both this variant and the op's baseline have an eager
// and a device-time regime, attaches the decomposition of their difference.
void update_decomposition(const Fixture& f, const Plan& plan, double median,
                          const TimingSettings& st, nlohmann::json& fields) {
  const Cost cost = cost_of(plan);
  auto& by_variant = st.log->points[data_key(f)];
  by_variant[f.variant][f.timing] = {median, cost.bytes, cost.launches};
  const std::string& baseline = find_op(f.op).variants.front();
  if (f.variant == baseline || !by_variant.count(baseline)) return;
  const auto times = [](const std::map<std::string, DecompositionLog::Point>& r,
                        std::string* device_regime) -> std::optional<measure::VariantTimes> {
    if (!r.count("eager")) return std::nullopt;
    for (const char* d : {"batch", "cold"}) {
      if (auto it = r.find(d); it != r.end()) {
        *device_regime = d;
        const auto& e = r.at("eager");
        return measure::VariantTimes{e.median_s, it->second.median_s, e.bytes, e.launches};
      }
    }
    return std::nullopt;
  };
  std::string base_dev, var_dev;
  const auto b = times(by_variant.at(baseline), &base_dev);
  const auto v = times(by_variant.at(f.variant), &var_dev);
  if (!b || !v || base_dev != var_dev) return;
  if (st.ceilings == nullptr || !(st.ceilings->bandwidth > 0)) {
    fields["decomposition_unavailable"] = "no measured bandwidth ceiling";
    return;
  }
  nlohmann::json d = measure::to_json(measure::decompose(*b, *v, st.ceilings->bandwidth));
  d["baseline"] = baseline;
  d["device_regime"] = base_dev;
  fields["decomposition"] = d;
}

}  // namespace

void RotationState::reset() {
  graphs.clear();
  if (backend != nullptr) {
    try {
      backend->synchronize();
    } catch (...) {
      // Freeing after a failed kernel is still right.
    }
    for (auto& set : extra) {
      for (void* p : set.buffers) backend->release(p);
    }
  }
  extra.clear();
  key.clear();
  rotation = {};
}

void time_region(benchmark::State& state, const Fixture& f, Workspace& ws,
                 const std::function<void()>& region, RotationState& rot,
                 const TimingSettings& settings, nlohmann::json& fields) {
  const Regime regime = measure::parse_regime(f.timing.empty() ? "eager" : f.timing);
  // Cold flushes before every sample; the others rotate through sets larger than the cache.
  if (regime == Regime::cold) {
    fields["cache_policy"] = "L2 flushed before each sample (one run per sample)";
  } else if (!f.comm.empty()) {
    // TP fixtures: the region drives every rank; copies of rank 0's buffers alone would
    // desynchronise the collectives.
    fields["cache_policy"] = "TP fixture: one set (rank buffers are not rotated)";
  } else {
    prepare_rotation(rot, data_key(f) + "/variant:" + f.variant, ws, settings);
    fields["cache_policy"] = rot.rotation.reason;
  }
  measure::StoppingRule rule = settings.rule;
  if (settings.device != nullptr) rule.default_clock_mhz = settings.device->default_clock_mhz();
  TimingSettings st = settings;
  st.rule = rule;

  Measurement m;
  for (auto _ : state) {
    m = measure_regime(regime, ws, region, rot, st);
    if (m.summary.samples == 0) {
      std::string why = "no valid sample: " + std::to_string(m.summary.dropped_throttled) +
                        " throttled, " + std::to_string(m.block_timeouts) +
                        " blocking-kernel timeouts";
      if (m.block_timeouts > 0 && m.runs_per_sample == 1) {
        why +=
            " (even one run could not be enqueued behind the blocking kernel: something in "
            "the region waits for the stream, e.g. a synchronous copy inside the library; "
            "time it with --timing=eager or graph)";
      }
      state.SkipWithError(why.c_str());
      return;
    }
    state.SetIterationTime(m.summary.median);
  }
  const measure::Summary& s = m.summary;
  using benchmark::Counter;
  state.counters["time_median"] = Counter(s.median);
  state.counters["time_mean"] = Counter(s.mean);
  state.counters["time_min"] = Counter(s.min);
  state.counters["time_cv"] = Counter(s.cv);
  state.counters["samples"] = Counter(static_cast<double>(s.samples));
  state.counters["samples_dropped_throttled"] = Counter(static_cast<double>(s.dropped_throttled));
  state.counters["runs_per_sample"] = Counter(static_cast<double>(m.runs_per_sample));
  state.counters["rotation_sets"] = Counter(static_cast<double>(1 + rot.extra.size()));
  state.counters["converged"] = Counter(m.stop == measure::StopReason::converged ? 1 : 0);
  if (regime == Regime::batch || regime == Regime::cold)
    state.counters["samples_dropped_block_timeout"] =
        Counter(static_cast<double>(m.block_timeouts));
  fields["timing"] = measure::to_string(regime);
  fields["timing_stop"] = measure::to_string(m.stop);
  if (s.clock_mhz_mean) {
    state.counters["sm_clock_mhz"] = Counter(*s.clock_mhz_mean);
    state.counters["sm_clock_min_mhz"] = Counter(*s.clock_mhz_min);
  } else {
    fields["sm_clock_unavailable"] = settings.device == nullptr
                                         ? "no GPU: the CPU clock is not read; no sample is dropped"
                                         : "the clock probe returned no reading";
  }
  if (settings.ceilings != nullptr) {
    const double frac =
        measure::roofline_fraction(ws.plan(), s.median, settings.ceilings->for_dtype(f.dtype));
    if (frac >= 0) state.counters["roofline_fraction"] = Counter(frac);
  }
  update_decomposition(f, ws.plan(), s.median, settings, fields);
}

}  // namespace fusebench::bench

namespace fusebench::bench {

TimingSetup setup_timing(const Options& o, Backend& backend, const Sweep& sweep,
                         nlohmann::json& context) {
  TimingSetup t;
  const bool gpu = backend.name() != "cpu";
  backend.set_gemm_algo_policy(o.gemm_algo);
  std::string why;
  t.device = measure::make_device_timing(backend, &why);
  measure::StoppingRule& rule = t.settings.rule;
  rule.target_cv = o.timing_target_cv;
  // Defaults sized for the sweep (docs/timing.md): the GPU default sweep has ~360 fixtures x 2
  // regimes and must fit a device check of a few minutes; nvbench's own are 0.5 s / 15 s.
  rule.min_time_s = o.timing_min_time >= 0 ? o.timing_min_time : (gpu ? 0.05 : 0.02);
  rule.max_time_s = o.timing_max_time >= 0 ? o.timing_max_time : (gpu ? 1.0 : 0.5);
  t.settings.device = t.device.get();
  // Rotation defeats the GPU's L2; on the CPU the last-level cache (when the OS says).
  if (gpu) {
    t.settings.cache_bytes = context.value("gpu_l2_bytes", std::size_t{0});
    t.settings.rotation_budget_bytes = std::size_t{4} << 30;
  } else {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    t.settings.cache_bytes = static_cast<std::size_t>(std::max({0L, l3, l2}));
    t.settings.rotation_budget_bytes = std::size_t{256} << 20;
  }
  const auto t0 = std::chrono::steady_clock::now();
  t.ceilings = std::make_unique<measure::MeasuredCeilings>(
      measure::measure_ceilings(backend, sweep.dtypes, t.device.get()));
  t.ceilings->json["measure_seconds"] = since(t0);
  t.settings.ceilings = t.ceilings.get();
  context["ceilings"] = t.ceilings->json;

  nlohmann::json clock =
      t.device ? nlohmann::json{{"source",
                                 "clock64 over 10 us of globaltimer, one SM, just before and just "
                                 "after every sample; the lower counts"},
                                {"default_mhz", t.device->default_clock_mhz()},
                                {"throttle_below_mhz",
                                 rule.throttle_fraction * t.device->default_clock_mhz()}}
               : nlohmann::json{
                     {"source", "unavailable: " + why + "; no sample is dropped for throttling"}};
  context["timing"] = {
      {"regimes", sweep.timing},
      {"regime_definitions",
       {{"cold", "L2 flushed before each sample; CUDA events around one run (device time)"},
        {"batch",
         "runs queued behind a blocking kernel, then released: device time per run, host launch "
         "cost hidden"},
        {"eager",
         "host wall time per run: runs issued back to back as an engine would, synchronised at the "
         "end of each sample"},
        {"graph",
         "each rotation set captured once into a CUDA graph; host wall time per replay, "
         "synchronised per sample"}}},
      {"stopping_rule",
       {{"target_cv", rule.target_cv},
        {"min_time_s", rule.min_time_s},
        {"max_time_s", rule.max_time_s},
        {"min_samples", rule.min_samples},
        {"throttle_fraction", rule.throttle_fraction}}},
      {"sm_clock", clock},
      {"gemm_algo", gpu ? o.gemm_algo : std::string("OpenBLAS (no algorithm choice)")},
      {"cache_bytes", t.settings.cache_bytes},
      {"gbench_mapping",
       "one iteration per entry = one measurement; real_time = median time per run"},
      {"counter_definitions",
       {{"time_median", "median time per run over the valid samples, s (= real_time)"},
        {"time_mean", "mean time per run, s"},
        {"time_min", "fastest sample's time per run, s"},
        {"time_cv", "relative standard deviation of the samples (stdev/mean)"},
        {"samples", "valid samples the statistics use"},
        {"samples_dropped_throttled",
         "samples dropped: SM clock below throttle_fraction x default"},
        {"samples_dropped_block_timeout",
         "batch samples dropped: the blocking kernel timed out before release"},
        {"runs_per_sample",
         "runs per sample (the sample's time divided by this is one sample value)"},
        {"rotation_sets", "copies of the buffers cycled through so weights are not cache-warm"},
        {"converged", "1 when the target CV was reached, 0 on timeout"},
        {"sm_clock_mhz", "mean SM clock over the valid samples"},
        {"roofline_fraction", "roofline time (measured ceilings, per step) / time_median"}}}};
  return t;
}

}  // namespace fusebench::bench
